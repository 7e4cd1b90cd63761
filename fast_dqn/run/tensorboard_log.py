"""TensorBoard scalars of a run, in <run_dir>/tensorboard: `tensorboard --logdir runs`."""

import errno
import os
import re


class TensorBoardLog:
    def __init__(self, run_dir):
        import tensorflow as tf
        self._tf = tf
        self.path = os.path.join(run_dir, "tensorboard")
        # Pinned to the CPU: summaries must never claim GPU memory or wait on the device.
        with tf.device("/CPU:0"):
            self.writer = tf.summary.create_file_writer(self.path)

    def scalars(self, step, values):
        """Write {tag: value} at agent step `step`; None values are skipped."""
        with self._as_os_errors(), self._tf.device("/CPU:0"), \
                self.writer.as_default(step=step):
            for tag, value in values.items():
                if value is not None:
                    self._tf.summary.scalar(tag, value)

    def flush(self):
        with self._as_os_errors():
            self.writer.flush()

    def close(self):
        with self._as_os_errors():
            self.writer.close()

    def _as_os_errors(self):
        return _OsErrors(self._tf.errors.OpError, self.path)


class _OsErrors:
    """TensorFlow reports a failed event-file write (a full disk, say) as an OpError with a
    C++ traceback; the run reports it as the OSError it is, in one line (see run/cli.py)."""

    def __init__(self, op_error, path):
        self.op_error, self.path = op_error, path

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if kind is None or not issubclass(kind, self.op_error):
            return False
        text = error.message if hasattr(error, "message") else str(error)
        text = re.sub(r"\{\{[^}]*\}\}\s*", "", text)  # TF's name of its own op
        code = errno.ENOSPC if "No space left" in text else (
            errno.EDQUOT if "quota" in text.lower() else errno.EIO)
        raise OSError(code, f"{os.strerror(code)}: {text.splitlines()[0][:200]}",
                      self.path) from error
