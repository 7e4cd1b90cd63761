"""The compile clock's seconds (the union of compile spans from two threads), the cache's
start-up line where it cannot write, and a second process reading its programs from the
cache (fast_dqn.agent.compile_cache)."""

import os
import re
import subprocess
import sys

import pytest
from helpers import ROOT, hang_guard

from fast_dqn.agent.compile_cache import CompileClock

BACKEND = "/jax/core/compile/backend_compile_duration"
TRACE = "/jax/core/compile/jaxpr_trace_duration"


def test_the_clock_counts_overlapping_compiles_once():
    clock = CompileClock()
    clock.span(TRACE, 100.0, 101.0)
    clock.span(BACKEND, 100.5, 103.0)      # the trainer's, overlapping its own trace
    clock.span(BACKEND, 102.0, 103.5)      # a sampler's, ending later
    clock.span(BACKEND, 102.5, 103.2)      # inside what is counted: nothing added
    clock.span("/jax/other/event", 0.0, 500.0)  # not a compile
    assert clock.seconds() == pytest.approx(3.5)
    clock.span(BACKEND, 110.0, 110.25)
    assert clock.seconds() == pytest.approx(3.75)
    assert clock.compiles == 4 and clock.from_cache == 0
    clock.event("/jax/compilation_cache/cache_hits")
    clock.event("/jax/compilation_cache/cache_misses")
    assert clock.line() == ("compiling took 3.8 s (4 programs, 1 read from the cache); "
                            "steps/s leaves it out")


def test_no_compile_no_line():
    assert CompileClock().line() is None and CompileClock().seconds() == 0.0


def test_a_cache_folder_that_cannot_be_written_turns_the_cache_off(tmp_path):
    jax = pytest.importorskip("jax")
    from fast_dqn.agent.compile_cache import use_cache
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(blocker / "xla"))
    try:
        line = use_cache()
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert line.startswith(f"compile cache: off, since {blocker / 'xla'} cannot be written")
    assert "JAX_COMPILATION_CACHE_DIR" in line


# Compiles one function under the run's own set-up, and says what the compiles cost.
COMPILE_ONE = """
from fast_dqn.agent.backend_setup import configure_backend
from fast_dqn.agent.compile_cache import compile_clock, use_cache
configure_backend(0)
print(use_cache())
import jax, jax.numpy as jnp
print(float(jax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((64, 64))).sum()))
print(compile_clock().line())
"""


@pytest.mark.slow  # two JAX processes: about ten seconds
def test_a_second_process_reads_its_programs_from_the_cache(tmp_path):
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", XDG_CACHE_HOME=str(tmp_path))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    outputs = [subprocess.run([sys.executable, "-c", COMPILE_ONE], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=hang_guard(300))
               for _ in range(2)]
    for result in outputs:
        assert result.returncode == 0, result.stderr[-2000:]
    first, second = (result.stdout.splitlines() for result in outputs)
    folder = tmp_path / "fast-dqn" / "xla"
    assert first[0].startswith(f"compile cache: {folder} (0 programs kept)")
    assert "read from the cache" not in first[2]
    assert second[1] == first[1]  # the same program's result
    kept = len([name for name in os.listdir(folder) if name.endswith("-cache")])
    assert kept > 0 and second[0].startswith(f"compile cache: {folder} ({kept} programs kept)")
    # Every program the second process compiled came from the cache.
    programs = re.fullmatch(r"compiling took [\d.]+ s \((\d+) programs, (\d+) read from "
                            r"the cache\); steps/s leaves it out", second[2])
    assert programs and programs[1] == programs[2], second[2]
