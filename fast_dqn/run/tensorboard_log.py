"""TensorBoard scalars of a run, in <run_dir>/tensorboard: `tensorboard --logdir runs`."""

import os


class TensorBoardLog:
    def __init__(self, run_dir):
        import tensorflow as tf
        self._tf = tf
        # Pinned to the CPU: summaries must never claim GPU memory or wait on the device.
        with tf.device("/CPU:0"):
            self.writer = tf.summary.create_file_writer(os.path.join(run_dir, "tensorboard"))

    def scalars(self, step, values):
        """Write {tag: value} at agent step `step`; None values are skipped."""
        with self._tf.device("/CPU:0"), self.writer.as_default(step=step):
            for tag, value in values.items():
                if value is not None:
                    self._tf.summary.scalar(tag, value)

    def flush(self):
        self.writer.flush()

    def close(self):
        self.writer.close()
