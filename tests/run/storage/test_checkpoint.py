"""Checkpoint files: atomic writes, verification, fallback, pruning, and the array format."""

import errno
import io
import os

import numpy as np
import pytest

from fast_dqn.run.storage import checkpoint as ckpt
from fast_dqn.run.storage.array_file import CorruptFile, read_arrays, write_arrays
from fast_dqn.run.storage.checkpoint import Checkpointer, CheckpointError, CheckpointStore

pytestmark = pytest.mark.faults  # stops, resumes, crashes: see docs/testing.md's markers


def replay_like(seed=0):
    rng = np.random.default_rng(seed)
    frames = np.zeros((2, 50, 84, 84), np.uint8)
    frames[:, :, 30:40, 10:20] = rng.integers(0, 255, (2, 50, 1, 1), dtype=np.uint8)
    return {"frames": frames, "actions": rng.integers(0, 6, (2, 50)).astype(np.int32),
            "rewards": rng.normal(size=(2, 50)).astype(np.float32),
            "terminals": rng.random((2, 50)) < 0.1}


def test_arrays_round_trip_into_preallocated_arrays_and_compress_frames():
    arrays = replay_like()
    buffer = io.BytesIO()
    write_arrays(buffer, arrays)
    # Mostly flat Atari-like frames must shrink a lot.
    assert len(buffer.getvalue()) < arrays["frames"].nbytes / 20
    targets = {name: np.zeros_like(a) for name, a in arrays.items()}
    buffer.seek(0)
    out = read_arrays(buffer, into=targets)
    for name, array in arrays.items():
        assert out[name] is targets[name]  # filled in place, no second copy
        np.testing.assert_array_equal(targets[name], array)


@pytest.mark.parametrize("damage", ["truncate", "flip", "shape"])
def test_damaged_array_files_are_refused(damage):
    arrays = replay_like()
    buffer = io.BytesIO()
    write_arrays(buffer, arrays)
    data = bytearray(buffer.getvalue())
    into = None
    if damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        into = {"frames": np.zeros((2, 49, 84, 84), np.uint8)}
    with pytest.raises(CorruptFile):
        read_arrays(io.BytesIO(bytes(data)), into=into)


def test_save_keeps_the_newest_two_and_loads_the_latest(tmp_path):
    store = CheckpointStore(str(tmp_path))
    for step in (100, 200, 300):
        store.save(step, {"step": step}, replay_like(step))
    assert store.steps() == [200, 300]
    latest = store.latest()
    assert latest.step == 300 and latest.has_replay
    assert latest.load_state() == {"step": 300}
    arrays = {name: np.zeros_like(a) for name, a in replay_like().items()}
    latest.load_replay(arrays)
    np.testing.assert_array_equal(arrays["actions"], replay_like(300)["actions"])


def test_a_crash_between_write_and_rename_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    store = CheckpointStore(str(tmp_path))
    store.save(100, {"step": 100})

    class Crash(BaseException):
        """Stands for the process dying: nothing after this point runs."""

    def crash(src, dst):
        raise Crash

    monkeypatch.setattr(ckpt.os, "rename", crash)
    with pytest.raises(Crash):
        store.save(200, {"step": 200})
    monkeypatch.undo()
    names = os.listdir(store.dir)
    assert any(name.startswith(".partial-") for name in names)  # the half-written one
    assert store.steps() == [100]
    assert store.latest().load_state() == {"step": 100}        # never picked up
    store.save(300, {"step": 300})
    assert not any(name.startswith(".partial-") for name in os.listdir(store.dir))
    assert store.steps() == [100, 300]


def test_disk_full_gives_a_clear_error_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    store = CheckpointStore(str(tmp_path))
    store.save(100, {"step": 100}, replay_like())

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(ckpt, "write_arrays", full)
    # What is safe and the command to run are the command line's to say
    # (tests/faults/test_injected_faults.py).
    with pytest.raises(CheckpointError, match=r"could not write the checkpoint of step 200 "
                       r"in .* \(No space left on device\)$"):
        store.save(200, {"step": 200}, replay_like())
    monkeypatch.undo()
    assert os.listdir(store.dir) == ["step-000000000100"]
    assert store.latest().load_state() == {"step": 100}


