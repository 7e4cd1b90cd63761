"""Process-wide settings of the Keras backend: seeds, threads, GPU memory, a quiet start-up.

The backend is Keras's own choice (configured_backend says where Keras looks for it);
fast-dqn runs on TensorFlow and JAX. Call `configure_backend` once, before building a model.
"""

import contextlib
import json
import os
import re
import sys
import tempfile

from fast_dqn.errors import ConfigError

# What TensorFlow's C++ prints at start-up on every machine without a GPU, or about builds:
# it says nothing the device line does not, and it is the first thing a user would read.
_START_UP_NOISE = re.compile(
    r"cudart_stub\.cc|cuda_platform\.cc|failed call to cuInit|cuda_executor\.cc|"
    r"port\.cc:\d+\] oneDNN custom operations|cpu_feature_guard\.cc|"
    r"All log messages before absl::InitializeLog\(\) is called|"
    r"^To enable the following instructions:.*rebuild TensorFlow|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|TF-TRT Warning")


def quiet_tensorflow():
    """Hide TF's Python-side INFO and WARNING logs unless the user asked for them."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@contextlib.contextmanager
def without_start_up_noise():
    """Run the block with stderr captured, then pass on every line of it but the start-up noise.

    The capture is of file descriptor 2: TF's C++ logging writes to it directly, before
    TF_CPP_MIN_LOG_LEVEL is read, so nothing at the Python level can silence it.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode(errors="replace").splitlines()
                    if line.strip() and not _START_UP_NOISE.search(line)]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
                sys.stderr.flush()


SUPPORTED_BACKENDS = ("tensorflow", "jax")


class UnsupportedBackend(ConfigError):
    """KERAS_BACKEND names a backend fast-dqn does not run on (or one Keras cannot load)."""

    def __init__(self, message):
        super().__init__(None, message)


def keras_backend():
    """The backend Keras picked, loaded and checked; under JAX, no TensorFlow is imported.

    Importing Keras imports its backend, so the checks that must come before it (the name in
    KERAS_BACKEND, the address-space limit) come first. Raises UnsupportedBackend.

    Returns:
        "tensorflow" or "jax".
    """
    quiet_tensorflow()
    choice = " or ".join(SUPPORTED_BACKENDS)
    typed = os.environ.get("KERAS_BACKEND")
    if typed and typed not in SUPPORTED_BACKENDS:
        # Before Keras reads it: Keras answers a name it does not know ('Jax', ' jax') with
        # a ValueError traceback, and one it knows but we do not run on ('torch') with an
        # ImportError where torch is missing.
        raise UnsupportedBackend(f"KERAS_BACKEND={typed!r} is not a backend fast-dqn runs on; "
                                 f"set it to {choice} (lower case), or unset it")
    _check_address_space(typed)
    try:
        with without_start_up_noise():
            import keras
    except ImportError as error:  # Keras imports its backend first thing
        raise UnsupportedBackend(f"Keras could not load its backend ({error}); install it, "
                                 f"or set KERAS_BACKEND to {choice}") from None
    except ValueError as error:  # ~/.keras/keras.json names a backend Keras does not know
        raise UnsupportedBackend(f"Keras could not load its backend ({error}); set "
                                 f"KERAS_BACKEND to {choice}, or fix ~/.keras/keras.json") \
            from None
    name = keras.backend.backend()
    if name not in SUPPORTED_BACKENDS:
        raise UnsupportedBackend(f"KERAS_BACKEND={name} is not supported; set it to {choice}")
    if name == "jax":
        _tell_xla()
        _source_names_xla_can_take()
    return name


# TensorFlow aborted with a C++ stack dump, importing and building a Dense layer, under
# `ulimit -v` 2 GiB and ran a CartPole run under 3 GiB (measured, 2026-11-26; it maps 2.3 GiB
# of addresses at that point). JAX built it under 2 GiB.
TENSORFLOW_ADDRESS_SPACE = 3 << 30


def configured_backend():
    """The backend Keras will load, found without importing it.

    Returns:
        KERAS_BACKEND as typed, else the "backend" of keras.json in KERAS_HOME (~/.keras by
        default), else "tensorflow".
    """
    return _configured_backend(os.environ.get("KERAS_BACKEND"))


def _configured_backend(typed):
    """configured_backend, with KERAS_BACKEND as `typed`."""
    if typed:
        return typed
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json")) as f:
            found = json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        found = None
    return found if isinstance(found, str) else "tensorflow"


