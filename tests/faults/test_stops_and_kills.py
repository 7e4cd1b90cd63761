"""A run stopped from outside at any moment (SIGTERM, Ctrl-C, kill -9, the instant a file
appears, a second process on it, a console that goes away) resumes and loses nothing: the
resumed run logs what a straight run logs.

Real runs, each with a timeout, so a regression shows as a failure, not a hung CI. Two of
benchmarks/crash_fuzzer.py's fixed trials run here too (its own checks are tested in
tests/benchmarks/test_crash_fuzzer.py).
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, hang_guard, logs, read_scalars, rows, run, wait_for

from benchmarks import crash_fuzzer as fuzzer
from fast_dqn.run.storage.checkpoint import CheckpointStore

# The stops and resumes of docs/testing.md's markers; each real run is also `slow`.
pytestmark = pytest.mark.faults


@pytest.mark.slow  # a real run
def test_sigterm_mid_period_checkpoints_and_exits(tmp_path):
    logdir = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "run_fast_dqn.py", "--game=pong", "--workers=4",
         "--prepopulate=400", "--replay-capacity=20000", "--target-update-freq=10000",
         "--timesteps=1000000", "--evaluate=0", "--save-replay", f"--logdir={logdir}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Past the first sync point the trainer owes 2,400 minibatches (about 50 s here), so
        # the signal lands mid-period.
        def past_first_sync():
            path = logdir / "episodes.csv"
            return path.exists() and any(int(row["agent_step"]) > 10_400
                                         for row in rows(path))
        wait_for(past_first_sync, process)
        time.sleep(2)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=hang_guard(120))  # a hang guard, not a speed check
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "SIGTERM: stopping" in err and f"--resume {logdir}" in err
    checkpoint = CheckpointStore(str(logdir)).latest()
    assert checkpoint.has_replay and checkpoint.load_state()["loop"]["owed"] > 0


@pytest.mark.slow  # a real run
def test_kill_9_then_resume_loses_nothing_logged(tmp_path, background):
    # Killed once a checkpoint is written and TensorBoard is past it: the resume must cut
    # the logs and the events back to the checkpoint, so that the run logs exactly what a
    # straight run logs, and each step is in TensorBoard once.
    args = ["--game=pong", "--prepopulate=400", "--replay-capacity=2000", "--evaluate=800",
            "--eval-episodes=1", "--max-episode-steps=300", "--target-update-freq=400",
            "--eps-decay-steps=600", "--eps-end=0.05", "--seed=3", "--save-replay",
            "--checkpoint-freq=400", "--timesteps=1600", "--batch-size=8"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    straight_run = background("run_dqn.py", args + [f"--logdir={straight}"])
    process = subprocess.Popen([sys.executable, "run_dqn.py", *args, f"--logdir={killed}"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store, seen = CheckpointStore(str(killed)), []

    def stopped_past_a_checkpoint():
        # Checked with the run stopped (SIGSTOP), so that it cannot write another
        # checkpoint between the check and the kill; let go again if not yet.
        if not store.steps() or store.steps()[-1] < 800:
            return False
        process.send_signal(signal.SIGSTOP)
        seen[:] = store.steps()[-1:]
        if max(episode_points(killed), default=0) > seen[0]:
            return True
        process.send_signal(signal.SIGCONT)
        return False
    try:
        wait_for(stopped_past_a_checkpoint, process)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
    assert store.latest().step == seen[0]  # so TensorBoard has games past the checkpoint
    killed_at = max(int(row["agent_step"]) for row in rows(killed / "episodes.csv"))
    result = run("run_dqn.py", [f"--resume={killed}"])
    assert result.returncode == 0, result.stderr[-3000:]
    resumed_from = int(result.stdout.split("at step ")[1].split()[0].replace(",", ""))
    assert killed_at - resumed_from <= 400 + 300  # one interval, plus the game in progress
    assert straight_run.result().returncode == 0, straight_run.result().stderr[-3000:]
    assert logs(killed) == logs(straight)
    scalars = read_scalars(killed)
    for tag, points in scalars.items():
        steps = [step for step, _ in points]
        assert steps == sorted(steps) and len(set(steps)) == len(steps), tag
    assert episode_points(killed) == [int(row["agent_step"])
                                      for row in rows(killed / "episodes.csv")]
    assert [step for step, _ in scalars["eval/mean"]] == [
        int(row["agent_step"]) for row in rows(killed / "eval.csv")] == [800, 1600]


def episode_points(logdir):
    """The steps of the games in TensorBoard, read while the run writes: a record may be
    half written, which reads as none yet."""
    try:
        return [step for step, _ in read_scalars(logdir).get("train/episode_return", [])]
    except Exception:
        return []


@pytest.mark.slow  # a real run
def test_one_process_per_run_until_kill_9_frees_it(tmp_path, capsys):
    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import FAST, NATURE
    logdir = tmp_path / "run"
    args = ["--env=CartPole-v1", "--workers=4", "--timesteps=1000000", "--evaluate=0",
            "--checkpoint-freq=1000"]
    process = subprocess.Popen([sys.executable, "run_fast_dqn.py", *args, f"--logdir={logdir}"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    in_use = f"error: --resume: '{logdir}' is in use by process {process.pid} on "
    try:
        store = CheckpointStore(str(logdir))
        wait_for(lambda: store.steps(), process)
        # A second process, then (in this one, as the scripts call it) the other script and
        # a new run into the same directory: each refused, the run untouched.
        second = run("run_fast_dqn.py", [f"--resume={logdir}"])
        assert second.returncode == 2 and "Traceback" not in second.stderr
        line = second.stderr.strip().splitlines()
        assert len(line) == 1 and line[0].startswith(f"run_fast_dqn.py: {in_use}")
        capsys.readouterr()

        def train(config, **kwargs):
            raise AssertionError("a run in use reached training")
        assert cli.main(NATURE, [f"--resume={logdir}"], train=train) == 2
        line = capsys.readouterr().err.strip().splitlines()
        assert len(line) == 1 and line[0].startswith(f"run_dqn.py: {in_use}")
        assert cli.main(FAST, args + [f"--logdir={logdir}"], train=train) == 2
        assert process.poll() is None  # the run went on, untouched
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
    budget = store.steps()[-1] + 1000
    result = run("run_fast_dqn.py", [f"--resume={logdir}", f"--timesteps={budget}"])
    assert result.returncode == 0, result.stderr[-3000:]
    episodes = rows(logdir / "episodes.csv")
    assert [int(row["episode"]) for row in episodes] == list(range(1, len(episodes) + 1))
    steps = [int(row["agent_step"]) for row in episodes]
    assert steps == sorted(steps) and steps[-1] <= budget


@pytest.mark.slow  # a real run
@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_a_stop_the_instant_config_json_appears_leaves_a_run_that_resumes(tmp_path, stop):
    """The moment the file appears is the moment the old code had written 0 bytes of it."""
    from helpers import TINY_CARTPOLE, command, flags
    run_dir = tmp_path / "run"
    config = run_dir / "config.json"
    process = subprocess.Popen(command("run_dqn.py", [*flags(dict(TINY_CARTPOLE,
                                                                  timesteps=600)),
                                                      f"--logdir={run_dir}"]),
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not config.exists():
            assert process.poll() is None and time.monotonic() < deadline
        process.send_signal(stop)
        process.wait(timeout=60)
    finally:
        process.kill()
    import json
    assert json.loads(config.read_text())["loop"] == "dqn"
    result = run("run_dqn.py", [f"--resume={run_dir}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert [name for name in os.listdir(run_dir) if name.startswith(".config")] == []


@pytest.mark.slow  # a real run
def test_evaluate_and_plot_beside_a_run_that_checkpoints_every_100_steps(tmp_path):
    """The attack that crashed evaluate 6 times in 6: its chosen checkpoint pruned before
    it was read."""
    from helpers import TINY_CARTPOLE, command, flags
    run_dir = tmp_path / "run"
    process = subprocess.Popen(command("run_dqn.py", [*flags(dict(
        TINY_CARTPOLE, timesteps=200_000, checkpoint_freq=100)), f"--logdir={run_dir}"]),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        store = CheckpointStore(str(run_dir))
        wait_for(lambda: store.steps() and store.steps()[-1] >= 300, process)
        for _ in range(3):
            result = subprocess.run([sys.executable, "-m", "fast_dqn.tools.evaluate",
                                     str(run_dir), "--episodes", "2"], cwd=ROOT,
                                    capture_output=True, text=True, timeout=hang_guard(300))
            assert result.returncode == 0, result.stderr[-3000:]
            assert "over 2 games" in result.stdout
            assert process.poll() is None  # still training beside it
        result = subprocess.run([sys.executable, "-m", "fast_dqn.tools.plot", str(run_dir),
                                 "-o", str(tmp_path / "c.png")], cwd=ROOT,
                                capture_output=True, text=True, timeout=hang_guard(300))
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    finally:
        process.kill()
        process.wait(timeout=60)


@pytest.mark.slow  # a real run
def test_a_run_outlives_its_console(tmp_path):
    """`python run_dqn.py ... | head -1`: the reader goes away after the first line. The run
    goes on to its end and its last checkpoint; what it would have printed is dropped."""
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "run_dqn.py", "--env=CartPole-v1", "--timesteps=600",
         "--prepopulate=100", "--evaluate=300", "--eval-episodes=1", f"--logdir={run_dir}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    process.stdout.readline()
    process.stdout.close()
    process.stderr.close()
    assert process.wait(timeout=hang_guard(300)) == 0
    assert os.listdir(run_dir / "checkpoints") == ["step-000000000600"]
    assert len((run_dir / "eval.csv").read_text().splitlines()) == 3  # header, 300, 600


KEPT = [
    # The reported failure (docs/reliability-internals.md, "The crash fuzzer"): Ctrl-C mid-period on
    # the fast loop without --save-replay made the resume fail with "ValueError: replay
    # memory holds no complete transition yet", until the refill. With evaluate and plot
    # beside it, and a value of its checkpoint's state.json replaced before the resume.
    fuzzer.fixed_trial(1),
    # A budget cut at the first resume, then Ctrl-C and a plain --resume: it used to fall back
    # to config.json's first budget (3543f53: a plain resume forgot the --timesteps an earlier
    # resume gave, and ran on past it, or refused "below the checkpoint's step" for a flag
    # never typed). Now it goes on to the cut budget its checkpoint recorded, says it keeps
    # it, and logs what a straight run with that budget logs.
    fuzzer.fixed_trial(9),
]


@pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers
@pytest.mark.parametrize("trial", KEPT, ids=lambda t: t.describe().replace(" ", "-"))
def test_a_run_stopped_at_random_moments_finishes_with_consistent_logs(tmp_path, trial):
    passed, line = fuzzer.run_fixed_trial(trial, str(tmp_path))
    assert passed, line


def test_the_fixed_trials_are_the_benchmarks_and_each_must_show_what_it_did(monkeypatch,
                                                                           tmp_path, capsys):
    ran = []

    def trial_that_did_nothing(trial, workdir):
        ran.append(trial.seed)
        return True, f"trial {trial.seed}: {trial.describe()} | SIGINT->130 | ok (1 s)"
    monkeypatch.setattr(fuzzer, "run_trial", trial_that_did_nothing)
    # --fixed runs exactly FIXED, in order; the kept ones are among them.
    assert fuzzer.main(["--fixed", f"--keep={tmp_path}"]) == 1
    assert ran == [trial.seed for trial in fuzzer.FIXED] == [1, 2, 3, 4, 6, 7, 9, 8]
    assert all(trial in fuzzer.FIXED for trial in KEPT)
    # A trial whose line lacks what it is there for fails, naming what it lacks.
    out = capsys.readouterr().out
    assert "trial 9: " in out and "| FAILED (1 s)" in out and "['[timesteps=', 'kept', 'step-* renamed]', 'refused->2']" in out
    assert out.strip().splitlines()[-1] == "8 trials, 3 passed, failed: 1 6 7 9 8"
    with pytest.raises(SystemExit):
        fuzzer.main(["--fixed", "--trials=3"])
    assert "--fixed runs the fixed trials" in capsys.readouterr().err
