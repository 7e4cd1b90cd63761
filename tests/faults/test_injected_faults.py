"""Faults injected into real runs: each ends the run quickly, loudly and without a hang.

Every subprocess has a timeout, so a regression shows as a failure, not a hung CI.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers import ROOT, code_path_env, logs, read_scalars, rows, run, selected

from fast_dqn.run.storage.checkpoint import CheckpointStore

pytestmark = [pytest.mark.slow, pytest.mark.faults]  # real runs: docs/testing.md's tiers, markers

FAULT_RUN = textwrap.dedent("""
    import errno, os, sys, time
    import numpy as np
    from fast_dqn.agent import learner, replay_memory
    from fast_dqn.envs import samplers
    from fast_dqn.loops import evaluation
    from fast_dqn.run import cli, training
    from fast_dqn.run.run_kinds import FAST

    mode, marker = sys.argv[1], sys.argv[2]

    def fail_after(owner, name, calls, error):
        original, seen = getattr(owner, name), [0]
        def wrapper(*args, **kwargs):
            seen[0] += 1
            if seen[0] > calls:
                open(marker, "w").write(repr(time.time()))
                if error is None:  # hang, for the test to kill -9
                    time.sleep(600)
                # A fresh exception each time: re-raising one instance from this closure
                # would tie its traceback's frames into a cycle that outlives the run.
                raise type(error)(*error.args)
            return original(*args, **kwargs)
        setattr(owner, name, wrapper)

    if mode == "sampler":
        fail_after(samplers.PythonSamplers, "step", 300, OSError("injected sampler fault"))
    elif mode == "trainer":  # in the trainer thread's third call
        fail_after(learner.DQNLearner, "train_many", 2, RuntimeError("injected trainer fault"))
    elif mode == "prefetcher":  # in the prefetch thread's third gather of a call
        fail_after(replay_memory.ReplayMemory, "gather_many", 2,
                   RuntimeError("injected prefetch fault"))
    elif mode == "evaluator":
        fail_after(evaluation, "play", 0, RuntimeError("injected evaluator fault"))
    elif mode == "nan":
        loss = learner.dqn_loss
        learner.dqn_loss = lambda *args: loss(*args) * float("nan")
    elif mode == "log-disk-full":  # a full disk between checkpoints, at a log row
        from fast_dqn.run.logs import monitor
        fail_after(monitor.CsvLog, "check", 60, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    elif mode == "tensorboard-disk-full":  # ... or at a TensorBoard event
        from tensorboard.summary.writer import record_writer
        fail_after(record_writer.RecordWriter, "write", 40,
                   OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    elif mode in ("full-disk", "kill-while-saving"):
        # The first checkpoint is written; the second breaks off a few writes in.
        from fast_dqn.run.storage import checkpoint
        save, saves = checkpoint.CheckpointStore.save, [0]
        def second_save_breaks(self, *args, **kwargs):
            saves[0] += 1
            if saves[0] == 2 and mode == "full-disk":
                fail_after(checkpoint._ChecksumWriter, "write", 3,
                           OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
            elif saves[0] == 2:
                fail_after(checkpoint._ChecksumWriter, "write", 3, None)
            return save(self, *args, **kwargs)
        checkpoint.CheckpointStore.save = second_save_breaks
    sys.exit(cli.main(FAST, sys.argv[3:]))
""")

# CartPole: what these faults test is the runner's and the loop's, not the game's, and an MLP
# on CartPole reaches each fault seconds sooner than the CNN on Pong (the kill -9 test below
# keeps a real Pong run).
TINY = ["--env=CartPole-v1", "--workers=2", "--prepopulate=400", "--replay-capacity=2000",
        "--target-update-freq=200", "--eval-episodes=1"]


def run_with_fault(tmp_path, mode, extra):
    script = tmp_path / "fault.py"
    script.write_text(FAULT_RUN)
    marker = tmp_path / "fault-time"
    result = subprocess.run(
        [sys.executable, str(script), mode, str(marker), *TINY, *extra,
         f"--logdir={tmp_path / 'run'}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=code_path_env())
    fault_time = float(marker.read_text()) if marker.exists() else None
    return result, fault_time


# The runs that end by themselves, each at its fault, and their flags beside TINY. They run
# side by side (see helpers.BackgroundRun: each is mostly one busy thread), once for the
# module: {fault: (CompletedProcess, the fault's time or None, the run directory)}.
UNTIL_THE_FAULT = ["--timesteps=100000", "--evaluate=0", "--checkpoint-freq=400"]
FAULT_RUNS = {"sampler": UNTIL_THE_FAULT, "trainer": UNTIL_THE_FAULT,
              "prefetcher": UNTIL_THE_FAULT,
              "evaluator": ["--timesteps=100000", "--evaluate=400", "--checkpoint-freq=0"],
              "nan": ["--timesteps=100000", "--evaluate=0", "--checkpoint-freq=200"],
              "log-disk-full": UNTIL_THE_FAULT, "tensorboard-disk-full": UNTIL_THE_FAULT}


@pytest.fixture(scope="module")
def fault_runs(request, tmp_path_factory):
    base, faults = tmp_path_factory.mktemp("faults"), selected(request, "fault")
    for fault in faults:
        (base / fault).mkdir()
    with ThreadPoolExecutor(max(1, len(faults))) as pool:
        started = {fault: pool.submit(run_with_fault, base / fault, fault, FAULT_RUNS[fault])
                   for fault in faults}
    return {fault: (*future.result(), base / fault / "run") for fault, future in started.items()}


@pytest.mark.parametrize("fault,message", [
    ("sampler", "OSError: injected sampler fault"),
    ("trainer", "RuntimeError: injected trainer fault"),
    ("prefetcher", "RuntimeError: injected prefetch fault"),
])
def test_a_thread_fault_ends_the_run_with_its_traceback(fault_runs, fault, message):
    result, fault_time, _ = fault_runs[fault]
    assert result.returncode == 1, result.stderr[-3000:]
    # Exit 1 long before the 100k-step budget: the fault ended the run (a hang would hit the
    # subprocess timeout instead).
    assert fault_time is not None
    assert "Traceback" in result.stderr and message in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("run_fast_dqn.py: error: the run failed") and "--resume" in last


@pytest.mark.parametrize("fault", ["evaluator"])
def test_an_evaluator_fault_saves_a_checkpoint_first_and_the_evaluation_reruns(fault_runs,
                                                                              fault):
    result, fault_time, run_dir = fault_runs[fault]
    assert result.returncode == 1, result.stderr[-3000:]
    assert fault_time is not None
    assert "RuntimeError: injected evaluator fault" in result.stderr
    checkpoint = CheckpointStore(str(run_dir)).latest()
    assert checkpoint.step == 400
    assert checkpoint.load_state()["loop"]["eval_pending"]
    assert "the last checkpoint is at step 400" in result.stderr


@pytest.mark.parametrize("fault", ["nan"])
def test_nan_loss_stops_with_a_clear_message_and_keeps_the_last_good_checkpoint(fault_runs,
                                                                               fault):
    result, _, run_dir = fault_runs[fault]
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert "the loss is not finite" in last and "training diverged" in last
    assert "Traceback" not in result.stderr
    store = CheckpointStore(str(run_dir))
    # Training starts after the warm-up of 400 steps: nothing after that was saved.
    assert store.steps() == [200, 400]
    weights = store.latest().load_state()["learner"]["main"]
    assert all(np.isfinite(w).all() for w in weights)


def wait_for(condition, process, seconds=240):
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, "the run ended before it could be signalled"
        assert time.monotonic() < deadline
        time.sleep(0.1)


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
        out, err = process.communicate(timeout=120)  # a hang guard, not a speed check
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "SIGTERM: stopping" in err and f"--resume {logdir}" in err
    checkpoint = CheckpointStore(str(logdir)).latest()
    assert checkpoint.has_replay and checkpoint.load_state()["loop"]["owed"] > 0


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


def test_first_signal_asks_to_stop_and_a_second_ctrl_c_aborts():
    from fast_dqn.run.interrupts import StopSignals
    previous = signal.getsignal(signal.SIGINT)
    with StopSignals() as stop:
        assert not stop()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop() and stop.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)  # a repeated SIGTERM changes nothing
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is previous  # handlers are put back


@pytest.mark.parametrize("error,code,words", [
    (KeyboardInterrupt(), 130, "aborted"),
    ("checkpoint", 1, "No space left on device"),
])
def test_an_abort_or_a_failed_checkpoint_gives_its_exit_status(tmp_path, capsys, error, code,
                                                                words):
    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import NATURE
    from fast_dqn.run.storage.checkpoint import CheckpointError

    def train(config, **kwargs):
        if error == "checkpoint":
            raise CheckpointError("could not write the checkpoint of step 100 in x (No space "
                                  "left on device)")
        raise error

    assert cli.main(NATURE, [f"--logdir={tmp_path / 'run'}"], train=train) == code
    assert words in capsys.readouterr().err


@pytest.mark.parametrize("earlier", [False, True])
def test_a_failed_checkpoint_says_what_is_safe_and_the_command(tmp_path, capsys, earlier):
    """The first checkpoint of a run has none before it to fall back on; a 'best' that is a
    file is named with what to do."""
    import errno

    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import NATURE
    from fast_dqn.run.storage.checkpoint import CheckpointError, CheckpointStore
    run_dir = tmp_path / "run"

    def train(config, **kwargs):
        if earlier:
            CheckpointStore(str(run_dir)).save(400, {"x": 1})
        cause = OSError(errno.ENOSPC, "No space left on device")
        raise CheckpointError("could not write the checkpoint of step 800 in x (No space left "
                              "on device)") from cause

    assert cli.main(NATURE, [f"--logdir={run_dir}"], train=train) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    if earlier:
        assert err.endswith(f"the last checkpoint is at step 400: python run_dqn.py --resume "
                            f"{run_dir} continues from it, once there is space")
    else:
        assert err.endswith(f"no checkpoint was written: python run_dqn.py --resume {run_dir} "
                            "starts it again from step 0, once there is space")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "best").write_text("not a folder")
    with pytest.raises(CheckpointError, match=r"'.*best' is a file, not the run's folder; "
                       r"move it away"):
        CheckpointStore(str(tmp_path / "other"), folder="best").save(5, {"x": 1})


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


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_last_checkpoint(tmp_path):
    result, fault_time = run_with_fault(
        tmp_path, "full-disk", ["--timesteps=100000", "--evaluate=0", "--checkpoint-freq=400",
                                "--save-replay"])
    assert result.returncode == 1 and fault_time is not None, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == (f"run_fast_dqn.py: error: could not write the checkpoint of step 800 in "
                    f"{tmp_path / 'run' / 'checkpoints'} (No space left on device); the last "
                    f"checkpoint is at step 400: python run_fast_dqn.py --resume "
                    f"{tmp_path / 'run'} continues from it, once there is space")
    assert sorted(os.listdir(tmp_path / "run" / "checkpoints")) == ["step-000000000400"]
    resumed = run("run_fast_dqn.py", [f"--resume={tmp_path / 'run'}", "--timesteps=1200"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout and "at step 400" in resumed.stdout


@pytest.mark.parametrize("fault,file", [("log-disk-full", "episodes.csv"),
                                        ("tensorboard-disk-full", "tensorboard")])
def test_a_full_disk_between_checkpoints_is_one_line(fault_runs, fault, file):
    result, fault_time, _ = fault_runs[fault]
    assert result.returncode == 1 and fault_time is not None, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("run_fast_dqn.py: error: cannot write ") and file in last
    assert "(No space left on device" in last and "--resume" in last and "continues" in last


def test_kill_9_while_a_checkpoint_is_written_leaves_the_previous_one_usable(tmp_path):
    script = tmp_path / "fault.py"
    script.write_text(FAULT_RUN)
    marker, logdir = tmp_path / "fault-time", tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, str(script), "kill-while-saving", str(marker), *TINY,
         "--timesteps=100000", "--evaluate=0", "--checkpoint-freq=400", "--save-replay",
         f"--logdir={logdir}"], cwd=ROOT, env=code_path_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        wait_for(marker.exists, process)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        process.kill()
    names = sorted(os.listdir(logdir / "checkpoints"))
    assert names[1:] == ["step-000000000400"] and names[0].startswith(".partial-step-")
    resumed = run("run_fast_dqn.py", [f"--resume={logdir}", "--timesteps=1200"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "at step 400" in resumed.stdout
    # The next save removed the half-written one; the newest two are kept.
    assert sorted(os.listdir(logdir / "checkpoints")) == ["step-000000000800",
                                                           "step-000000001200"]


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
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stderr[-3000:]
            assert "over 2 games" in result.stdout
            assert process.poll() is None  # still training beside it
        result = subprocess.run([sys.executable, "-m", "fast_dqn.tools.plot", str(run_dir),
                                 "-o", str(tmp_path / "c.png")], cwd=ROOT,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    finally:
        process.kill()
        process.wait(timeout=60)


def test_ctrl_c_while_tensorflow_imports_is_one_line_and_exit_130(tmp_path, monkeypatch,
                                                                  capsys):
    from fast_dqn.agent import backend_setup
    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import NATURE

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(backend_setup, "keras_backend", interrupted)
    assert cli.main(NATURE, [f"--logdir={tmp_path / 'run'}"]) == 130
    assert capsys.readouterr().err == ("run_dqn.py: interrupted before training began; "
                                       "nothing was made\n")
    assert not (tmp_path / "run").exists()


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
    assert process.wait(timeout=300) == 0
    assert os.listdir(run_dir / "checkpoints") == ["step-000000000600"]
    assert len((run_dir / "eval.csv").read_text().splitlines()) == 3  # header, 300, 600
