"""Full resume on the real Pong ROM: a fast-loop run split by a resume logs exactly what a
straight run logs, whether it is split at its end or by Ctrl-C in the middle of a period.
And, in process, how the flags typed with --resume are reconciled with the run's own."""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, BackgroundRun, logs, rows, run

pytestmark = pytest.mark.faults  # stop/resume proofs: see docs/testing.md's markers

SPLIT = ["--game=pong", "--prepopulate=400", "--replay-capacity=2000", "--evaluate=1000",
         "--eval-episodes=1", "--max-episode-steps=300", "--target-update-freq=400",
         "--eps-decay-steps=600", "--eps-end=0.05", "--seed=3", "--save-replay",
         "--batch-size=8"]  # helpers.TINY_PONG says why 8
FAST = ["--workers=4", "--env-backend=python"]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The fast loop's straight run, which both splits below must log exactly: started once,
    in the background, beside the first test's own runs."""
    logdir = tmp_path_factory.mktemp("straight") / "run"
    started = BackgroundRun("run_fast_dqn.py", SPLIT + FAST + ["--timesteps=2400",
                                                              "--checkpoint-freq=0",
                                                              f"--logdir={logdir}"])
    yield lambda: (started.result(), logdir)
    started.kill()


def straight_logs(straight):
    result, logdir = straight()
    assert result.returncode == 0, result.stderr[-3000:]
    return logs(logdir)


