"""Runs that a user damaged between sessions, or while they ran: a stop before the first
checkpoint, a log deleted, emptied or converted by an editor, config.json edited by hand.
Each resumes, or is refused in one line; nothing the user has is overwritten."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import ROOT, logs, rows, run, run_together

from fast_dqn.run import cli
from fast_dqn.run.logs.monitor import EPISODE_COLUMNS, CsvLog, Monitor, restore_log
from fast_dqn.run.run_kinds import NATURE
from fast_dqn.run.settings.hyperparameters import Config
from fast_dqn.run.storage.run_directory import create_run_directory

pytestmark = pytest.mark.faults  # stops, resumes, crashes: see docs/testing.md's markers

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
    code = cli.main(NATURE, [f"--resume={run_dir}", "--timesteps=900"], train=train)
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    (config, resume), = calls
    assert resume is None and config.timesteps == 900 and config.env == "CartPole-v1"
    assert "stopped before its first checkpoint; starting it again from step 0" in out
    assert sorted(os.listdir(run_dir)) == ["checkpoints", "config.json", "first-checkpoint.txt",
                                           "run.lock"]


def snapshot(path):
    """Every file under path, with its bytes: what a refused resume must leave as it was."""
    found = {}
    for folder, _, files in os.walk(path):
        for name in files:
            full = os.path.join(folder, name)
            with open(full, "rb") as f:
                found[os.path.relpath(full, path)] = f.read()
    return found


def moved_away(run_dir):
    """A run that had a checkpoint (first-checkpoint.txt says so), whose checkpoints/ was
    then moved away, to free a disk."""
    from fast_dqn.run.storage.run_directory import mark_checkpointed
    mark_checkpointed(str(run_dir), 400)
    os.rmdir(run_dir / "checkpoints" / ".partial-step-000000000400-1")
    os.rmdir(run_dir / "checkpoints")


def renamed(run_dir):
    (run_dir / "checkpoints" / "step-000000000400.old").mkdir()


def made_before_the_record(run_dir):
    """A run of a fast-dqn that wrote no first-checkpoint.txt: only its logs tell."""
    os.remove(run_dir / "first-checkpoint.txt")


def log_step(run_dir, step):
    with open(run_dir / "episodes.csv", "ab") as f:
        f.write(f"2,{step},10,1.0,1.0,1.0,0.0\r\n".encode())


def older_logs_past_the_first_checkpoint(run_dir):
    """Logs past the step of its first checkpoint (250k, the default), none in checkpoints/."""
    made_before_the_record(run_dir)
    log_step(run_dir, 250_001)


def older_logs_at_the_first_checkpoint(run_dir):
    """Logs at the very step of its first checkpoint, with no partial one being written."""
    made_before_the_record(run_dir)
    shutil.rmtree(run_dir / "checkpoints")
    log_step(run_dir, 250_000)


def older_with_no_checkpoint_freq(run_dir):
    """--checkpoint-freq 0 writes none before the end or a stop: any logged step means the
    run may have got further than a resume from step 0 may discard."""
    made_before_the_record(run_dir)
    saved = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**saved, "checkpoint_freq": 0}))


@pytest.mark.parametrize("damage, words", [
    (moved_away, "has had checkpoints (one of agent step 400), as its first-checkpoint.txt "
                 "records, but none is in"),
    (renamed, "holds step-000000000400.old, which this fast-dqn does not read as checkpoints"),
    (older_logs_past_the_first_checkpoint, "its logs reach agent step 250,001 and its first "
                                           "was due by agent step 250,000"),
    (older_logs_at_the_first_checkpoint, "its logs reach agent step 250,000 and its first "
                                         "was due by agent step 250,000"),
    (older_with_no_checkpoint_freq, "it writes none before it ends or is stopped "
                                    "(--checkpoint-freq 0)")])
def test_a_run_that_got_past_its_first_checkpoint_is_never_started_again(tmp_path, capsys,
                                                                          damage, words):
    """Its checkpoints moved away or renamed, a resume once said "stopped before its first
    checkpoint" and deleted episodes.csv, eval.csv, tensorboard/ and best/."""
    run_dir = tmp_path / "run"
    dead_start(run_dir)
    damage(run_dir)
    before = snapshot(run_dir)
    code = cli.main(NATURE, [f"--resume={run_dir}"], train=lambda *a, **k: pytest.fail("ran"))
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert words in err and err.rstrip().endswith(
        "nothing was changed: put its checkpoints back in "
        f"'{run_dir / 'checkpoints'}' to resume it, or start a new run with another --logdir")
    assert snapshot(run_dir) == before


