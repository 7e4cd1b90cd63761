"""Real runs of the entry scripts on the real Pong ROM, with tiny budgets."""

import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--game=pong", "--timesteps=1600", "--prepopulate=400", "--replay-capacity=1000",
        "--evaluate=800", "--eval-episodes=1", "--max-episode-steps=300",
        "--target-update-freq=200"]


def run(script, args, timeout=300):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def logs(logdir):
    """episodes.csv and eval.csv without their wall-clock column."""
    return tuple([{k: v for k, v in row.items() if k != "hours"} for row in rows(logdir / name)]
                 for name in ("episodes.csv", "eval.csv"))


def test_run_dqn_tiny_pong_writes_both_csvs(tmp_path):
    logdir = tmp_path / "run"
    result = run("run_dqn.py", TINY + ["--seed=1", f"--logdir={logdir}"])
    assert result.returncode == 0, result.stderr[-3000:]
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


def test_same_seed_gives_identical_logs(tmp_path):
    # Fast epsilon decay so the trained network really chooses most actions.
    fast_decay = ["--eps-decay-steps=600", "--eps-end=0.05"]
    outputs = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        logdir = tmp_path / name
        result = run("run_dqn.py", TINY + fast_decay + [f"--seed={seed}", f"--logdir={logdir}"])
        assert result.returncode == 0, result.stderr[-3000:]
        outputs.append(logs(logdir))
    assert outputs[0] == outputs[1]
    assert outputs[0] != outputs[2]  # the comparison can tell runs apart
    assert len(outputs[0][0]) >= 5
