"""Real runs of the entry scripts on the real Pong ROM, with tiny budgets."""

import json

import pytest
from helpers import TINY, logs, rows, run

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
    # Again with the shared run's seed; that another seed plays other games is checked on
    # the games themselves, which costs no second run.
    result = run("run_dqn.py", TINY + ["--seed=1", f"--logdir={tmp_path / 'again'}"])
    assert result.returncode == 0, result.stderr[-3000:]
    again = logs(tmp_path / "again")
    assert again == logs(tiny_pong_run)
    assert len(again[0]) >= 5
    assert first_frames(1) != first_frames(4)  # the comparison can tell runs apart


def first_frames(seed):
    """The frames a Pong game of the Nature protocol shows under a fixed action sequence."""
    import numpy as np

    from fast_dqn.envs.environment import make_env
    from fast_dqn.run.components import env_settings
    from fast_dqn.run.settings.hyperparameters import Config
    env = make_env(env_settings(Config(game="pong")), seed)
    frames = [env.reset()[0]]
    for a in range(200):
        frames.append(env.step(a % 6)[0])
    env.close()
    return np.stack(frames).tobytes()