def no_checkpoint_freq_crash(run_dir):
    """--checkpoint-freq 0, killed (or out of disk at its only checkpoint) at step 250,001."""
    saved = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**saved, "checkpoint_freq": 0}))
    log_step(run_dir, 250_001)


def other_files_in_checkpoints(run_dir):
    """What other programs leave in a folder: hidden files are not the run's renamed ones."""
    (run_dir / "checkpoints" / ".DS_Store").write_bytes(b"")


def older_killed_while_writing_its_first(run_dir):
    """A run of an older fast-dqn killed while its first checkpoint, at 250k, was written
    (its partial is there): its logs reach that step, and no further."""
    made_before_the_record(run_dir)
    log_step(run_dir, 250_000)


@pytest.mark.parametrize("stop", [no_checkpoint_freq_crash, other_files_in_checkpoints,
                                  older_killed_while_writing_its_first])
def test_a_run_that_never_checkpointed_starts_again_however_far_it_got(tmp_path, capsys, stop):
    """first-checkpoint.txt still says "none yet": a crash with --checkpoint-freq 0, or after
    a resume that raised it, leaves logs past any bound, and is started again as promised."""
    run_dir = tmp_path / "run"
    dead_start(run_dir)
    stop(run_dir)
    assert cli.main(NATURE, [f"--resume={run_dir}"], train=lambda *a, **k: None) == 0
    assert "starting it again from step 0" in capsys.readouterr().out
    assert not (run_dir / "episodes.csv").exists()


