"""The background trainer of the fast loop: all of the project's Python threads live here.

Two persistent daemon threads:
- the trainer trains a given number of minibatches per period on the main network, in calls
  of up to `per_call` minibatches (one compiled call: fast_dqn.agent.learner's train_many);
- the prefetcher samples the next call's minibatches from replay while the current call
  trains. Its queue holds one call, because a call of K minibatches gathered on the host is
  K times a minibatch's memory: 460 MB for pong-fastest at K = 64. The prefetch thread is
  fast-dqn's own; sources: docs/protocol.md#sources-of-the-constants-and-defaults.

The rules that make this safe and reproducible:
1. Between `start(n)` and the return of `wait()`, replay is only read, and only by the
   prefetcher (or by the trainer when prefetching is off). The caller writes replay and
   copies main -> target only after `wait()` returns, when both threads are idle.
2. Exactly n minibatches are sampled per period, in order, from replay's own RNG, so a seeded
   run draws the same minibatches whatever the thread timing. `call_sizes` alone, never
   timing, cuts the period into calls, so the same calls train the same minibatches.
3. `interrupt()` ends a period after the call in progress and says how many minibatches were
   trained; calls prefetched beyond it are dropped (the caller rewinds replay's RNG).
4. The caller paces the trainer: `pace(k)` says that the period's last k minibatches are due
   at agent steps not yet played, and a call trains only once pace() has released all of its
   minibatches. So a stop at any moment has trained none of a step never reached.
5. An exception in either thread is kept and re-raised, with its original traceback, in the
   caller's thread by `check()` or `wait()`. Every blocking call inside the threads polls, so
   `close()` always ends them: nothing can hang on a dead partner.
"""

import queue
import threading
import time

_POLL_SECONDS = 0.05


