"""Faults injected into runs (a sampler, the trainer or the evaluator raising, a NaN loss,
a full disk, a kill while a checkpoint is written, an abort): each ends the run quickly,
loudly, in one line with its exit status and without a hang, and leaves the last good
checkpoint to resume from.

Every subprocess has a timeout, so a regression shows as a failure, not a hung CI. Stops
from outside (signals, kill -9) are in test_stops_and_kills.py.
"""

import os
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers import ROOT, code_path_env, hang_guard, run, selected, wait_for

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
        capture_output=True, text=True, timeout=hang_guard(300), cwd=ROOT, env=code_path_env())
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