def test_a_damaged_newest_checkpoint_falls_back_with_a_warning(tmp_path):
    warnings = []
    store = CheckpointStore(str(tmp_path), warn=warnings.append)
    store.save(100, {"step": 100})
    path = store.save(200, {"step": 200})
    state_file = os.path.join(path, ckpt.STATE_FILE)
    with open(state_file, "r+b") as f:
        f.truncate(os.path.getsize(state_file) - 3)
    latest = store.latest()
    assert latest.step == 100
    assert len(warnings) == 1 and "step-000000000200" in warnings[0]
    os.remove(os.path.join(latest.path, ckpt.MANIFEST_FILE))
    with pytest.raises(CorruptFile, match="manifest"):
        store.latest()


def test_no_checkpoint_at_all_is_none(tmp_path):
    assert CheckpointStore(str(tmp_path)).latest() is None


def test_checkpointer_saves_at_the_first_chance_past_each_multiple(tmp_path):
    saved = []

    class Store:
        def save(self, step, state, replay, finished=False, plan=None):
            saved.append((step, state["loop"]))
            return f"step-{step}"

    checkpoints = Checkpointer(Store(), 1000, collect=lambda step: {}, message=lambda m: None)
    for step in range(0, 3300, 96):
        if checkpoints.due(step):
            checkpoints.save(step, step)
    assert [step for step, _ in saved] == [1056, 2016, 3072]
    checkpoints.save(3072, "again")  # same step twice: nothing new to save
    assert len(saved) == 3
    assert not Checkpointer(Store(), 0, collect=dict).due(10**9)  # 0 turns them off
    checkpoints.save(3072, "finished there", final=True)  # the run's end: saved again
    assert saved[-1] == (3072, "finished there")


def test_a_second_checkpoint_at_one_step_is_the_newer_and_both_count_for_keep(tmp_path):
    store = CheckpointStore(str(tmp_path))
    for step, state in ((100, "a"), (200, "b"), (200, "c"), (200, "d")):
        store.save(step, {"s": state})
    assert sorted(os.listdir(store.dir)) == ["step-000000000200.1", "step-000000000200.2"]
    assert store.latest().load_state() == {"s": "d"} and store.latest().step == 200
    assert store.steps() == [200, 200]


def _retarget(manifest, path):
    """A manifest that lists ../config.json (with its true size and checksum) besides the
    real files: the name, not only the bytes, must be one of the checkpoint's own."""
    import zlib
    data = open(os.path.join(path, "..", "..", "config.json"), "rb").read()
    manifest["files"]["../../config.json"] = {"size": len(data), "crc32": zlib.crc32(data)}


# How a user (or a bad editor) may leave a manifest that still parses as JSON.
MANIFEST_DAMAGE = {
    "files-a-list": lambda m, path: m.update(files=[]),
    "files-empty": lambda m, path: m.update(files={}),
    "no-state-file": lambda m, path: m["files"].pop(ckpt.STATE_FILE),
    "entry-not-a-dict": lambda m, path: m["files"].update({ckpt.STATE_FILE: 7}),
    "size-a-string": lambda m, path: m["files"][ckpt.STATE_FILE].update(
        size=str(m["files"][ckpt.STATE_FILE]["size"])),
    "crc-a-float": lambda m, path: m["files"][ckpt.STATE_FILE].update(
        crc32=float(m["files"][ckpt.STATE_FILE]["crc32"])),
    "crc-missing": lambda m, path: m["files"][ckpt.STATE_FILE].pop("crc32"),
    "another-step": lambda m, path: m.update(step=m["step"] + 1),
    "no-step": lambda m, path: m.pop("step"),
    "a-path-outside": _retarget,
}


