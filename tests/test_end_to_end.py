"""Real runs of the entry scripts on the real Pong ROM, with tiny budgets."""

import json

import pytest
from helpers import TINY, logs, rows, run_together

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers


def test_run_dqn_tiny_pong_writes_both_csvs(tiny_pong_run):
    logdir = tiny_pong_run
    config = json.loads((logdir / "config.json").read_text())
    assert config["game"] == "pong" and config["timesteps"] == 1600
    episodes = rows(logdir / "episodes.csv")
    # 1600 agent steps with a 300-step time limit: at least 5 full games.
    assert len(episodes) >= 5
    steps = [int(e["agent_step"]) for e in episodes]
    assert steps == sorted(steps) and steps[-1] <= 1600
    for e in episodes:
        assert -21 <= float(e["return"]) <= 21 and int(e["length"]) <= 300
    evals = rows(logdir / "eval.csv")
    assert [int(e["agent_step"]) for e in evals] == [800, 1600]
    assert all(int(e["episodes"]) == 1 for e in evals)


def test_same_seed_gives_identical_logs(tmp_path, tiny_pong_run):
    # Again with the shared run's seed, and once with another.
    runs = (("again", 1), ("other", 4))
    results = run_together(*[("run_dqn.py", TINY + [f"--seed={seed}",
                                                    f"--logdir={tmp_path / name}"])
                             for name, seed in runs])
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    again, other = (logs(tmp_path / name) for name, _ in runs)
    assert again == logs(tiny_pong_run)
    assert again != other  # the comparison can tell runs apart
    assert len(again[0]) >= 5