# The Nature loop's real splits are test_stops_and_kills' kill -9 (Pong) and test_damaged_runs' logs
# damaged between runs (CartPole, a budget raised on resume); in process, test_training and
# test_nature_loop split it anywhere.
@pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers
def test_a_resumed_run_logs_exactly_what_a_straight_run_logs(tmp_path, straight):
    split = tmp_path / "split"
    result = run("run_fast_dqn.py", SPLIT + FAST + ["--checkpoint-freq=0", "--timesteps=2000",
                                                    f"--logdir={split}"])
    assert result.returncode == 0, result.stderr[-3000:]
    result = run("run_fast_dqn.py", [f"--resume={split}", "--timesteps=2400"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "at step 2,000" in result.stdout
    expected = straight_logs(straight)
    assert len(expected[0]) >= 5 and len(expected[1]) == 3  # evals at 1000, 2000, 2400
    assert logs(split) == expected


@pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers
def test_ctrl_c_mid_period_checkpoints_and_the_resume_is_exact(tmp_path, straight):
    # Synchronized and concurrent: the stop lands wherever the trainer happens to be, with
    # transitions held and minibatches owed, yet the resumed run must not differ at all.
    args = SPLIT + FAST + ["--timesteps=2400", "--checkpoint-freq=0"]
    split = tmp_path / "split"
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
    assert logs(split) == straight_logs(straight)


@pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers
def test_the_vector_backend_resumes_with_new_games(tmp_path):
    logdir = tmp_path / "run"
    args = ["--game=pong", "--workers=4", "--prepopulate=400", "--replay-capacity=2000",
            "--evaluate=0", "--max-episode-steps=300", "--target-update-freq=400",
            "--batch-size=8"]
    # 300 steps a game, 4 games: one game each before the resume, one each after it.
    result = run("run_fast_dqn.py", args + ["--timesteps=1200", f"--logdir={logdir}"])
    assert result.returncode == 0, result.stderr[-3000:]
    before = rows(logdir / "episodes.csv")
    result = run("run_fast_dqn.py", [f"--resume={logdir}", "--timesteps=2400"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the 4 games in progress start again from their beginning (--env-backend " \
        "vector cannot save a game in progress; runs started with --env-backend python keep " \
        "them)" in result.stdout
    assert "replay was not saved in the checkpoint (--save-replay saves it): the next 400 " \
        "steps refill it, and training resumes at step 1,600; the 100 minibatches missed " \
        "meanwhile are made up afterwards" in result.stdout
    after = rows(logdir / "episodes.csv")
    assert after[:len(before)] == before and len(after) > len(before)
    steps = [int(row["agent_step"]) for row in after]
    assert steps == sorted(steps) and steps[-1] <= 2400
    assert [int(row["episode"]) for row in after] == list(range(1, len(after) + 1))


def test_resume_refuses_conflicting_flags_and_accepts_budget_changes(tmp_path, capfd):
    """run_dqn.py's command line, in process (fast_dqn.run.cli.main, which run_dqn.py calls
    and exits with): a run as a finished 600-step run leaves it, made through the command line
    with a stand-in for training that writes the final checkpoint as training's Checkpointer
    does, recording what a resume gave (resume.plan_given_on_resume). That a refusal is also
    exit 2 with one line and no traceback from the real script is proven by the real
    processes of test_bad_input.py and test_fast_end_to_end.py."""
    from fast_dqn.run import cli
    from fast_dqn.run.resume import plan_given_on_resume
    from fast_dqn.run.run_kinds import FAST, NATURE
    from fast_dqn.run.storage.checkpoint import Checkpointer, CheckpointStore

    logdir = tmp_path / "run"
    trained = []

    def train_to_the_end(config, resume=None, stop=None):
        trained.append((config, resume))
        Checkpointer(CheckpointStore(config.logdir), config.checkpoint_freq,
                     collect=lambda step: {}, message=lambda line: None,
                     plan=plan_given_on_resume(config)).save(
            config.timesteps, {"step": config.timesteps}, final=True, finished=True)

    def untouched():
        return {path: (path.stat().st_size, path.stat().st_mtime_ns)
                for path in logdir.rglob("*")}

    def main(kind, argv):
        capfd.readouterr()
        code = cli.main(kind, argv, train=train_to_the_end)
        out, err = capfd.readouterr()
        assert "Traceback" not in out + err
        return code, out, err

    code, _, err = main(NATURE, SPLIT + ["--timesteps=600", "--evaluate=0",
                                         f"--logdir={logdir}"])
    assert code == 0, err
    assert trained[-1][0].timesteps == 600 and trained[-1][1] is None
    # A finished run: one line, and nothing written, not even the lock's holder.
    before = untouched()
    code, out, err = main(NATURE, [f"--resume={logdir}"])
    assert code == 0, err
    assert out.strip().splitlines() == [
        f"run_dqn.py: {logdir} finished at step 600; give a larger --timesteps to go on"]
    assert untouched() == before and len(trained) == 1
    code, _, err = main(NATURE, [f"--resume={logdir}", "--lr=0.001"])
    assert code == 2
    assert err.strip().splitlines() == [
        "run_dqn.py: error: --lr: 0.001 conflicts with this run's saved 0.00025; drop --lr to "
        "resume, or start a new run to change it"]
    code, _, err = main(FAST, [f"--resume={logdir}"])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("run_fast_dqn.py: error: --resume: ")
    assert err.rstrip().endswith(f"is a run of run_dqn.py, which resumes it: python run_dqn.py "
                                 f"--resume {logdir}")
    assert untouched() == before and len(trained) == 1
    # A larger budget, and --lr at the run's own value: resumed from the finished checkpoint.
    code, _, err = main(NATURE, [f"--resume={logdir}", "--timesteps=800", "--lr=0.00025"])
    assert code == 0, err
    config, resumed = trained[-1]
    assert (config.timesteps, config.lr, resumed.step) == (800, 0.00025, 600)
    # The larger budget sticks: a plain resume now finds the run finished at 800, where it
    # used to go back to config.json's 600 and refuse.
    code, out, err = main(NATURE, [f"--resume={logdir}"])
    assert code == 0, err
    assert out.strip().splitlines() == [
        f"run_dqn.py: {logdir} finished at step 800; give a larger --timesteps to go on"]
    assert len(trained) == 2