def damage_manifest(path, how):
    import json
    with open(os.path.join(path, ckpt.MANIFEST_FILE)) as f:
        manifest = json.load(f)
    MANIFEST_DAMAGE[how](manifest, path)
    with open(os.path.join(path, ckpt.MANIFEST_FILE), "w") as f:
        json.dump(manifest, f)


def make_run(path, checkpoints):
    """A Nature-loop run directory with stand-in checkpoints (tests/run/test_bad_input.py's
    helper; test modules never import from each other)."""
    from fast_dqn.run.settings.hyperparameters import Config
    from fast_dqn.run.storage.run_directory import create_run_directory
    config = Config(logdir=str(path))
    create_run_directory(str(path), {"loop": "dqn", **config.to_dict()}).release()
    (path / "episodes.csv").write_text("episode,agent_step\n")
    store = CheckpointStore(str(path))
    paths = [store.save(step, {"loop": {"step": step}}, replay_like(step)) for step in checkpoints]
    return store, paths


@pytest.mark.parametrize("how", MANIFEST_DAMAGE)
def test_a_manifest_that_does_not_vouch_for_its_checkpoint_falls_back(tmp_path, how):
    store, (_, newest) = make_run(tmp_path / "run", (100, 200))
    warnings = []
    store.warn = warnings.append
    damage_manifest(newest, how)
    latest = store.latest()
    assert latest.step == 100 and latest.load_state() == {"loop": {"step": 100}}
    assert len(warnings) == 1 and "skipping damaged checkpoint step-000000000200" in warnings[0]


@pytest.mark.parametrize("how", MANIFEST_DAMAGE)
def test_resuming_from_only_such_a_manifest_is_one_line_and_exit_2(tmp_path, capsys, how):
    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import NATURE
    _, (only,) = make_run(tmp_path / "run", (100,))
    damage_manifest(only, how)

    def train(config, **kwargs):
        raise AssertionError("a damaged checkpoint reached training")

    code = cli.main(NATURE, [f"--resume={tmp_path / 'run'}"], train=train)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("run_dqn.py: error: --resume: no usable checkpoint in "), err
    assert "step-000000000100" in lines[0] and "start a new run" in lines[0]


# --- the state as data (fast_dqn.run.storage.state_tree)

