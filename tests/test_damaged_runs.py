"""Runs that a user damaged between sessions, or while they ran: a stop before the first
checkpoint, a log deleted, emptied or converted by an editor, config.json edited by hand.
Each resumes, or is refused in one line; nothing the user has is overwritten."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import ROOT, logs, rows, run, run_together

from fast_dqn.run import cli
from fast_dqn.run.hyperparameters import Config
from fast_dqn.run.monitor import EPISODE_COLUMNS, CsvLog, Monitor, restore_log
from fast_dqn.run.run_directory import create_run_directory
from fast_dqn.run.run_kinds import NATURE

HEADER = b"episode,agent_step,length,return,mean_100,epsilon,hours\r\n"
ROW = b"1,10,10,1.0,1.0,1.0,0.0\r\n"


# --- a stop before the first checkpoint

def dead_start(path):
    """What a run killed before its first checkpoint leaves: its config, logs of the steps
    it played, TensorBoard events, an export of its best evaluation and a partial
    checkpoint."""
    config = Config(logdir=str(path), env="CartPole-v1", game=None)
    create_run_directory(str(path), {"loop": "dqn", **config.to_dict()}).release()
    (path / "episodes.csv").write_bytes(HEADER + ROW)
    (path / "eval.csv").write_text("agent_step,mean,std,episodes,hours\r\n")
    (path / "tensorboard").mkdir()
    (path / "tensorboard" / "events.out").write_bytes(b"x")
    (path / "best" / "step-000000000300").mkdir(parents=True)
    (path / "checkpoints" / ".partial-step-000000000400-1").mkdir(parents=True)


def test_resume_before_the_first_checkpoint_starts_again_from_step_0(tmp_path, capsys):
    run_dir = tmp_path / "run"
    dead_start(run_dir)
    calls = []

    def train(config, resume, stop):
        calls.append((config, resume))
    code = cli.main(NATURE, "", [f"--resume={run_dir}", "--timesteps=900"], train=train)
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    (config, resume), = calls
    assert resume is None and config.timesteps == 900 and config.env == "CartPole-v1"
    assert "stopped before its first checkpoint; starting it again from step 0" in out
    assert sorted(os.listdir(run_dir)) == ["checkpoints", "config.json", "run.lock"]


@pytest.mark.slow  # real runs
def test_a_run_killed_before_its_first_checkpoint_resumes_into_the_straight_run(tmp_path):
    args = ["--env=CartPole-v1", "--timesteps=1500", "--prepopulate=200", "--evaluate=500",
            "--eval-episodes=2", "--checkpoint-freq=100000", "--seed=4"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    process = subprocess.Popen([sys.executable, "run_dqn.py", *args, f"--logdir={killed}"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not (killed / "episodes.csv").exists() or len(rows(killed / "episodes.csv")) < 3:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    assert not os.path.exists(killed / "checkpoints" / "step-000000001500")
    result = run("run_dqn.py", [f"--resume={killed}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "starting it again from step 0" in result.stdout
    result = run("run_dqn.py", [*args, f"--logdir={straight}"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert logs(killed) == logs(straight) and len(logs(straight)[1]) == 3


# --- logs damaged between runs

def test_a_log_that_matches_the_checkpoint_is_cut_back_to_it(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_bytes(HEADER + ROW + ROW)  # a row written after the checkpoint
    log, note = restore_log(str(path), EPISODE_COLUMNS, HEADER + ROW, 50)
    log.close()
    assert note is None and path.read_bytes() == HEADER + ROW
    assert os.listdir(tmp_path) == ["episodes.csv"]


@pytest.mark.parametrize("damage", ["deleted", "emptied", "line ends", "edited", "shorter"])
def test_a_damaged_log_is_rebuilt_from_the_checkpoint_and_kept_aside(tmp_path, damage):
    path = tmp_path / "episodes.csv"
    good = HEADER + ROW + ROW
    found = {"deleted": None, "emptied": b"", "line ends": good.replace(b"\r\n", b"\n"),
             "edited": good.replace(b"1.0", b"9.0"), "shorter": HEADER + ROW}[damage]
    if found is not None:
        path.write_bytes(found)
    log, note = restore_log(str(path), EPISODE_COLUMNS, good, 50)
    log.write([3, 30, 10, 1.0, 1.0, 1.0, 0.0])
    log.close()
    assert path.read_bytes() == good + b"3,30,10,1.0,1.0,1.0,0.0\r\n"  # never padded
    assert note.startswith("episodes.csv ") and note.endswith(
        ": rebuilt from the copy in the checkpoint of step 50")
    if found is None:
        assert os.listdir(tmp_path) == ["episodes.csv"]
    else:  # what the user had is kept
        assert (tmp_path / "episodes.csv.damaged").read_bytes() == found
        assert "kept as episodes.csv.damaged" in note


@pytest.mark.parametrize("damage", ["deleted", "replaced", "emptied"])
def test_a_log_damaged_while_the_run_writes_it_is_written_again(tmp_path, damage):
    path, warnings = tmp_path / "episodes.csv", []
    log = CsvLog(str(path), EPISODE_COLUMNS, warn=warnings.append)
    log.write([1, 10, 10, 1.0, 1.0, 1.0, 0.0])
    if damage == "deleted":
        path.unlink()
    elif damage == "replaced":  # an editor saves a new file over it
        path.with_suffix(".new").write_bytes(b"mine")
        os.replace(path.with_suffix(".new"), path)
    else:
        path.write_bytes(b"")
    log.write([2, 20, 10, 1.0, 1.0, 1.0, 0.0])
    log.close()
    assert path.read_bytes() == HEADER + ROW + b"2,20,10,1.0,1.0,1.0,0.0\r\n"
    assert len(warnings) == 1 and "written again from the run's own copy" in warnings[0]
    if damage == "replaced":
        assert (tmp_path / "episodes.csv.damaged").read_bytes() == b"mine"


def test_a_checkpoint_keeps_a_copy_of_each_log_up_to_its_step(tmp_path):
    monitor = Monitor(str(tmp_path), 100, console=_Silent())
    monitor.record_game(10, 10, 1.0, 1.0)
    state = monitor.state_dict(10)
    monitor.close()
    assert state["logs"]["episodes.csv"] == (tmp_path / "episodes.csv").read_bytes()


class _Silent:
    interval = 1e9

    def message(self, line):
        pass

    def update(self, *args, **kwargs):
        pass

    def close(self, step=None):
        pass


@pytest.mark.slow  # real runs
@pytest.mark.parametrize("loop", ["run_dqn.py", "run_fast_dqn.py"])
def test_logs_deleted_or_converted_between_runs_resume_into_the_straight_run(tmp_path, loop):
    # Split at a sync point and an evaluation, where a straight run also passes.
    args = ["--env=CartPole-v1", "--prepopulate=200", "--evaluate=480", "--eval-episodes=2",
            "--seed=2", "--save-replay", "--target-update-freq=96"]
    if loop == "run_fast_dqn.py":
        args += ["--workers=4", "--train-freq=1"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    for result in run_together((loop, [*args, "--timesteps=1440", f"--logdir={straight}"]),
                               (loop, [*args, "--timesteps=960", f"--logdir={split}"])):
        assert result.returncode == 0, result.stderr[-3000:]
    (split / "episodes.csv").unlink()
    converted = (split / "eval.csv").read_bytes().replace(b"\r\n", b"\n")  # dos2unix
    (split / "eval.csv").write_bytes(converted)
    result = run(loop, [f"--resume={split}", "--timesteps=1440"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "episodes.csv was missing: rebuilt from the copy in the checkpoint" in result.stdout
    assert "eval.csv differed from the checkpoint's copy (kept as eval.csv.damaged)" \
        in result.stdout
    assert logs(split) == logs(straight)
    assert (split / "eval.csv.damaged").read_bytes() == converted


# --- config.json edited by hand, with a checkpoint that recorded the real settings

@pytest.mark.slow  # real training, in process
@pytest.mark.parametrize("name,value", [("dueling", True), ("replay_capacity", 1500),
                                        ("discount", 0.9)])
def test_config_json_edited_against_its_checkpoint_is_one_line(tmp_path, capsys, name, value):
    from fast_dqn.run.training import train_nature
    run_dir = tmp_path / "run"
    argv = ["--env=CartPole-v1", "--timesteps=300", "--prepopulate=100", "--evaluate=0",
            "--replay-capacity=1000", "--save-replay", f"--logdir={run_dir}"]
    assert cli.main(NATURE, "", argv, train=train_nature) == 0
    saved = json.loads((run_dir / "config.json").read_text())
    saved[name] = value
    (run_dir / "config.json").write_text(json.dumps(saved))
    before = (run_dir / "episodes.csv").read_bytes()
    capsys.readouterr()
    code = cli.main(NATURE, "", [f"--resume={run_dir}", "--timesteps=400"], train=train_nature)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f'config.json has "{name}": {json.dumps(value)}, but the checkpoint of step 300 ' \
           "was trained with" in err
    assert (run_dir / "episodes.csv").read_bytes() == before
