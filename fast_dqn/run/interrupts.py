"""Ctrl-C and SIGTERM: the first asks the run to stop cleanly, a later Ctrl-C aborts.

The handler only sets a flag (and says so on stderr); the loops poll it between rounds and
stop at their next consistent point, after writing a checkpoint. Signal handlers run in the
main thread, which is the one that polls, so no lock is needed.

A SIGINT within `SAME_REQUEST_SECONDS` of a SIGINT that asked to stop is the same request,
not a second Ctrl-C: GNU `timeout -s INT` signals the process and then its whole process
group (so does a wrapper that forwards the terminal's Ctrl-C to a child in its own group), so
one stop arrives as two signals microseconds apart. Taken as a second Ctrl-C, it aborted the
run without a checkpoint.
SIGTERM never aborts: whoever sends it (a scheduler, `kill`) wants the checkpoint.
"""

import os
import signal
import threading
import time

SAME_REQUEST_SECONDS = 1.0


class StopSignals:
    """A context that turns Ctrl-C and SIGTERM into a stop request; calling it asks if one came.

    With `then_ignore`, leaving it ignores SIGINT and SIGTERM instead of putting the previous
    handlers back: for a script whose run is over and saved, where a signal in its last moments
    (TensorFlow's teardown takes a while) must not turn a finished run into a traceback.
    `clock` (seconds) tells a repeated signal from a second Ctrl-C.
    """

    def __init__(self, then_ignore=False, clock=time.monotonic):
        self.then_ignore = then_ignore
        self.clock = clock
        self.requested = False
        self.signum = None
        self._requested_at = None
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
            repeated = (self.signum == signal.SIGINT
                        and self.clock() - self._requested_at < SAME_REQUEST_SECONDS)
            if signum == signal.SIGINT and not repeated:
                raise KeyboardInterrupt
            return
        self.requested = True
        self.signum = signum
        self._requested_at = self.clock()
        name = signal.Signals(signum).name
        # os.write, not print: the handler may interrupt a print to the same stream.
        os.write(2, f"\n{name}: stopping after the current step and writing a checkpoint; "
                    "to abort without one, press Ctrl-C again after a second\n".encode())