def call_sizes(n, per_call):
    """The sizes of the calls that train a period of `n` minibatches, in order.

    As many calls of `per_call` as fit, then the rest in powers of two, largest first. A compiled
    call is compiled once per size, so a run makes at most ceil(log2(per_call)) + 1 sizes (7 for
    48 or 64), whatever its periods' lengths.
    """
    sizes = [per_call] * (n // per_call)
    rest = n % per_call
    while rest:
        sizes.append(1 << (rest.bit_length() - 1))
        rest -= sizes[-1]
    return sizes


def one_by_one(train_one, sample_one):
    """(train_fn, sample_fn) training one minibatch per call, for a learner without fused calls."""
    return (lambda batches: [train_one(batch) for batch in batches],
            lambda count: [sample_one() for _ in range(count)])


class BackgroundTrainer:
    """A period's minibatches trained in a thread of its own, paced by the agent steps played.

    Args:
        train_fn: trains a call's minibatches, in order; returns one result per minibatch.
        sample_fn: given k, draws the next k minibatches from replay, in order.
        on_loss: a callable that sees every result, in order; None for none.
        prefetch: whether a second thread samples the next call while the current one trains.
        per_call: the most minibatches one call trains (at least 1).
    """

    def __init__(self, train_fn, sample_fn, on_loss=None, prefetch=True, per_call=1):
        self.train_fn = train_fn
        self.sample_fn = sample_fn
        self.on_loss = on_loss or (lambda loss: None)
        self.prefetch = prefetch
        if per_call < 1:
            raise ValueError(f"a call trains at least one minibatch, not {per_call}")
        self.per_call = per_call
        self._jobs = queue.Queue()
        self._prefetch_jobs = queue.Queue()
        self._batches = queue.Queue(maxsize=1)
        self._idle = threading.Event()
        self._idle.set()
        self._prefetch_idle = threading.Event()
        self._prefetch_idle.set()
        self._cancel = threading.Event()
        self._unplayed = 0
        self._released = threading.Event()
        self._stop = threading.Event()
        self._trained = 0
        # Time in train_fn, for benchmarks. The step in progress counts up to now, so a window
        # that opens or closes mid-step is charged only its own part of it.
        self._busy_lock = threading.Lock()
        self._busy_done, self._step_started = 0.0, None
        self._error = None
        self._threads = [threading.Thread(target=self._guard, args=(self._train_loop,),
                                          name="fast-dqn-trainer", daemon=True)]
        if prefetch:
            self._threads.append(threading.Thread(target=self._guard,
                                                  args=(self._prefetch_loop,),
                                                  name="fast-dqn-prefetch", daemon=True))
        for thread in self._threads:
            thread.start()

    # --- the caller's side

    def busy_seconds(self):
        """The time spent in train calls so far, the one running included.

        Returns:
            The time, in seconds.
        """
        with self._busy_lock:
            running = self._step_started
            return self._busy_done + (0.0 if running is None else time.perf_counter() - running)

    def start(self, num_minibatches, unplayed=0):
        """Start training a period's minibatches in the background; the trainer must be idle.

        Args:
            num_minibatches: the period's minibatches; 0 or fewer trains none.
            unplayed: how many of the last of them wait until pace() releases them.
        """
        self.check()
        if not self._idle.is_set():
            raise RuntimeError("start() called while the previous period is still training")
        self._trained = 0
        self.pace(unplayed)
        if num_minibatches <= 0:
            return
        self._idle.clear()
        if self.prefetch:
            self._prefetch_idle.clear()
        self._jobs.put(num_minibatches)

    def pace(self, unplayed):
        """Say how many of the current period's minibatches still wait for their agent steps.

        Args:
            unplayed: the period's last minibatches that wait; a smaller count than before
                releases some, 0 releases all.
        """
        self._unplayed = unplayed  # one int, read by the trainer thread: no lock needed
        self._released.set()

    def check(self):
        """Re-raise a background failure in the calling thread; cheap enough to call often."""
        if self._error is not None:
            raise self._error

    def wait(self, abort=None):
        """Block until the current period is trained, re-raising any background failure.

        Args:
            abort: a callable polled about every 0.05 seconds while waiting; None never aborts.

        Returns:
            True when the period is trained; False, at once, if abort() turned true first.
        """
        while not self._idle.wait(_POLL_SECONDS):
            self.check()
            if abort is not None and abort():
                return False
        self.check()
        return True

    def interrupt(self):
        """End the current period after the call in progress; the trainer is then idle.

        Returns:
            How many of the period's minibatches were trained.
        """
        self._cancel.set()
        try:
            self.wait()
            while not self._prefetch_idle.wait(_POLL_SECONDS):
                self.check()
            while not self._batches.empty():
                self._batches.get_nowait()
        finally:
            self._cancel.clear()
        return self._trained

    def close(self, timeout=10.0):
        """End both threads; a later wait() returns at once.

        Args:
            timeout: the most seconds to wait for each thread to end.
        """
        self._stop.set()
        self._idle.set()  # nothing will train any more; a late wait() must not block
        self._prefetch_idle.set()
        self._jobs.put(None)
        self._prefetch_jobs.put(None)
        for thread in self._threads:
            thread.join(timeout)

    # --- the threads' side

    def _guard(self, loop):
        try:
            loop()
        except BaseException as error:  # noqa: B902 - any failure must reach the caller
            if self._error is None:
                self._error = error
            self._stop.set()
            self._idle.set()  # wake a waiting caller, who then sees the error
            self._prefetch_idle.set()

    def _get(self, q):
        """q.get() that gives up when the run is stopping, so no thread waits forever."""
        while True:
            try:
                return q.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if self._stop.is_set():
                    raise _Stopped

    def _put(self, q, item):
        """q.put() that drops the item and returns False when the period is interrupted."""
        while True:
            try:
                q.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                if self._stop.is_set():
                    raise _Stopped
                if self._cancel.is_set():
                    return False

    def _next_batch(self):
        """The prefetched batch, or None when the period is interrupted."""
        while True:
            try:
                return self._batches.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if self._stop.is_set():
                    raise _Stopped
                if self._cancel.is_set():
                    return None

    def _train_loop(self):
        try:
            while True:
                n = self._get(self._jobs)
                if n is None:
                    return
                if self.prefetch:
                    self._prefetch_jobs.put(n)
                for size in call_sizes(n, self.per_call):
                    if self._stop.is_set():
                        return
                    if self._cancel.is_set() or not self._wait_for_release(n, size):
                        break
                    batch = self._next_batch() if self.prefetch else self.sample_fn(size)
                    if batch is None:
                        break
                    with self._busy_lock:
                        self._step_started = time.perf_counter()
                    results = self.train_fn(batch)
                    with self._busy_lock:
                        self._busy_done += time.perf_counter() - self._step_started
                        self._step_started = None
                    if len(results) != size:
                        raise RuntimeError(f"a call of {size} minibatches trained "
                                           f"{len(results)}")
                    for result in results:
                        self.on_loss(result)
                    self._trained += size
                self._idle.set()
        except _Stopped:
            return

    def _wait_for_release(self, n, size):
        """Wait until the next `size` of the n minibatches are released; False on an interrupt."""
        while self._trained + size > n - self._unplayed:
            self._released.clear()
            if self._trained + size <= n - self._unplayed:  # released since the test
                return True
            self._released.wait(_POLL_SECONDS)
            if self._stop.is_set():
                raise _Stopped
            if self._cancel.is_set():
                return False
        return True

    def _prefetch_loop(self):
        try:
            while True:
                n = self._get(self._prefetch_jobs)
                if n is None:
                    return
                for size in call_sizes(n, self.per_call):
                    if self._stop.is_set():
                        return
                    if self._cancel.is_set() or not self._put(self._batches,
                                                              self.sample_fn(size)):
                        break
                self._prefetch_idle.set()
        except _Stopped:
            return


class _Stopped(Exception):
    """Internal: the run is stopping; a thread leaves its loop quietly."""