def test_a_finished_run_whose_checkpoints_were_moved_away_is_refused(finished_cartpole_run,
                                                                      tmp_path, capsys):
    """The reproduction of the data loss, on a real run: training itself writes
    first-checkpoint.txt, so the refusal does not depend on how far the logs got."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_cartpole_run, run_dir)
    assert (run_dir / "first-checkpoint.txt").read_text().startswith(
        "The run had a checkpoint of agent step 300 on ")
    os.rename(run_dir / "checkpoints", tmp_path / "elsewhere")
    before = snapshot(run_dir)
    capsys.readouterr()
    assert cli.main(NATURE, [f"--resume={run_dir}"]) == 2
    assert "as its first-checkpoint.txt records" in capsys.readouterr().err
    assert snapshot(run_dir) == before and len(rows(run_dir / "episodes.csv")) > 5


def test_a_resume_from_a_checkpoint_records_it_for_a_run_made_before_the_record(
        finished_cartpole_run, tmp_path):
    from fast_dqn.run.storage.run_directory import checkpoint_record
    run_dir = tmp_path / "run"
    shutil.copytree(finished_cartpole_run, run_dir)
    made_before_the_record(run_dir)
    assert cli.main(NATURE, [f"--resume={run_dir}", "--timesteps=900"]) == 0
    assert checkpoint_record(str(run_dir)) == ("written", 600)


def test_the_record_says_none_yet_then_the_step_of_the_first_checkpoint(tmp_path):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    from fast_dqn.run.storage.run_directory import checkpoint_record, mark_checkpointed
    run_dir = str(tmp_path / "run")
    create_run_directory(run_dir, {"loop": "dqn"}).release()
    assert checkpoint_record(run_dir) == ("none yet", None)
    store = CheckpointStore(run_dir, on_saved=lambda step: mark_checkpointed(run_dir, step))
    store.save(1_234, {"x": 1})
    store.save(2_000, {"x": 2})
    assert checkpoint_record(run_dir) == ("written", 1_234)
    (tmp_path / "run" / "first-checkpoint.txt").write_text("edited")
    assert checkpoint_record(run_dir) == ("written", None)  # not "none yet": still refused
    os.remove(tmp_path / "run" / "first-checkpoint.txt")
    assert checkpoint_record(run_dir) == ("unrecorded", None)
    assert not [name for name in os.listdir(run_dir) if name.startswith(".")]


@pytest.mark.slow  # real runs
def test_a_run_killed_before_its_first_checkpoint_resumes_into_the_straight_run(tmp_path,
                                                                                background):
    args = ["--env=CartPole-v1", "--timesteps=1500", "--prepopulate=200", "--evaluate=500",
            "--eval-episodes=2", "--checkpoint-freq=100000", "--seed=4"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    straight_run = background("run_dqn.py", [*args, f"--logdir={straight}"])
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
    result = straight_run.result()
    assert result.returncode == 0, result.stderr[-3000:]
    assert logs(killed) == logs(straight) and len(logs(straight)[1]) == 3


# --- logs damaged between runs

def test_a_log_that_matches_the_checkpoint_is_cut_back_to_it(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_bytes(HEADER + ROW + ROW)  # a row written after the checkpoint
    log, note = restore_log(str(path), EPISODE_COLUMNS, HEADER + ROW, 50)
    log.close()
    assert note == ("episodes.csv: removed 1 row logged after the checkpoint of step 50; "
                    "the resumed run plays those steps again and logs them anew")
    assert path.read_bytes() == HEADER + ROW
    assert os.listdir(tmp_path) == ["episodes.csv"]
    log, note = restore_log(str(path), EPISODE_COLUMNS, HEADER + ROW, 50)
    log.close()
    assert note is None  # nothing past the checkpoint: nothing to say


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


# One loop in real processes: what repairs the logs is the runner's, the same for both loops
# (test_a_damaged_log_is_rebuilt_from_the_checkpoint_and_kept_aside, in process), and the
# fast loop's real split into its straight run is test_resume's.
@pytest.mark.slow  # real runs
def test_logs_deleted_or_converted_between_runs_resume_into_the_straight_run(tmp_path):
    loop = "run_dqn.py"
    # Split at an evaluation, where a straight run also passes.
    args = ["--env=CartPole-v1", "--prepopulate=200", "--evaluate=480", "--eval-episodes=2",
            "--seed=2", "--save-replay", "--target-update-freq=96"]
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
    assert cli.main(NATURE, argv, train=train_nature) == 0
    saved = json.loads((run_dir / "config.json").read_text())
    saved[name] = value
    (run_dir / "config.json").write_text(json.dumps(saved))
    before = (run_dir / "episodes.csv").read_bytes()
    capsys.readouterr()
    code = cli.main(NATURE, [f"--resume={run_dir}", "--timesteps=400"], train=train_nature)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f'config.json has "{name}": {json.dumps(value)}, but the checkpoint of step 300 ' \
           "was trained with" in err
    assert (run_dir / "episodes.csv").read_bytes() == before


# --- a checkpoint whose state.json was edited together with its manifest

def _edit_state(checkpoint_dir, edit):
    """Apply edit(document) to state.json and give the manifest its new size and CRC, as a
    user who edits both would: the checkpoint still verifies."""
    import zlib
    state_path, manifest_path = checkpoint_dir / "state.json", checkpoint_dir / "manifest.json"
    document = json.loads(state_path.read_text())
    edit(document)
    data = json.dumps(document).encode()
    state_path.write_bytes(data)
    manifest = json.loads(manifest_path.read_text())
    manifest["files"]["state.json"] = {"size": len(data), "crc32": zlib.crc32(data)}
    manifest_path.write_text(json.dumps(manifest))


def _edit_arrays(checkpoint_dir, edit):
    """Apply edit(state) to the whole state, arrays included, and write state.json,
    arrays.zst and the manifest again, as a user who edits them with numpy would: the
    checkpoint still verifies."""
    import io
    import zlib

    from fast_dqn.run.storage.array_file import write_arrays
    from fast_dqn.run.storage.checkpoint import Checkpoint
    from fast_dqn.run.storage.state_tree import to_data
    manifest_path = checkpoint_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    state = Checkpoint(str(checkpoint_dir), manifest["step"], manifest).load_state()
    edit(state)
    document, arrays = to_data(state)
    packed = io.BytesIO()
    write_arrays(packed, arrays, level=3)
    for name, data in (("state.json", json.dumps(document).encode()),
                       ("arrays.zst", packed.getvalue())):
        (checkpoint_dir / name).write_bytes(data)
        manifest["files"][name] = {"size": len(data), "crc32": zlib.crc32(data)}
    manifest_path.write_text(json.dumps(manifest))


def _tree(path):
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and p.name != "run.lock"}


@pytest.fixture(scope="module")
def edited_runs(tmp_path_factory):
    """A run of each loop on CartPole with checkpoints at steps 150 and 300, made once; tests
    edit copies of them."""
    from fast_dqn.run.run_kinds import FAST
    from fast_dqn.run.training import train_fast, train_nature
    base = tmp_path_factory.mktemp("edited")
    argv = ["--env=CartPole-v1", "--timesteps=300", "--prepopulate=100", "--evaluate=150",
            "--eval-episodes=1", "--checkpoint-freq=150", "--replay-capacity=1000"]
    for name, kind, train, more in [("dqn", NATURE, train_nature, []),
                                    ("fast", FAST, train_fast, ["--workers=2"])]:
        assert cli.main(kind, argv + more + [f"--logdir={base / name}"], train=train) == 0
    return base


def _copy(edited_runs, name, tmp_path):
    import shutil
    shutil.copytree(edited_runs / name, tmp_path / name)
    return tmp_path / name


def refused_resume(edited_runs, tmp_path, capsys, loop, change, edit=_edit_state):
    """Resume a copy of the `loop` ("dqn" or "fast") run whose newest state.json had
    `change` made to it (by `edit`: _edit_state or _edit_arrays); asserts the resume is one
    line, exit 2, and touched no file. Returns the line."""
    from fast_dqn.run.run_kinds import FAST
    from fast_dqn.run.training import train_fast, train_nature
    kind, train = (NATURE, train_nature) if loop == "dqn" else (FAST, train_fast)
    run_dir = _copy(edited_runs, loop, tmp_path)
    edit(run_dir / "checkpoints" / "step-000000000300", change)
    before = _tree(run_dir)
    capsys.readouterr()
    code = cli.main(kind, [f"--resume={run_dir}", "--timesteps=450"], train=train)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert _tree(run_dir) == before  # logs, best/ and checkpoints as they were
    return err


def test_a_real_checkpoint_of_each_loop_has_the_form_its_schema_names(edited_runs):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    from fast_dqn.state_schema import (
        FAST_RUN,
        NATURE_RUN,
        WEIGHTS_ONLY,
        StateMismatch,
    )
    nature = CheckpointStore(str(edited_runs / "dqn")).latest()
    fast = CheckpointStore(str(edited_runs / "fast")).latest()
    for checkpoint, schema in [(nature, NATURE_RUN), (fast, FAST_RUN), (nature, WEIGHTS_ONLY),
                               (fast, WEIGHTS_ONLY)]:
        checkpoint.load_state(schema)
    # Not a schema that lets anything through: each loop's state is not the other's.
    with pytest.raises(StateMismatch, match='/ has no "samplers"'):
        nature.load_state(FAST_RUN)
    with pytest.raises(StateMismatch, match='/ has no "env"'):
        fast.load_state(NATURE_RUN)


# (edit, what the line says): each fails in a different place without the schema or the
# state_of guard, several after the logs or best/ were already touched.
NATURE_EDITS = {
    "rngs": (lambda s: s.update(rngs="oops"), "/rngs is 'oops', not an object"),
    "rng of another generator": (
        lambda s: s["rngs"]["action"].update(bit_generator="MT19937"),
        "/rngs/action is a dict, not a PCG64 generator's state"),
    "replay rng without its state": (lambda s: s["replay"]["rng"].pop("state"),
                                     "/replay/rng is a dict, not a PCG64 generator's state"),
    "replay positions": (lambda s: s["replay"].update(pointers=s["replay"]["sizes"]) or
                         s["replay"].update(sizes=s["learner"]["main"][1]),
                         "/replay/sizes is not an array of shape (1,) of whole numbers from 0 to 1,000"),
    "log copy as text": (lambda s: s["monitor"]["logs"].update({"episodes.csv": "1,2,3"}),
                         "/monitor/logs/episodes.csv is '1,2,3', not bytes"),
    "best as a number": (lambda s: s.update(best=3), "/best is 3, not null or an object"),
    "best without its mean": (lambda s: s["best"].pop("mean"), '/best has no "mean"'),
    "loop step": (lambda s: s["loop"].update(step=299),
                  "/loop/step is 299, but the checkpoint is of step 300"),
    "best of another network": (
        lambda s: s["best"]["weights"].__setitem__(0, s["best"]["weights"][1]),
        "/best is of step 150 or of another network's weights, not of this run up to step 300"),
    "best after the checkpoint": (lambda s: s["best"].update(step=450),
                                  "/best is of step 450 or of another network's weights"),
    "a time that is not a number": (lambda s: s["monitor"].update(elapsed=float("nan")),
                                    "/monitor/elapsed is nan, not a number"),
    "a pickle that is not one": (
        lambda s: s["env"].update(foreign={"__bytes__": "/monitor/logs/episodes.csv"}),
        "/env/foreign cannot be unpickled"),
    "a setting's kind": (lambda s: s["settings"].update(lr="fast"),
                         "/settings/lr is 'fast', not a value \"lr\" takes"),
    "negative count": (lambda s: s["monitor"].update(num_games=-1),
                       "/monitor/num_games is -1, not a whole number"),
    "replay gone": (lambda s: s.pop("replay"), '/ has no "replay"'),
    "game layers": (lambda s: s["env"].update(layers="FrameHistory"),
                    "/env/layers is 'FrameHistory', not a list of strings"),
    "a game's seed": (lambda s: s["env"]["states"][0].update(pending_seed="oops"),
                      "/env/states/0/pending_seed is 'oops', not null or a whole number"),
    "a game's frames": (lambda s: s["env"]["states"][1].update(frames=[s["loop"]["obs"]]),
                        "/env/states/1/frames holds 1 of shapes [(1, 4)], not 1 of (4,)"),
    "a game's states": (lambda s: s["env"].update(states=[]),
                        "/env/states holds 0 states for the 3 layers that have one"),
    "array that is not there": (lambda s: s["loop"].update(obs={"__array__": "/nowhere"}),
                                "it refers to arrays arrays.zst does not hold"),
    "observation of another shape": (
        lambda s: s["loop"].update(obs=s["learner"]["main"][1]),
        "/loop/obs has shape (256,), not the observations' (1, 4)"),
    "schedule of another kind": (lambda s: s["loop"]["schedule"].update(deferred="many"),
                                 "/loop/schedule/deferred is 'many', not a whole number"),
}


@pytest.mark.slow  # real training, in process
@pytest.mark.parametrize("edit", NATURE_EDITS)
def test_an_edited_state_is_one_line_that_names_it_and_touches_nothing(
        edited_runs, tmp_path, capsys, edit):
    change, expected = NATURE_EDITS[edit]
    err = refused_resume(edited_runs, tmp_path, capsys, "dqn", change)
    assert "step-000000000300/state.json does not hold what this fast-dqn writes" in err
    assert expected in err, err
    # The fix: the checkpoint before it.
    assert "move step-000000000300 out of" in err and "the one of step 150 the newest" in err


FAST_EDITS = {
    "held chunks": (lambda s: s["loop"].update(held=[[1, 2]]),
                    "/loop/held is [[1, 2]], not a list of 6-tuples of arrays"),
    "samplers": (lambda s: s.update(samplers=[]), "/samplers is [], not an object"),
    "sampler backend": (lambda s: s["samplers"].pop("backend"),
                        '/samplers has no "backend"'),
    "owed": (lambda s: s["loop"].update(owed=1.5), "/loop/owed is 1.5, not a whole number"),
    "held steps of other games": (
        lambda s: s["loop"].update(held=[{"__tuple__": [s["learner"]["main"][0]] * 5
                                          + [s["replay"]["pointers"]]}]),
        "/loop/held/0 names shards outside 0..1"),
    "a sampler's game": (
        lambda s: s["samplers"]["envs"][1]["states"][2].update(game_return="high"),
        "/samplers/envs/1/states/2/game_return is 'high', not a number"),
}


@pytest.mark.slow  # real training, in process
def test_edited_weights_are_one_line_before_any_file_is_touched(edited_runs, tmp_path, capsys):
    err = refused_resume(edited_runs, tmp_path, capsys, "dqn", lambda s: s["learner"][
        "target"].__setitem__(0, s["learner"]["target"][1]))
    # config.json matches the settings the checkpoint records: the checkpoint was edited.
    assert "step-000000000300/state.json does not hold what this fast-dqn writes " \
        "(/learner/target/0 holds shape (256,), not (4, 256) as this run's network needs): " \
        "it was edited" in err and "the one of step 150 the newest" in err, err
    assert "config.json" not in err


def _not_finite_best(state):
    weights = state["best"]["weights"]
    weights[0] = np.array(weights[0])
    weights[0].flat[5] = np.nan


def _optimizer_slot(state, value):
    state["learner"]["optimizer"][3] = value


# Edits of the arrays (replay's positions, the best's weights, the optimizer's), each once
# accepted: the resume died in a traceback, best/ exported a NaN, or it trained, diverged and
# called the edited checkpoint "the last good checkpoint", advising a lower --lr.
ARRAY_EDITS = {
    "dqn: replay pointer at its end": (
        "dqn", lambda s: s["replay"].update(pointers=np.array([1000]), sizes=np.array([1000])),
        "/replay/pointers is not an array of shape (1,) of whole numbers from 0 to 999"),
    "dqn: replay pointer past its fill": (
        "dqn", lambda s: s["replay"]["pointers"].__setitem__(0, 299),
        "/replay/pointers/0 is 299, but shard 0 holds 300 of its 1,000 records "
        "(/replay/sizes/0), so its next record is 300"),
    "fast: replay pointer at its shard's end": (
        "fast", lambda s: s["replay"].update(pointers=np.array([500, 0]),
                                             sizes=np.array([500, 500])),
        "/replay/pointers is not an array of shape (2,) of whole numbers from 0 to 499"),
    "dqn: best weights not finite": (
        "dqn", _not_finite_best, "/best/weights/0 holds a NaN or an infinity"),
    "dqn: negative update count": (
        "dqn", lambda s: s["learner"]["optimizer"].__setitem__(0, np.int64(-5)),
        "iteration) is -5, not a whole number of 0 or more: it counts the updates made"),
    "fast: optimizer slot of another shape": (
        "fast", lambda s: _optimizer_slot(s, np.zeros(3, np.float32)),
        "/learner/optimizer/3 holds shape (3,), not (4, 256) as this run's network needs"),
}


@pytest.mark.slow  # real training, in process
@pytest.mark.parametrize("edit", ARRAY_EDITS)
def test_an_edited_array_is_one_line_that_names_the_checkpoint_and_touches_nothing(
        edited_runs, tmp_path, capsys, edit):
    """The checkpoint named, what is wrong and the fix; never a good checkpoint, a
    divergence, a lower --lr or config.json."""
    loop, change, expected = ARRAY_EDITS[edit]
    err = refused_resume(edited_runs, tmp_path, capsys, loop, change, edit=_edit_arrays)
    assert "step-000000000300/state.json does not hold what this fast-dqn writes" in err
    assert expected in err, err
    assert "move step-000000000300 out of" in err and "which makes the one of step" in err
    for blame in ("good", "diverge", "--lr", "config.json", "Traceback"):
        assert blame not in err, err


@pytest.mark.slow  # real training, in process
def test_a_game_that_cannot_load_is_refused_before_any_file_is_touched(edited_runs, tmp_path,
                                                                      capsys):
    """The games are loaded by the loop's backend, after the logs are cut back to the
    checkpoint; the backend checks them first, with the networks."""
    err = refused_resume(edited_runs, tmp_path, capsys, "fast",
                         lambda s: s["samplers"].update(envs=[1, 2]))
    assert "(/samplers/envs/0 is 1, not an object)" in err


@pytest.mark.slow  # real training, in process
@pytest.mark.parametrize("edit", FAST_EDITS)
def test_an_edited_fast_loop_state_is_one_line_too(edited_runs, tmp_path, capsys, edit):
    change, expected = FAST_EDITS[edit]
    assert expected in refused_resume(edited_runs, tmp_path, capsys, "fast", change)


@pytest.mark.slow  # real training, in process
@pytest.mark.parametrize("edit,expected", [
    (lambda s: s.update(learner="oops"), "/learner is 'oops', not an object"),
    (lambda s: s["learner"]["main"].__setitem__(0, s["learner"]["main"][1]),
     "do not fit the run's config.json (/learner/main/0 holds shape (256,), not (4, 256) as "
     "this run's network needs)"),
    (lambda s: s["identity"].update(observation_shape=[1, 4]),
     "/identity/observation_shape is [1, 4], not a tuple of whole numbers"),
], ids=["learner", "weights of another shape", "shape as a list"])
def test_evaluate_refuses_an_edited_state_in_one_line(edited_runs, tmp_path, capsys, edit,
                                                      expected):
    from fast_dqn.tools.evaluate import main
    run_dir = _copy(edited_runs, "dqn", tmp_path)
    _edit_state(run_dir / "checkpoints" / "step-000000000300", edit)
    capsys.readouterr()
    assert main([str(run_dir), "--episodes=1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err, err
    assert "the one of step 150 the newest" in err or "was either edited?" in err


@pytest.mark.slow  # real training, in process
def test_evaluate_best_refuses_an_edited_export_in_one_line(edited_runs, tmp_path, capsys):
    from fast_dqn.tools.evaluate import main
    run_dir = _copy(edited_runs, "dqn", tmp_path)
    export, = (run_dir / "best").iterdir()
    _edit_state(export, lambda s: s.update(mean="high"))
    capsys.readouterr()
    assert main([str(run_dir), "--episodes=1", "--best"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "/mean is 'high', not a number" in err, err


@pytest.mark.slow  # real training, in process
def test_evaluate_best_calls_an_export_holding_a_nan_damaged_not_diverged(edited_runs,
                                                                         tmp_path, capsys):
    from fast_dqn.tools.evaluate import main
    run_dir = _copy(edited_runs, "dqn", tmp_path)
    export, = (run_dir / "best").iterdir()
    _edit_arrays(export, lambda s: _not_finite_best({"best": s}))
    before = _tree(run_dir)
    capsys.readouterr()
    assert main([str(run_dir), "--episodes=1", "--best"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"--best: {export}/state.json does not hold what this fast-dqn writes (/weights/0 " \
        "holds a NaN or an infinity): it was edited, or written by another program; drop " \
        f"--best, or move {run_dir / 'best'} away" in err, err
    assert "diverge" not in err and "--lr" not in err
    assert _tree(run_dir) == before


# --- refusals that name the file that was edited, not another

@pytest.fixture
def finished_cartpole(finished_cartpole_run):
    """A real finished Nature CartPole run with two checkpoints (300 and 600): conftest's."""
    return finished_cartpole_run


