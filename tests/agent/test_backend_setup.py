"""The backend's start-up: TensorFlow's C++ noise is dropped from file descriptor 2, anything
else kept."""

import os
import subprocess
import sys

import pytest
from helpers import ROOT

from fast_dqn.agent.backend_setup import configure_backend, without_start_up_noise

pytestmark = pytest.mark.backends  # Keras backends, precision: see docs/testing.md's markers


def test_start_up_noise_is_dropped_and_other_lines_are_kept(capfd):
    noise = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "I0000 00:00:1795365163.210174   20661 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.\n"
        "E0000 00:00:1795365270.145349   21146 cuda_platform.cc:52] failed call to cuInit: "
        "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n"
        "I0000 00:00:1795365268.819121   21146 port.cc:153] oneDNN custom operations are on.\n")
    with without_start_up_noise():
        os.write(2, noise.encode())
        os.write(2, b"E0000 something else went wrong in TensorFlow\n")
    err = capfd.readouterr().err
    assert err == "E0000 something else went wrong in TensorFlow\n"


def test_the_descriptor_is_given_back_even_after_an_error(capfd):
    try:
        with without_start_up_noise():
            raise RuntimeError("import failed")
    except RuntimeError:
        pass
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_the_device_line_names_the_gpu_or_says_there_is_none():
    from fast_dqn.agent.backend_setup import device_line
    assert device_line("jax", [("GPU:0", "NVIDIA H100 80GB HBM3")]) == \
        "device: GPU:0 (NVIDIA H100 80GB HBM3); Keras backend: jax"
    assert device_line("tensorflow", [("GPU:0", "A"), ("GPU:1", "B")]) == \
        "device: GPU:0 (A), of 2 GPUs; Keras backend: tensorflow"
    assert device_line("tensorflow", [("CPU", "CPU")]) == \
        "device: CPU (TensorFlow found no GPU); Keras backend: tensorflow"
    assert device_line("jax", [("CPU:0", "cpu")]) == \
        "device: CPU (JAX found no GPU); Keras backend: jax"


def test_the_device_line_names_the_precision_and_what_auto_chose():
    from fast_dqn.agent.backend_setup import device_line
    cpu = [("CPU", "CPU")]
    assert device_line("tensorflow", cpu, "float32").endswith("; precision: float32")
    assert device_line("tensorflow", cpu, "bfloat16", chosen=True).endswith(
        "; precision: bfloat16 (--precision auto: computed natively here)")
    assert device_line("jax", cpu, "float32", chosen=True).endswith(
        "; precision: float32 (--precision auto: no bfloat16 arithmetic here)")


def test_a_resolved_config_remembers_that_auto_chose_its_precision(monkeypatch):
    import pickle

    from fast_dqn.agent import backend_setup
    from fast_dqn.run.settings.hyperparameters import Config
    from fast_dqn.run.settings.validation import resolve
    monkeypatch.setattr(backend_setup, "computes_bfloat16", lambda: False)
    chosen = resolve(Config(env="CartPole-v1", precision="auto", replay_capacity=1_000,
                            prepopulate=100))
    assert chosen.precision == "float32" and chosen.precision_chosen
    assert pickle.loads(pickle.dumps(chosen)).precision_chosen
    given = resolve(Config(env="CartPole-v1", replay_capacity=1_000, prepopulate=100))
    assert not given.precision_chosen


@pytest.mark.parametrize("name", ["torch", "numpy", "openvino"])
def test_a_backend_fast_dqn_does_not_run_on_is_one_config_error(monkeypatch, name):
    import keras

    from fast_dqn.agent import backend_setup
    from fast_dqn.errors import ConfigError
    monkeypatch.setattr(keras.backend, "backend", lambda: name)
    with pytest.raises(ConfigError, match=f"KERAS_BACKEND={name} is not supported; set it "
                       "to tensorflow or jax"):
        backend_setup.keras_backend()


@pytest.mark.parametrize("backend, expected", [("tensorflow", True), ("jax", False)])
def test_a_bfloat16_cpu_counts_only_under_tensorflow(monkeypatch, backend, expected):
    """oneDNN computes bfloat16 on AVX512-BF16 or AMX; XLA's CPU compiler widens it."""
    from fast_dqn.agent import backend_setup
    monkeypatch.setattr(backend_setup, "keras_backend", lambda: backend)
    monkeypatch.setattr(backend_setup, "gpu_compute_capabilities", lambda: [])
    monkeypatch.setattr(backend_setup, "cpu_computes_bfloat16", lambda: True)
    assert backend_setup.computes_bfloat16() is expected
    monkeypatch.setattr(backend_setup, "gpu_compute_capabilities", lambda: [(8, 0)])
    assert backend_setup.computes_bfloat16()


@pytest.mark.parametrize("typed", ["Jax", " jax", "pytorch", "torch", "JAX"])
def test_a_keras_backend_we_do_not_run_on_is_one_line_before_keras_reads_it(tmp_path, typed):
    """Keras itself answers 'Jax' with a ValueError traceback and 'torch', where torch is
    missing, with an ImportError: the variable is read before Keras is imported. The flags
    pass their own checks, which come first."""
    result = subprocess.run(
        [sys.executable, "run_dqn.py", "--env", "CartPole-v1", "--timesteps", "2000",
         "--logdir", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "KERAS_BACKEND": typed})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"run_dqn.py: error: KERAS_BACKEND={typed!r} is not a backend fast-dqn runs on; set "
        "it to tensorflow or jax (lower case), or unset it"]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("asked,jax_name,tensorflow_tf32", [
    ("float32", "float32", False), ("tf32", "tensorfloat32", True), ("default", None, True)])
def test_matmul_precision_reaches_the_backend(asked, jax_name, tensorflow_tf32):
    """Each backend's own switch: JAX's default matmul precision, TensorFlow's TF32."""
    backend, _ = configure_backend(0, matmul_precision=asked)
    try:
        if backend == "jax":
            import jax
            assert jax.config.jax_default_matmul_precision == jax_name
        else:
            import tensorflow as tf
            assert tf.config.experimental.tensor_float_32_execution_enabled() is tensorflow_tf32
    finally:
        configure_backend(0)
