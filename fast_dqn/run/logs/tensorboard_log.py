"""TensorBoard scalars of a run, in <run_dir>/tensorboard: `tensorboard --logdir runs`.

Written without TensorFlow, through the tensorboard package's own record framing and event
protos, so the scalars need no TensorFlow and no writer thread: each event is written and
flushed in the caller's thread, and a `tail` of TensorBoard sees it at once.

Each session of a run writes its own events file. A checkpoint records every events file's
size (`state_dict`); a resume cuts the files back to those sizes and removes the files
written after the checkpoint, so that every step appears once after any stop, `kill -9`
included, exactly as the CSV logs are cut back (TensorBoard's own restart convention, a
purge when the step goes backwards, is not applied by every reader of event files).

A TensorBoard left running has already read what the cut removes. So each session's file
opens with TensorBoard's restart marker, a SessionLog START at the first step the session
plays (a new run's too: a run restarted before its first checkpoint plays from step 1 again).
TensorBoard's Python loader (`--load_fast=false`) then drops every point it holds from that
step on; its default Rust loader ignores the marker, so a point past the checkpoint of a tag
not written again stays on screen until TensorBoard restarts.
"""

import os
import socket
import time

_MARK = "tfevents"  # how TensorBoard recognises an events file


class TensorBoardLog:
    """A run's TensorBoard scalars: this session's events file, the earlier ones cut back.

    Args:
        run_dir: the run directory; the files go in its tensorboard/ folder.
        resume: the state_dict of the checkpoint resumed from, which the events files are cut
            back to first; None for a run that starts.
        clock: a function that returns the wall time, in seconds since the epoch.
        resumed_at: that checkpoint's agent step (0 for a run that starts).

    Raises:
        OSError: the folder or file cannot be written, naming its path.
    """

    def __init__(self, run_dir, resume=None, clock=time.time, resumed_at=0):
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter
        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        self.clock = clock
        self.path = os.path.join(run_dir, "tensorboard")
        with self._named_errors(self.path):
            if resume is not None:
                self._cut_back(resume["files"])
            os.makedirs(self.path, exist_ok=True)
            base = os.path.join(self.path, f"events.out.{_MARK}.{int(clock())}."
                                           f"{socket.gethostname()}.{os.getpid()}")
            self.file_name, n = base, 0
            while os.path.exists(self.file_name):
                n += 1
                self.file_name = f"{base}.{n}"
            self._file = open(self.file_name, "xb")
        self._records = RecordWriter(self._file)
        self._write(self._event(wall_time=clock(), file_version="brain.Event:2"))
        # From the step after the checkpoint's: its own points stay, as the cut keeps them.
        self._write(self._event(wall_time=clock(), step=int(resumed_at) + 1,
                                session_log=event_pb2.SessionLog(
                                    status=event_pb2.SessionLog.START)))

    def scalars(self, step, values):
        """Write the scalars of one agent step, flushed at once.

        Args:
            step: the agent step they are of.
            values: {tag: value}; None values are skipped.
        """
        values = [self._summary.Value(tag=tag, simple_value=float(value))
                  for tag, value in values.items() if value is not None]
        if values:
            self._write(self._event(wall_time=self.clock(), step=int(step),
                                    summary=self._summary(value=values)))

    def flush(self):
        """Flush this session's events file to the operating system."""
        with self._named_errors(self.file_name):
            self._file.flush()

    def state_dict(self):
        """The size of every events file of the run, as a checkpoint records it.

        Returns:
            {"files": {file name: its size in bytes}}, this session's flushed first.
        """
        self.flush()
        return {"files": {name: os.path.getsize(os.path.join(self.path, name))
                          for name in self._event_files()}}

    def close(self):
        """Close this session's events file."""
        with self._named_errors(self.file_name):
            self._file.close()

    def _write(self, event):
        with self._named_errors(self.file_name):
            self._records.write(event.SerializeToString())
            self._file.flush()

    def _event_files(self):
        return sorted(name for name in os.listdir(self.path) if _MARK in name) \
            if os.path.isdir(self.path) else []

    def _cut_back(self, sizes):
        for name in self._event_files():
            path = os.path.join(self.path, name)
            if name not in sizes:
                os.remove(path)  # written after the checkpoint: its steps are played again
            elif os.path.getsize(path) > sizes[name]:
                os.truncate(path, sizes[name])

    @staticmethod
    def _named_errors(path):
        return _NamedErrors(path)


class _NamedErrors:
    """A context that names the file in an OSError of a buffered write, which names none, for
    the run's one-line error (run/cli.py)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if kind is None or not issubclass(kind, OSError) or error.filename \
                or error.errno is None:
            return False
        raise OSError(error.errno, error.strerror, self.path) from error
