"""Full resume on the real Pong ROM: a run split by a resume logs exactly what a straight run
logs, whether it is split at its end, at a sync point, or by Ctrl-C in the middle of a period."""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, logs, rows, run, run_together

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers

SPLIT = ["--game=pong", "--prepopulate=400", "--replay-capacity=2000", "--evaluate=1000",
         "--eval-episodes=1", "--max-episode-steps=300", "--target-update-freq=400",
         "--eps-decay-steps=600", "--eps-end=0.05", "--seed=3", "--save-replay",
         "--batch-size=8"]  # helpers.TINY_PONG says why 8
FAST = ["--workers=4", "--env-backend=python"]


def straight_and_split(tmp_path, script, extra, split_at):
    args = SPLIT + extra + ["--checkpoint-freq=0"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    for result in run_together((script, args + ["--timesteps=2400", f"--logdir={straight}"]),
                               (script, args + [f"--timesteps={split_at}", f"--logdir={split}"])):
        assert result.returncode == 0, result.stderr[-3000:]
    result = run(script, [f"--resume={split}", "--timesteps=2400"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"at step {split_at:,}" in result.stdout
    return logs(straight), logs(split)


@pytest.mark.parametrize("script,extra", [("run_dqn.py", []), ("run_fast_dqn.py", FAST)])
def test_a_resumed_run_logs_exactly_what_a_straight_run_logs(tmp_path, script, extra):
    straight, split = straight_and_split(tmp_path, script, extra, split_at=2000)
    assert len(straight[0]) >= 5 and len(straight[1]) == 3  # evals at 1000, 2000, 2400
    assert split == straight


def test_ctrl_c_mid_period_checkpoints_and_the_resume_is_exact(tmp_path, background):
    # Synchronized and concurrent: the stop lands wherever the trainer happens to be, with
    # transitions held and minibatches owed, yet the resumed run must not differ at all.
    args = SPLIT + FAST + ["--timesteps=2400", "--checkpoint-freq=0"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    straight_run = background("run_fast_dqn.py", args + [f"--logdir={straight}"])
    out = open(tmp_path / "out.txt", "w")
    process = subprocess.Popen([sys.executable, "run_fast_dqn.py", *args, f"--logdir={split}"],
                               cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not os.path.exists(split / "eval.csv") or len(rows(split / "eval.csv")) < 1:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        process.kill()
        out.close()
    text = (tmp_path / "out.txt").read_text()
    assert code == 128 + signal.SIGINT, text[-3000:]
    assert "SIGINT: stopping" in text and "--resume" in text
    result = run("run_fast_dqn.py", [f"--resume={split}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert straight_run.result().returncode == 0, straight_run.result().stderr[-3000:]
    assert logs(split) == logs(straight)


def test_the_vector_backend_resumes_with_new_games(tmp_path):
    logdir = tmp_path / "run"
    args = ["--game=pong", "--workers=4", "--prepopulate=400", "--replay-capacity=2000",
            "--evaluate=0", "--max-episode-steps=300", "--target-update-freq=400",
            "--batch-size=8"]
    result = run("run_fast_dqn.py", args + ["--timesteps=1600", f"--logdir={logdir}"])
    assert result.returncode == 0, result.stderr[-3000:]
    before = rows(logdir / "episodes.csv")
    result = run("run_fast_dqn.py", [f"--resume={logdir}", "--timesteps=3200"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "games cannot continue" in result.stdout
    assert "training pauses for 400 steps while replay refills" in result.stdout
    after = rows(logdir / "episodes.csv")
    assert after[:len(before)] == before and len(after) > len(before)
    steps = [int(row["agent_step"]) for row in after]
    assert steps == sorted(steps) and steps[-1] <= 3200
    assert [int(row["episode"]) for row in after] == list(range(1, len(after) + 1))


def test_resume_refuses_conflicting_flags_and_accepts_budget_changes(tmp_path):
    logdir = tmp_path / "run"
    args = SPLIT + ["--timesteps=600", "--evaluate=0", f"--logdir={logdir}"]
    assert run("run_dqn.py", args).returncode == 0
    # A finished run: one line, and nothing written, not even the lock's holder.
    before = {path: (path.stat().st_size, path.stat().st_mtime_ns)
              for path in logdir.rglob("*")}
    result = run("run_dqn.py", [f"--resume={logdir}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines() == [
        f"run_dqn.py: {logdir} finished at step 600; give a larger --timesteps to go on"]
    assert {path: (path.stat().st_size, path.stat().st_mtime_ns)
            for path in logdir.rglob("*")} == before
    result = run("run_dqn.py", [f"--resume={logdir}", "--lr=0.001"])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("run_dqn.py: error: --lr: 0.001 "
                                                              "conflicts")
    result = run("run_fast_dqn.py", [f"--resume={logdir}"])
    assert result.returncode == 2 and "resume it with the script that made it" in result.stderr
    result = run("run_dqn.py", [f"--resume={logdir}", "--timesteps=800", "--lr=0.00025"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from" in result.stdout
    # The larger budget sticks: a plain resume now finds the run finished at 800, where it
    # used to go back to config.json's 600 and refuse.
    result = run("run_dqn.py", [f"--resume={logdir}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines() == [
        f"run_dqn.py: {logdir} finished at step 800; give a larger --timesteps to go on"]
