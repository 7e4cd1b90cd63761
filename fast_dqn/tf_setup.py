"""Process-wide TensorFlow settings. Call `configure_tensorflow` once, before building a model."""

import os


def quiet_tensorflow():
    """Hide TF's C++ start-up chatter (CUDA probing, oneDNN notes) unless the user asked for it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def configure_tensorflow(seed, threads=0, deterministic=True):
    """Seed everything TF-side, make ops deterministic, and be a good GPU neighbour.

    Memory growth keeps TF from grabbing the whole GPU at start-up, so two runs (or a run and a
    notebook) can share one card. `threads` bounds intra-op threads: the learner shares the CPU
    with the env samplers, and TF's default of one thread per core oversubscribes it.
    Returns the logical devices TF will use, for the log.
    """
    quiet_tensorflow()
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
    return [d.name for d in tf.config.list_logical_devices() if d.device_type in ("GPU", "CPU")]
