"""Run directories (fast_dqn.run.storage.run_directory): named after their preset, never
overwritten or reused, created whole or not at all, and held by one process at a time through
a run lock that must be a plain file."""

import json
import os

import pytest

from fast_dqn.errors import ConfigError
from fast_dqn.run.storage.run_directory import (
    RunLock,
    check_logdir,
    create_run_directory,
    default_logdir,
    run_name,
)


def test_default_logdir_never_reuses_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = default_logdir("pong-dqn", now=0)
    create_run_directory(first, {})
    second = default_logdir("pong-dqn", now=0)
    assert first.startswith("runs/pong-dqn-") and second == first + "-1"


@pytest.mark.parametrize("game,loop,preset,name", [
    ("pong", "fast", "nature", "pong-fast"),               # the default: game and loop
    ("CartPole-v1", "dqn", "classic", "CartPole-v1-dqn"),
    ("pong", "fast", "pong-fastest", "pong-fastest"),      # runs/pong-fastest-* finds it
    ("pong", "dqn", "pong-quick", "pong-quick"),
    ("breakout", "fast", "pong-fastest", "breakout-pong-fastest"),
    ("breakout", "dqn", "machado", "breakout-machado"),
])
def test_a_run_is_named_after_its_preset_when_one_is_given(game, loop, preset, name):
    assert run_name(game, loop, preset) == name


def test_config_json_is_never_overwritten(tmp_path):
    create_run_directory(tmp_path / "r", {"a": 1})
    with pytest.raises(ConfigError):
        create_run_directory(tmp_path / "r", {"a": 2})
    assert '"a": 1' in (tmp_path / "r" / "config.json").read_text()


def test_empty_existing_directory_is_accepted(tmp_path):
    check_logdir(str(tmp_path))


def test_a_held_run_is_refused_by_name_until_its_holder_lets_go(tmp_path):
    first = create_run_directory(tmp_path / "r", {"a": 1})
    assert (tmp_path / "r" / "run.lock").read_text().startswith(f"process {os.getpid()} on ")
    before = (tmp_path / "r" / "run.lock").stat().st_mtime_ns
    with pytest.raises(ConfigError, match=f"resume: '{tmp_path / 'r'}' is in use by process "
                                         f"{os.getpid()} on .*one process per run"):
        RunLock(str(tmp_path / "r"), "resume")
    assert (tmp_path / "r" / "run.lock").stat().st_mtime_ns == before  # the refusal wrote nothing
    first.release()
    with RunLock(str(tmp_path / "r"), "resume"):
        with pytest.raises(ConfigError, match="in use"):
            RunLock(str(tmp_path / "r"), "resume")
    RunLock(str(tmp_path / "r"), "resume").release()  # let go on leaving the with block


@pytest.mark.faults
def test_a_run_that_died_while_being_created_leaves_a_reusable_directory(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "run.lock").write_text("process 1 on box, since then\n")
    check_logdir(str(tmp_path / "r"))  # no error: only the dead run's lock is there
    (tmp_path / "r" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="already holds files"):
        check_logdir(str(tmp_path / "r"))


@pytest.mark.faults
def test_an_unborn_run_with_an_empty_config_is_reusable_and_resume_says_so(tmp_path):
    """Older versions could leave an empty config.json when stopped at the instant it was
    made: no settings, no checkpoint, so the directory takes a new run, and --resume says
    which command does that."""
    from fast_dqn.run.storage.run_directory import create_run_directory, load_run_config
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.lock").write_text("process 1 on box, since then\n")
    (run_dir / "config.json").write_text("")
    (run_dir / ".config.json.partial-77").write_text('{"lo')
    with pytest.raises(ConfigError, match=r"holds no run: .* start it again with the command "
                       r"that created it \(its --logdir .* is accepted\)"):
        load_run_config(str(run_dir), "resume")
    check_logdir(str(run_dir))
    create_run_directory(str(run_dir), {"loop": "dqn", "seed": 3}).release()
    assert json.loads((run_dir / "config.json").read_text()) == {"loop": "dqn", "seed": 3}
    # A config.json with anything in it is a run's, even unreadable: never reused.
    (run_dir / "config.json").write_text("{")
    with pytest.raises(ConfigError, match="already holds files"):
        check_logdir(str(run_dir))


@pytest.mark.faults
def test_config_json_appears_whole_or_not_at_all_and_never_replaces_one(tmp_path,
                                                                          monkeypatch):
    from fast_dqn.run.storage import run_directory
    (tmp_path / "a").mkdir()

    def stopped(*args):
        raise KeyboardInterrupt  # a stop between writing the settings and naming them

    monkeypatch.setattr(run_directory.os, "link", stopped)
    with pytest.raises(KeyboardInterrupt):
        run_directory._write_config_once(str(tmp_path / "a"), {"loop": "dqn"})
    assert os.listdir(tmp_path / "a") == []
    monkeypatch.undo()
    (tmp_path / "a" / "config.json").write_text('{"loop": "fast"}')
    with pytest.raises(FileExistsError):
        run_directory._write_config_once(str(tmp_path / "a"), {"loop": "dqn"})
    assert sorted(os.listdir(tmp_path / "a")) == ["config.json"]
    assert (tmp_path / "a" / "config.json").read_text() == '{"loop": "fast"}'


@pytest.mark.parametrize("kind", ["symlink", "dangling-symlink", "directory", "fifo"])
def test_a_run_lock_that_is_not_a_plain_file_is_refused_and_nothing_is_written(tmp_path, kind):
    run_dir, elsewhere = tmp_path / "r", tmp_path / "precious.txt"
    run_dir.mkdir()
    lock = run_dir / "run.lock"
    if kind == "symlink":
        elsewhere.write_text("the user's own file\n")
        lock.symlink_to(elsewhere)
    elif kind == "dangling-symlink":
        lock.symlink_to(elsewhere)
    elif kind == "directory":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    with pytest.raises(ConfigError, match=f"^resume: '{lock}' is .*; remove it"):
        # What --resume does: take the lock, then sign it.
        RunLock(str(run_dir), "resume").sign()
    if kind == "symlink":
        assert elsewhere.read_text() == "the user's own file\n"
    else:
        assert not elsewhere.exists()
    assert os.path.islink(lock) == kind.endswith("symlink")
