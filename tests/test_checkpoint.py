"""Checkpoint files: atomic writes, verification, fallback, pruning, and the array format."""

import errno
import io
import os

import numpy as np
import pytest

from fast_dqn.run import checkpoint as ckpt
from fast_dqn.run.array_file import CorruptFile, read_arrays, write_arrays
from fast_dqn.run.checkpoint import Checkpointer, CheckpointError, CheckpointStore


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
    with pytest.raises(CheckpointError, match="No space left on device.*previous"):
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
        def save(self, step, state, replay):
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
