"""The agent really learns: CartPole-v1 to a greedy evaluation mean of at least 475.

Each run uses the `classic` preset (50k agent steps, a greedy evaluation of 10 games every
5k) and a fixed seed; with deterministic ops the outcome is the same every time. Each takes
about 2 minutes on 2 cores.
"""

import time

import pytest

from test_end_to_end import rows, run


@pytest.mark.parametrize("script,seed", [("run_dqn.py", 1), ("run_fast_dqn.py", 0)])
def test_cartpole_reaches_475(tmp_path, script, seed):
    start = time.monotonic()
    result = run(script, ["--env=CartPole-v1", f"--seed={seed}", f"--logdir={tmp_path / 'run'}"],
                 timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    evals = rows(tmp_path / "run" / "eval.csv")
    means = [float(row["mean"]) for row in evals]
    assert len(means) == 10
    assert max(means) >= 475, f"evaluation means {means}"
    assert time.monotonic() - start < 180
