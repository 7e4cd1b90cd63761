"""The background trainer of the fast loop: all of the project's Python threads live here.

Two persistent daemon threads:
- the trainer trains a given number of minibatches per period, on the main network;
- the prefetcher samples the next minibatch from replay while the current one trains (the
  async-copy trick of Lapan's "Speeding up DQN"), through a queue of at most 2 batches.

The rules that make this safe and reproducible:
1. Between `start(n)` and the return of `wait()`, replay is only read, and only by the
   prefetcher (or by the trainer itself when prefetching is off). The caller writes replay and
   copies main -> target only after `wait()` returns, when both threads are idle.
2. Exactly n minibatches are sampled per period, in order, from replay's own RNG, so a seeded
   run draws the same minibatches whatever the thread timing.
3. An exception in either thread is kept and re-raised, with its original traceback, in the
   caller's thread by `check()` or `wait()`. Every blocking call inside the threads polls, so
   `close()` always ends them: nothing can hang on a dead partner.
"""

import queue
import threading

_POLL_SECONDS = 0.05


class BackgroundTrainer:
    def __init__(self, train_fn, sample_fn, on_loss=None, prefetch=True):
        """train_fn(*batch) -> loss; sample_fn() -> batch; on_loss(loss) sees every loss."""
        self.train_fn = train_fn
        self.sample_fn = sample_fn
        self.on_loss = on_loss or (lambda loss: None)
        self.prefetch = prefetch
        self._jobs = queue.Queue()
        self._prefetch_jobs = queue.Queue()
        self._batches = queue.Queue(maxsize=2)
        self._idle = threading.Event()
        self._idle.set()
        self._stop = threading.Event()
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

    def start(self, num_minibatches):
        """Train `num_minibatches` in the background. The trainer must be idle."""
        self.check()
        if not self._idle.is_set():
            raise RuntimeError("start() called while the previous period is still training")
        if num_minibatches <= 0:
            return
        self._idle.clear()
        self._jobs.put(num_minibatches)

    def check(self):
        """Re-raise a background failure in the calling thread; cheap enough to call often."""
        if self._error is not None:
            raise self._error

    def wait(self):
        """Block until the current period is trained, re-raising any background failure."""
        while not self._idle.wait(_POLL_SECONDS):
            self.check()
        self.check()

    def close(self, timeout=10.0):
        self._stop.set()
        self._idle.set()  # nothing will train any more; a late wait() must not block
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

    def _get(self, q):
        """q.get() that gives up when the run is stopping, so no thread waits forever."""
        while True:
            try:
                return q.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if self._stop.is_set():
                    raise _Stopped

    def _put(self, q, item):
        while True:
            try:
                return q.put(item, timeout=_POLL_SECONDS)
            except queue.Full:
                if self._stop.is_set():
                    raise _Stopped

    def _train_loop(self):
        try:
            while True:
                n = self._get(self._jobs)
                if n is None:
                    return
                if self.prefetch:
                    self._prefetch_jobs.put(n)
                for _ in range(n):
                    if self._stop.is_set():
                        return
                    batch = self._get(self._batches) if self.prefetch else self.sample_fn()
                    self.on_loss(self.train_fn(*batch))
                self._idle.set()
        except _Stopped:
            return

    def _prefetch_loop(self):
        try:
            while True:
                n = self._get(self._prefetch_jobs)
                if n is None:
                    return
                for _ in range(n):
                    if self._stop.is_set():
                        return
                    self._put(self._batches, self.sample_fn())
        except _Stopped:
            return


class _Stopped(Exception):
    """Internal: the run is stopping; a thread leaves its loop quietly."""