def test_the_state_comes_back_exactly_with_its_types():
    import json

    from fast_dqn.run.storage.state_tree import from_data, to_data
    state = {"step": 7, "rate": 0.1, "nan": float("nan"), "name": "pong", "none": None,
             "flag": True, "big": 2**70, "shape": (4, 84, 84), "nested": [(1, [2]), {"a": b""}],
             "weights": [np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros(0, np.int64)],
             "scalar": np.float32(1.5), "count": np.int64(3), "blob": b"\x00\xffemulator",
             "rng": np.random.default_rng(3).bit_generator.state}
    document, arrays = to_data(state)
    again = from_data(json.loads(json.dumps(document)), arrays)

    def same(a, b):
        assert type(a) is type(b), (a, b)
        if isinstance(a, dict):
            assert a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        elif isinstance(a, (list, tuple)):
            assert len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        elif isinstance(a, (np.ndarray, np.generic)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        elif a == a:  # NaN is itself
            assert a == b
        return True

    assert same(state, again)


@pytest.mark.parametrize("value,where", [
    ({"env": object()}, "/env is a object"),
    ({"learner": {"opt": [1, Checkpointer]}}, "/learner/opt/1 is a type"),
    ({"chunk": __import__("collections").namedtuple("Chunk", "a")(1)}, "/chunk is a Chunk"),
    ({"frames": np.array([None])}, "/frames is a ndarray"),
    ({3: "a key that is no string"}, "has the key 3"),
    ({"x": {"__array__": "a key the format uses"}}, "/x has the key '__array__'"),
])
def test_a_state_that_is_not_data_is_refused_before_anything_is_written(tmp_path, value, where):
    store = CheckpointStore(str(tmp_path))
    with pytest.raises(TypeError, match=where.replace("(", r"\(")):
        store.save(100, value)
    assert not os.path.exists(store.dir) or os.listdir(store.dir) == []


@pytest.mark.parametrize("version,words", [
    (1, "is of checkpoint format 1, written by an earlier fast-dqn"),
    (3, "is of checkpoint format 3, newer than this fast-dqn's 2"),
])
def test_a_checkpoint_of_another_format_is_refused_not_skipped(tmp_path, version, words):
    import json
    store = CheckpointStore(str(tmp_path), warn=pytest.fail)
    store.save(100, {"step": 100})
    newest = store.save(200, {"step": 200})
    manifest_path = os.path.join(newest, ckpt.MANIFEST_FILE)
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["format"] = version
    if version == 1:
        del manifest["format"]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    with pytest.raises(ckpt.UnsupportedFormat, match=f"step-000000000200 {words}"):
        store.latest()


def test_each_checkpoint_records_the_run_plan_a_resume_reads_without_loading_it(tmp_path):
    store = CheckpointStore(str(tmp_path))
    plan = {"timesteps": 3000, "checkpoint_freq": 500, "save_replay": False}
    checkpoints = Checkpointer(store, 500, collect=lambda step: {}, message=lambda m: None,
                               plan=plan)
    checkpoints.save(500, {"step": 500})
    assert store.latest().plan == plan
    store.save(600, {"step": 600})  # a checkpoint written before plans were recorded
    assert store.latest().step == 600 and store.latest().plan == {}


# --- what a state must hold (fast_dqn.state_schema)

def test_the_state_schema_names_the_first_value_it_does_not_allow():
    from fast_dqn.state_schema import (
        ARRAYS,
        FLAG,
        WHOLE,
        StateMismatch,
        check_state,
        optional,
    )
    schema = {"loop": {"step": WHOLE, "done": FLAG}, "best": optional({"w": ARRAYS}),
              "last": optional(WHOLE)}
    good = {"loop": {"step": 3, "done": False, "later_key": "ignored"}, "best": None,
            "last": None}
    check_state(good, schema)
    check_state({**good, "best": {"w": [np.zeros(2), np.int64(1)]}, "last": np.int64(4)},
                schema)
    for bad, message in [
            ({**good, "loop": "x"}, "/loop is 'x', not an object"),
            ({**good, "loop": {"done": True}}, '/loop has no "step"'),
            ({**good, "loop": {"step": True, "done": True}}, "/loop/step is True, not a whole number"),
            ({**good, "loop": {"step": -1, "done": True}}, "/loop/step is -1, not a whole number"),
            ({**good, "loop": {"step": 1, "done": 0}}, "/loop/done is 0, not true or false"),
            ({**good, "best": {"w": [1.0]}}, "/best/w is [1.0], not a list of arrays"),
            ({**good, "last": "x" * 50}, "/last is a str, not null or a whole number"),
            ({**good, "best": 3}, "/best is 3, not null or an object"),
            ([], "/ is [], not an object")]:
        with pytest.raises(StateMismatch) as caught:
            check_state(bad, schema)
        assert str(caught.value) == message


def test_an_unfit_state_names_the_checkpoint_and_the_one_before(tmp_path):
    from fast_dqn.state_schema import StateMismatch
    store = CheckpointStore(str(tmp_path))
    store.save(100, {"a": 1})
    only = store.latest()
    assert only.unfit_state(KeyError("x")).endswith(
        "(the key 'x' is missing): it was edited, or written by another program; put back "
        "the original files, or start a new run")
    store.save(200, {"a": 1})
    newest = store.latest()
    line = newest.unfit_state(StateMismatch("/a is 1, not a string"))
    assert line == (f"{newest.path}/state.json does not hold what this fast-dqn writes (/a is "
                    f"1, not a string): it was edited, or written by another program; move "
                    f"step-000000000200 out of {store.dir}, which makes the one of step 100 "
                    "the newest, or start a new run")
