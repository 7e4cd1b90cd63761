"""`fast-dqn group` (fast_dqn.run.group_cli): its refusals in one line before anything is
made, and, under JAX, a group started, stopped by Ctrl-C and resumed from the command line, one
of its runs resumed alone, a damaged run left out while the others train.

The training needs JAX: tests/end_to_end/test_keras_backends.py runs this file again in a
JAX child."""

import json
import os
import signal
import subprocess
import sys

import keras
import pytest
from helpers import ROOT, code_path_env, hang_guard, wait_for

from fast_dqn.run.group_cli import main

ON_JAX = keras.backend.backend() == "jax"
jax_only = pytest.mark.skipif(not ON_JAX, reason="JAX's: run in a JAX child by "
                              "tests/end_to_end/test_keras_backends.py")

# CartPole, 4 games a run, 2,000 agent steps: 10 target periods, a checkpoint every 1,000.
RUN = ("--env=CartPole-v1 --workers=4 --env-backend=python --timesteps=2000 "
       "--prepopulate=100 --replay-capacity=2000 --batch-size=8 --train-freq=4 "
       "--target-update-freq=200 --eps-decay-steps=500 --optimizer=adam --lr=1e-3 "
       "--history-length=1 --evaluate=0 --checkpoint-freq=1000 --save-replay")


def run_flags(tmp_path, seed, extra=""):
    return f"--run={RUN} --seed={seed} --logdir={tmp_path / f'r{seed}'} {extra}".strip()


def group(args, **kw):
    env = code_path_env()
    env["KERAS_BACKEND"] = "jax"
    return subprocess.Popen([sys.executable, "-m", "fast_dqn", "group", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kw)


def finished(run_dir):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    return CheckpointStore(str(run_dir)).newest_is_finished()


@pytest.mark.skipif(ON_JAX, reason="the refusal is TensorFlow's")
def test_a_group_on_tensorflow_is_refused_in_one_line_before_anything_is_made(tmp_path,
                                                                             capsys):
    assert main([run_flags(tmp_path, 1), run_flags(tmp_path, 2)]) == 2
    err = capsys.readouterr().err.strip()
    assert "KERAS_BACKEND=jax" in err and len(err.splitlines()) == 1
    assert not os.listdir(tmp_path)


def test_a_group_of_one_run_is_refused(tmp_path, capsys):
    assert main([run_flags(tmp_path, 1)]) == 2
    assert "two runs or more" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


@jax_only
def test_runs_of_two_protocols_are_refused_before_any_directory_is_made(tmp_path, capsys):
    assert main([run_flags(tmp_path, 1), run_flags(tmp_path, 2, "--lr=5e-4")]) == 2
    err = capsys.readouterr().err
    assert "--lr" in err and "one protocol" in err
    assert not os.listdir(tmp_path)
    assert main([run_flags(tmp_path, 1), run_flags(tmp_path, 1)]) == 2
    assert "give each its own" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


@jax_only
def test_a_group_stopped_by_ctrl_c_resumes_as_a_group_and_one_run_alone(tmp_path):
    started = group([run_flags(tmp_path, s) for s in (1, 2, 3)])
    wait_for(lambda: os.path.isdir(tmp_path / "r3" / "checkpoints") and
             os.listdir(tmp_path / "r3" / "checkpoints"), started)
    started.send_signal(signal.SIGINT)
    out, err = started.communicate(timeout=hang_guard(300))
    assert started.returncode == 128 + signal.SIGINT, err[-2000:]
    assert "stopped after every run's checkpoint" in err
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    steps = {CheckpointStore(str(tmp_path / f"r{s}")).steps()[-1] for s in (1, 2, 3)}
    assert len(steps) == 1 and steps.pop() < 2000
    # Runs 1 and 2 go on as a group; run 3 alone, as an ordinary run.
    resumed = group([f"--run=--resume={tmp_path / 'r1'}", f"--run=--resume={tmp_path / 'r2'}"])
    out, err = resumed.communicate(timeout=hang_guard(300))
    assert resumed.returncode == 0, err[-2000:]
    assert "every run finished" in out
    alone = subprocess.run([sys.executable, "-m", "fast_dqn", "fast",
                            f"--resume={tmp_path / 'r3'}"], cwd=ROOT, env=code_path_env(),
                           capture_output=True, text=True, timeout=hang_guard(300))
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert all(finished(tmp_path / f"r{s}") for s in (1, 2, 3))
    log = (tmp_path / "r1.log").read_text()
    assert "resumed from" in log and "finished: 2,000 agent steps" in log


@jax_only
def test_a_damaged_run_is_named_and_left_out_and_the_others_train(tmp_path):
    first = group([run_flags(tmp_path, s, "--timesteps=1000") for s in (1, 2, 3)])
    _, err = first.communicate(timeout=hang_guard(300))
    assert first.returncode == 0, err[-2000:]
    (tmp_path / "r2" / "config.json").write_text("{ damaged")
    again = group([f"--run=--resume={tmp_path / f'r{s}'} --timesteps=1500" for s in (1, 2, 3)])
    out, err = again.communicate(timeout=hang_guard(300))
    assert again.returncode == 2, err[-2000:]
    named = [line for line in err.splitlines() if "r2" in line and "error" in line]
    assert len(named) == 1 and "config.json" in named[0]
    assert finished(tmp_path / "r1") and finished(tmp_path / "r3")
    with open(tmp_path / "r1" / "config.json") as f:
        assert json.load(f)["seed"] == 1
    done = group([f"--run=--resume={tmp_path / f'r{s}'} --timesteps=1500" for s in (1, 3)])
    out, err = done.communicate(timeout=hang_guard(300))
    assert done.returncode == 0 and "every run finished already" in out, err[-2000:]