def edit_config(run_dir, **changes):
    saved = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**saved, **changes}))


def edit_plan(run_dir, **plan):
    path = sorted((run_dir / "checkpoints").glob("step-*"))[-1] / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "plan": plan}))
    return path


@pytest.mark.parametrize("script, edit, expected", [
    ("fast", lambda r: edit_config(r, loop="fast"),
     'checkpoints/step-000000000600 is a checkpoint of a "dqn" run, but config.json says '
     '"loop": "fast": it was edited; put back "loop": "dqn" and resume it with that loop\'s '
     'script'),
    ("dqn", lambda r: edit_config(r, loop=None),
     'config.json has "loop": null, which is no loop of fast-dqn: it was edited; put back the '
     'loop that made the run, "dqn" or "fast"'),
    ("dqn", lambda r: edit_config(r, optimizer_epsilon=None),
     'config.json has "optimizer_epsilon": null (which this run resolves to 1e-08), but the '
     'checkpoint of step 600 was trained with'),
    ("dqn", lambda r: edit_plan(r, checkpoint_freq=-5),
     "step-000000000600/manifest.json records --checkpoint-freq -5, as an earlier --resume "
     "gave it, but must be 0 or more, got -5; give --checkpoint-freq on this resume to "
     "replace it")])
def test_a_hand_edit_is_named_where_it_was_made(finished_cartpole, tmp_path, capsys, script,
                                                edit, expected):
    from fast_dqn.run.run_kinds import RUN_KINDS
    run_dir = tmp_path / "run"
    shutil.copytree(finished_cartpole, run_dir)
    edit(run_dir)
    before = snapshot(run_dir)
    capsys.readouterr()
    code = cli.main(RUN_KINDS[script], [f"--resume={run_dir}", "--timesteps=900"],
                    train=None)
    err = capsys.readouterr().err
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    before.pop("run.lock")  # signed by the resume (its holder), before training read state
    assert {k: v for k, v in snapshot(run_dir).items() if k != "run.lock"} == before


