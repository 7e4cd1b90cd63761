"""JAX's persistent compilation cache, and a clock of the seconds a run spends compiling.

A run's first calls wait for XLA (seconds on a CPU, tens of seconds for the Nature network's
K-update call on a GPU). The cache keeps each compiled program on disk, keyed by the program
and the compiler's settings, so a second run of the same settings loads them instead. The
clock sums the compiles' spans, so that the progress line's steps/s can leave them out.

Under TensorFlow neither applies: it compiles in its own way, and the clock stays at 0.
"""

import os
import threading

# JAX's events for the three stages of a compile; a cache hit is a short backend stage.
_STAGES = ("/jax/core/compile/jaxpr_trace_duration",
           "/jax/core/compile/jaxpr_to_mlir_module_duration",
           "/jax/core/compile/backend_compile_duration")


def default_cache_dir():
    """Where the cache lives unless JAX_COMPILATION_CACHE_DIR says: the user's cache folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fast-dqn", "xla")


def use_cache():
    """Turn on JAX's persistent compilation cache, keeping every program (a few megabytes).

    JAX's own JAX_COMPILATION_CACHE_DIR picks another folder, and
    JAX_ENABLE_COMPILATION_CACHE=false turns the cache off.

    Returns:
        The start-up line that says so, without a newline.
    """
    import jax

    if not jax.config.jax_enable_compilation_cache:
        return "compile cache: off (JAX_ENABLE_COMPILATION_CACHE); every run compiles afresh"
    folder = jax.config.jax_compilation_cache_dir or default_cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".write-test-{os.getpid()}")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as error:
        return (f"compile cache: off, since {folder} cannot be written ({error.strerror}); "
                "set JAX_COMPILATION_CACHE_DIR to a folder you can write")
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if jax.config.jax_compilation_cache_max_size < 0:  # unbounded unless the user bounds it
        jax.config.update("jax_compilation_cache_max_size", 1 << 30)  # least recent go first
    # A program is one file, and its last use another (-atime) where the cache is bounded.
    kept = sum(1 for name in os.listdir(folder)
               if not name.startswith(".") and not name.endswith("-atime"))
    return (f"compile cache: {folder} ({kept} programs kept); compiles this run's settings "
            "need are read from it, the rest are added")


class CompileClock:
    """The seconds spent compiling so far, and the programs compiled and read from the cache.

    Compiles may run in two threads at once (the trainer's and the samplers'): the seconds
    are those of the union of their spans, so that wall time less them never runs back.
    Spans arrive as each compile ends; one that ends inside a span already counted adds
    nothing.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._seconds, self._covered_until = 0.0, None
        self.compiles = self.from_cache = 0

    def span(self, event, start, end, **_):
        """JAX's time-span listener: a compile stage ran from `start` to `end` (time.time)."""
        if event not in _STAGES:
            return
        with self._lock:
            if event == _STAGES[-1]:
                self.compiles += 1
            begin = start if self._covered_until is None else max(start, self._covered_until)
            if end > begin:
                self._seconds += end - begin
                self._covered_until = end

    def event(self, event, **_):
        """JAX's event listener: counts the programs read from the cache."""
        if event == "/jax/compilation_cache/cache_hits":
            with self._lock:
                self.from_cache += 1

    def seconds(self):
        """Seconds spent compiling so far."""
        with self._lock:
            return self._seconds

    def line(self):
        """What the compiles cost, for the console: one line, or None before any compile."""
        with self._lock:
            if not self.compiles:
                return None
            read = f", {self.from_cache} read from the cache" if self.from_cache else ""
            return (f"compiling took {self._seconds:.1f} s ({self.compiles} programs{read}); "
                    "steps/s leaves it out")


_clock = None
_clock_lock = threading.Lock()


def compile_clock():
    """The process's CompileClock; it listens to JAX where JAX is loaded when first asked.

    Returns:
        The CompileClock, the same on every call; under TensorFlow it stays at 0.
    """
    global _clock
    with _clock_lock:
        if _clock is None:
            _clock = CompileClock()
            import sys
            if "jax" in sys.modules:
                from jax import monitoring
                monitoring.register_event_time_span_listener(_clock.span)
                monitoring.register_event_listener(_clock.event)
        return _clock
