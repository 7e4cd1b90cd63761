"""Ctrl-C and SIGTERM: the first asks the run to stop cleanly, a second Ctrl-C aborts.

The handler only sets a flag (and says so on stderr); the loops poll it between rounds and
stop at their next consistent point, after writing a checkpoint. Signal handlers run in the
main thread, which is the one that polls, so no lock is needed.
"""

import os
import signal
import threading


class StopSignals:
    def __init__(self, then_ignore=False):
        """then_ignore: on leaving, ignore SIGINT and SIGTERM instead of putting the previous
        handlers back. For a script whose run is over and saved: a signal in its last moments
        (TensorFlow's teardown takes a while) must not turn a finished run into a traceback."""
        self.then_ignore = then_ignore
        self.requested = False
        self.signum = None
        self._previous = {}

    def __call__(self):
        return self.requested

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if self.then_ignore else handler)
        self._previous.clear()

    def _handle(self, signum, frame):
        if self.requested:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        self.requested = True
        self.signum = signum
        name = signal.Signals(signum).name
        # os.write, not print: the handler may interrupt a print to the same stream.
        os.write(2, f"\n{name}: stopping after the current step and writing a checkpoint "
                    "(Ctrl-C again aborts without one)\n".encode())