# --- a checkpoint that holds a diverged network (written before the weights were checked)

def diverged_copy(finished_run, run_dir):
    """The finished run, its newest checkpoint then written again with a NaN in the main
    network, as a fast-dqn that checked only the losses could save it: returns its path."""
    import numpy as np

    from fast_dqn.run.storage.checkpoint import CheckpointStore
    shutil.copytree(finished_run, run_dir)
    store = CheckpointStore(str(run_dir))
    newest = store.latest()
    state = newest.load_state()
    state["learner"]["main"][0] = np.array(state["learner"]["main"][0])
    state["learner"]["main"][0].flat[3] = np.nan
    return store.save(newest.step, state, finished=newest.finished, plan=newest.plan)


@pytest.mark.parametrize("argv", [["--resume={run}", "--timesteps=900"],
                                  ["evaluate", "{run}", "--episodes=1"],
                                  ["evaluate", "{run}", "--export={tmp}/agent.keras"]])
def test_a_checkpoint_holding_a_nan_is_neither_resumed_nor_played_nor_exported(
        finished_cartpole_run, tmp_path, capsys, argv):
    """One line, exit 2, no traceback, nothing changed or written: it names the checkpoint
    and says that nothing can go on from it, never that a resume continues from it."""
    from fast_dqn.tools import evaluate
    run_dir = tmp_path / "run"
    bad = diverged_copy(finished_cartpole_run, run_dir)
    before = snapshot(tmp_path)
    capsys.readouterr()
    argv = [a.format(run=run_dir, tmp=tmp_path) for a in argv]
    code = evaluate.main(argv[1:]) if argv[0] == "evaluate" else cli.main(NATURE, argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    # Edited, damaged or diverged: the checkpoint cannot tell, so the line names each, and
    # the lower --lr only for a divergence.
    assert f"{bad} holds a NaN or an infinity (weight 0 of the main network is not finite): " \
           "it was edited or damaged, or saved by a fast-dqn that checked only the losses " \
           f"after its training diverged; nothing can go on from it: move {os.path.basename(bad)} " \
           "out of" in lines[0] and "continues" not in lines[0], lines[0]
    # step-000000000600.1: moved out, the original of step 600 is the newest again.
    assert lines[0].endswith("which makes the one of step 600 the newest, or start a new run "
                             "(after a divergence, one with a lower --lr, or for --env smaller "
                             "rewards)")
    assert "good" not in lines[0]
    after = snapshot(tmp_path)
    if argv[0] != "evaluate":  # the lock signed by the resume, and released
        assert after.pop("run/run.lock") is not None and before.pop("run/run.lock")
    assert after == before


@pytest.mark.slow  # real training, in process
def test_evaluate_calls_a_negative_update_count_an_edit(edited_runs, tmp_path, capsys):
    from fast_dqn.tools.evaluate import main
    run_dir = _copy(edited_runs, "dqn", tmp_path)
    newest = sorted((run_dir / "checkpoints").iterdir())[-1]
    _edit_arrays(newest, ARRAY_EDITS["dqn: negative update count"][1])
    before = _tree(run_dir)
    capsys.readouterr()
    assert main([str(run_dir), "--episodes=1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"{newest}/state.json does not hold what this fast-dqn writes" in err, err
    assert "is -5, not a whole number of 0 or more" in err
    for blame in ("good", "diverge", "--lr", "config.json"):
        assert blame not in err, err
    assert _tree(run_dir) == before


@pytest.mark.slow  # real training, in process
@pytest.mark.parametrize("damage", ["another game", "identity damaged"])
def test_evaluate_best_refuses_another_runs_export(edited_runs, tmp_path, capsys, damage):
    """CartPole-v0's network has CartPole-v1's shapes: only the export's record of its run
    tells them apart."""
    from fast_dqn.tools.evaluate import main
    run_dir = _copy(edited_runs, "dqn", tmp_path)
    export, = (run_dir / "best").iterdir()
    if damage == "another game":
        edit_config(run_dir, env="CartPole-v0")
    else:
        _edit_arrays(export, lambda s: s.update(identity="pong"))
    before = _tree(run_dir)
    capsys.readouterr()
    assert main([str(run_dir), "--episodes=1", "--best"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    expected = ("was trained on CartPole-v1 (2 actions, observations of shape (1, 4)), but "
                "config.json describes CartPole-v0" if damage == "another game" else
                "(/identity is 'pong', not an object)")
    assert f"--best: {export}" in err and expected in err, err
    assert _tree(run_dir) == before