def _check_address_space(typed):
    """Refuse, before TensorFlow is imported, an address-space limit it would abort under."""
    import resource
    if _configured_backend(typed) != "tensorflow" or "keras" in sys.modules:
        return
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft < TENSORFLOW_ADDRESS_SPACE:
        raise UnsupportedBackend(f"`ulimit -v` limits this process to {soft / 2**30:.2f} GiB of "
                                 "address space, and TensorFlow aborts under "
                                 f"{TENSORFLOW_ADDRESS_SPACE >> 30} GiB; raise it "
                                 "(ulimit -v unlimited), or use KERAS_BACKEND=jax")


def _tell_xla():
    """Set XLA's flags: no preallocation of GPU memory (TF's memory growth), and deterministic
    kernels (TF's op determinism). XLA reads them when its first client starts, which the first
    question to JAX does (even `jax.devices()`): so here, where every path asks for the backend."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if "xla_gpu_deterministic_ops" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + " --xla_gpu_deterministic_ops=true").strip()


def _source_names_xla_can_take():
    """Have JAX drop source file names that are not UTF-8 before they reach XLA.

    JAX hands XLA each op's source file name, and one that is not UTF-8 (its bytes come back as
    lone surrogates, which the pattern matches) cannot cross into C++: every compile fails with a
    bad cast. A pattern the user set stays (TensorFlow's counterpart: train_step_tf).
    """
    import jax

    if not jax.config.jax_hlo_source_file_canonicalization_regex:
        jax.config.update("jax_hlo_source_file_canonicalization_regex",
                          r"^.*[\udc80-\udcff].*$")


# --matmul-precision as each backend names it (None: the backend's own default).
JAX_MATMUL = {"default": None, "float32": "float32", "tf32": "tensorfloat32"}


def configure_backend(seed, threads=0, deterministic=True, matmul_precision="default"):
    """Seed everything, make ops deterministic, and be a good GPU neighbour, on either backend.

    Args:
        seed: seeds Python's, numpy's global and the backend's RNGs.
        threads: bounds TensorFlow's intra-op threads (0: its default); JAX sizes its own pool.
        deterministic: whether TensorFlow's ops are deterministic (JAX's: compile_options).
        matmul_precision: --matmul-precision: "default", "float32" or "tf32".

    Returns:
        (backend, devices that will train as [(name, kind)]; [("CPU", "CPU")] on TF's CPU).
    """
    name = keras_backend()
    if name == "jax":
        return name, _configure_jax(seed, matmul_precision)
    return name, _configure_tensorflow(seed, threads, deterministic, matmul_precision)


def _configure_tensorflow(seed, threads, deterministic, matmul_precision):
    """configure_backend under TensorFlow. Memory growth lets two runs share one GPU; `threads` is
    bounded: the learner shares the CPU with the samplers, which TF's thread per core crowds."""
    with without_start_up_noise():
        import keras
        import tensorflow as tf

        for gpu in tf.config.list_physical_devices("GPU"):
            tf.config.experimental.set_memory_growth(gpu, True)
        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(max(1, min(2, threads)))
        keras.utils.set_random_seed(seed)  # python, numpy's global RNG and TF
        if deterministic:
            tf.config.experimental.enable_op_determinism()
        tf.config.experimental.enable_tensor_float_32_execution(matmul_precision != "float32")
        gpus = tf.config.list_physical_devices("GPU")
        return ([(gpu.name.split("physical_device:")[-1],
                  tf.config.experimental.get_device_details(gpu).get("device_name", "GPU"))
                 for gpu in gpus] or [("CPU", "CPU")])


def _configure_jax(seed, matmul_precision):
    """configure_backend under JAX, whose XLA flags keras_backend set already."""
    import jax
    import keras

    from fast_dqn.agent.compile_cache import compile_clock

    jax.config.update("jax_default_matmul_precision", JAX_MATMUL[matmul_precision])
    compile_clock()  # listening from the first compile on

    # Keras's set_random_seed seeds TensorFlow too wherever it can import it, which would load
    # TensorFlow (seconds, and its own hold on the GPU) into a JAX run. A None in sys.modules
    # makes that import fail at once; Keras then remembers TensorFlow as absent.
    hidden = sys.modules.setdefault("tensorflow", None) is None
    try:
        keras.utils.set_random_seed(seed)  # python, numpy's global RNG, Keras's seed generator
    finally:
        if hidden:
            del sys.modules["tensorflow"]
    return [(f"{d.platform.upper()}:{d.id}", d.device_kind) for d in jax.devices()]


def device_line(backend, devices, precision=None, chosen=False):
    """The start-up line that says where the networks train, and in what compute type.

    Args:
        backend: the backend's name, as `configure_backend` returns it.
        devices: the devices that train, [(name, kind)], as `configure_backend` returns them.
        precision: "float32", "bfloat16" or "float16"; None leaves it out of the line.
        chosen: whether --precision auto chose it, which the line then says, with why.

    Returns:
        The line, without a newline.
    """
    gpus = [f"{name} ({kind})" for name, kind in devices if name != "CPU" and
            not name.startswith("CPU:")]
    where = (gpus[0] + (f", of {len(gpus)} GPUs" if len(gpus) > 1 else "") if gpus
             else f"CPU ({'TensorFlow' if backend == 'tensorflow' else 'JAX'} found no GPU)")
    line = f"device: {where}; Keras backend: {backend}"
    if precision:
        line += f"; precision: {precision}"
        if chosen:
            why = ("computed natively here" if precision != "float32"
                   else "no bfloat16 arithmetic here")
            line += f" (--precision auto: {why})"
    return line


def _cpu_flags(cpuinfo):
    try:
        with open(cpuinfo) as f:
            return set(f.read().split())
    except OSError:  # not Linux: no flags, and a GPU decides
        return set()


def cpu_computes_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU has bfloat16 arithmetic (AVX512-BF16 or AMX), which oneDNN uses.

    Elsewhere TensorFlow emulates bfloat16, several times slower than float32.
    """
    return bool(_cpu_flags(cpuinfo) & {"avx512_bf16", "amx_bf16"})


def cpu_computes_float16(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU has float16 arithmetic (AVX512-FP16 or AMX-FP16)."""
    return bool(_cpu_flags(cpuinfo) & {"avx512_fp16", "amx_fp16"})


def gpu_compute_capabilities():
    """[(major, minor)], the compute capability of each GPU the backend sees."""
    if keras_backend() == "jax":
        import jax
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:  # no GPU backend in this jaxlib, or no GPU
            return []
        return [tuple(int(part) for part in str(gpu.compute_capability).split(".")[:2])
                for gpu in gpus]
    with without_start_up_noise():
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
        return [tf.config.experimental.get_device_details(gpu).get("compute_capability", (0, 0))
                for gpu in gpus]


def computes_bfloat16():
    """Whether the device that trains computes bfloat16 natively.

    Returns:
        True where every GPU does (compute capability 8.0 on), or, with no GPU, the CPU under TF.
    """
    capabilities = gpu_compute_capabilities()
    if capabilities:
        return min(capabilities) >= (8, 0)
    # oneDNN, under TensorFlow, computes bfloat16 on such a CPU; XLA's CPU compiler, under
    # JAX, widens it to float32 and back, so there it is only slower.
    return keras_backend() == "tensorflow" and cpu_computes_bfloat16()


def computes_float16():
    """Whether the device that trains computes float16 natively.

    Returns:
        True with a GPU (every one since 2016 does), or a CPU with float16 arithmetic under TF.
    """
    if gpu_compute_capabilities():
        return True
    return keras_backend() == "tensorflow" and cpu_computes_float16()


def fastest_precision():
    """The compute type --precision auto means on this machine.

    float16 is never chosen: it needs loss scaling and is slow on CPUs.

    Returns:
        "bfloat16" where the device that trains computes it natively, else "float32".
    """
    return "bfloat16" if computes_bfloat16() else "float32"


def accelerator_memory():
    """The accelerator the networks train on, and its free memory.

    Returns:
        (device name, free bytes or None where TensorFlow does not say); None on the CPU.
    """
    if keras_backend() == "jax":
        import jax
        device = jax.devices()[0]
        if device.platform == "cpu":
            return None
        stats = device.memory_stats() or {}
        free = stats.get("bytes_limit", 0) - stats.get("bytes_in_use", 0)
        return f"{device.platform.upper()}:{device.id}", free if "bytes_limit" in stats else None
    with without_start_up_noise():
        import tensorflow as tf
        # Physical, not logical: listing logical devices starts TF's runtime, after which
        # configure_backend could no longer set memory growth or the thread pools.
        if not tf.config.list_physical_devices("GPU"):
            return None
    return "GPU:0", None  # TensorFlow reports what it uses, not what the GPU has
