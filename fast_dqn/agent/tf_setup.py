"""Process-wide TensorFlow settings. Call `configure_tensorflow` once, before building a model."""

import contextlib
import os
import re
import sys
import tempfile

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
    """Run the block with file descriptor 2 captured, then pass on every line of it but the
    start-up noise. TF's C++ logging writes to the descriptor directly, before
    TF_CPP_MIN_LOG_LEVEL is read, so nothing at the Python level can silence it."""
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


def configure_tensorflow(seed, threads=0, deterministic=True):
    """Seed everything TF-side, make ops deterministic, and be a good GPU neighbour.

    Memory growth keeps TF from grabbing the whole GPU at start-up, so two runs (or a run and a
    notebook) can share one card. `threads` bounds intra-op threads: the learner shares the CPU
    with the env samplers, and TF's default of one thread per core oversubscribes it.
    Returns the logical devices TF will use, for the log.
    """
    quiet_tensorflow()
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
        return [d.name for d in tf.config.list_logical_devices()
                if d.device_type in ("GPU", "CPU")]


def cpu_computes_bfloat16(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU has bfloat16 arithmetic (AVX512-BF16 or AMX), which oneDNN uses:
    elsewhere TensorFlow emulates bfloat16, several times slower than float32."""
    try:
        with open(cpuinfo) as f:
            flags = set(f.read().split())
    except OSError:  # not Linux: say no, and let a GPU decide
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def gpu_compute_capabilities():
    """[(major, minor)] of each GPU TensorFlow sees; bfloat16 runs natively from (8, 0), Ampere."""
    quiet_tensorflow()
    with without_start_up_noise():
        import tensorflow as tf
        gpus = tf.config.list_physical_devices("GPU")
        return [tf.config.experimental.get_device_details(gpu).get("compute_capability", (0, 0))
                for gpu in gpus]


def computes_bfloat16():
    """Whether the device that trains computes bfloat16 natively: every GPU TensorFlow sees,
    or the CPU when there is none."""
    capabilities = gpu_compute_capabilities()
    if capabilities:
        return min(capabilities) >= (8, 0)
    return cpu_computes_bfloat16()


def fastest_precision():
    """The compute type --precision auto means. float16 is never chosen: it needs loss
    scaling and is slow on CPUs, so it stays an explicit choice."""
    return "bfloat16" if computes_bfloat16() else "float32"
