"""evaluate and --export against hand-edited runs, odd backends and odd paths, and stopped or
failing writes: one line and a status, and nothing left on disk but what was there."""

import errno
import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import ROOT, code_path_env, hang_guard

from fast_dqn.errors import ConfigError
from fast_dqn.run.settings.validation import check_saved_types
from fast_dqn.tools.evaluate import PROG, main
from fast_dqn.tools.tool_exits import Terminated, run_tool


@pytest.fixture
def cartpole_run(finished_cartpole_run):
    """A tiny finished CartPole run (conftest), with its final checkpoint and no best/."""
    return finished_cartpole_run


def _edited(run, tmp_path, **changes):
    """A copy of the run with its config.json edited by hand."""
    run_dir = tmp_path / "edited"
    shutil.copytree(run, run_dir)
    path = run_dir / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return run_dir


def _one_line(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("mode", [[], ["--best"], ["--export={tmp}/a.keras"]],
                         ids=["play", "best", "export"])
def test_a_mistyped_config_json_is_refused_as_resume_refuses_it(cartpole_run, tmp_path, capsys,
                                                                 mode):
    run_dir = _edited(cartpole_run, tmp_path, batch_size="64")
    with pytest.raises(ConfigError) as resume_refusal:  # what run_dqn.py --resume says
        check_saved_types(json.loads((run_dir / "config.json").read_text()), str(run_dir))
    capsys.readouterr()
    argv = [str(run_dir), "--episodes=1"] + [a.format(tmp=tmp_path) for a in mode]
    assert main(argv) == 2
    err = _one_line(capsys)
    assert err == f"{PROG}: error: RUN_DIR: {resume_refusal.value.message}"
    assert f'{run_dir / "config.json"} has "batch_size": "64"' in err and "put back" in err
    assert not (tmp_path / "a.keras").exists()


@pytest.mark.parametrize("edit, words", [
    (dict(loop=None), '"loop": null, which is not one of dqn, fast'),
    (dict(loop="dqn2"), '"loop": "dqn2", which is not one of dqn, fast'),
    (dict(loop=["dqn"]), '"loop": ["dqn"], which is not one of dqn, fast'),
    (dict(precision="float64"), '"precision": "float64", which is not one of'),
    (dict(dueling="yes"), '"dueling": "yes", which is not'),
    (dict(game="pong"), '"game": "pong" beside "env": "CartPole-v1"'),
], ids=["loop null", "unknown loop", "loop a list", "precision", "dueling", "game and env"])
def test_other_hand_edits_of_config_json_are_one_line(cartpole_run, tmp_path, capsys, edit,
                                                      words):
    run_dir = _edited(cartpole_run, tmp_path, **edit)
    capsys.readouterr()
    assert main([str(run_dir), "--episodes=1"]) == 2
    err = _one_line(capsys)
    assert "RUN_DIR: " in err and "config.json" in err and words in err, err


@pytest.mark.parametrize("loop, edit, words", [
    ("dqn", dict(lr=-1), 'config.json has "lr": -1, but --lr must be positive, got -1.0; put '
     'back the value the run was started with'),
    ("fast", dict(updates_per_call=-1), 'config.json has "updates_per_call": -1, but '
     '--updates-per-call must be 0 or more, got -1; put back the value the run was started '
     'with')], ids=["lr", "updates_per_call"])
def test_a_value_of_config_json_its_check_refuses_names_config_json(tmp_path, capsys, loop,
                                                                    edit, words):
    """Nobody typed --updates-per-call: the refusal names the file the value came from."""
    from fast_dqn.run.run_kinds import RUN_KINDS
    from fast_dqn.run.storage.run_directory import create_run_directory
    run_dir = tmp_path / "run"
    config = RUN_KINDS[loop].config_class(logdir=str(run_dir), env="CartPole-v1", game=None,
                                          history_length=1)
    create_run_directory(str(run_dir), {"loop": loop, **config.to_dict(), **edit})
    before = sorted(os.listdir(run_dir))
    capsys.readouterr()
    assert main([str(run_dir), "--episodes=1"]) == 2
    err = _one_line(capsys)
    assert err.startswith(f"{PROG}: error: RUN_DIR: ") and words in err, err
    assert sorted(os.listdir(run_dir)) == before


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_run_with_jax_only_compile_choices_evaluates_on_either_backend(tmp_path,
                                                                       monkeypatch, backend):
    """A GPU run's --fused-optimizer, --scan-unroll and --act-on-cpu (JAX's alone) do not
    keep it from being evaluated or exported where TensorFlow is the backend."""
    from fast_dqn.run.run_kinds import RUN_KINDS
    from fast_dqn.run.storage.run_directory import create_run_directory
    from fast_dqn.tools.evaluate import _run_config
    monkeypatch.setenv("KERAS_BACKEND", backend)
    run_dir = tmp_path / "run"
    config = RUN_KINDS["fast"].config_class(logdir=str(run_dir), env="CartPole-v1", game=None,
                                            history_length=1)
    create_run_directory(str(run_dir), {"loop": "fast", **config.to_dict(), "scan_unroll": 4,
                                        "fused_optimizer": True, "act_on_cpu": True})
    resolved = _run_config(str(run_dir))
    assert (resolved.scan_unroll, resolved.fused_optimizer, resolved.act_on_cpu) == \
        (0, False, False)


def test_a_number_edited_to_a_whole_number_is_that_number(cartpole_run, tmp_path, capsys):
    """"lr": 1 passes the type check (a number), as --lr 1 does: the optimizer gets 1.0."""
    run_dir = _edited(cartpole_run, tmp_path, lr=1, eps_end=0)
    assert main([str(run_dir), "--episodes=1"]) == 0, capsys.readouterr().err


def _save_then(exception, written=None):
    """A Model.save that writes some bytes to its path, as Keras does before a write fails,
    then raises `exception`."""
    def save(model, filepath, *args, **kwargs):
        with open(filepath, "wb") as f:
            f.write(b"PK\x03\x04" + b"\0" * 100_000)
        if written is not None:
            written.append(filepath)
        raise exception
    return save


def _export_in(tmp_path):
    """A directory with a file of the user's in it, to export into."""
    directory = tmp_path / "out"
    directory.mkdir()
    (directory / "notes.txt").write_text("the user's")
    return directory


def test_a_full_disk_names_the_export_and_leaves_nothing(cartpole_run, tmp_path, capsys,
                                                       monkeypatch):
    import keras
    directory, written = _export_in(tmp_path), []
    target = directory / "agent.keras"
    monkeypatch.setattr(keras.Model, "save", _save_then(
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), written))
    capsys.readouterr()
    assert run_tool(PROG, lambda: main([str(cartpole_run), f"--export={target}"])) == 1
    err = _one_line(capsys)
    assert f"'{target}'" in err and "No space left on device" in err, err
    assert "no partial file is left" in err and "another disk" in err, err
    assert written and sorted(os.listdir(directory)) == ["notes.txt"]


def test_a_directory_that_became_unwritable_is_one_line(cartpole_run, tmp_path, capsys,
                                                        monkeypatch):
    import keras
    directory = _export_in(tmp_path)
    target = directory / "agent.keras"

    def save(model, filepath, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), filepath)
    monkeypatch.setattr(keras.Model, "save", save)
    capsys.readouterr()
    assert run_tool(PROG, lambda: main([str(cartpole_run), f"--export={target}"])) == 2
    err = _one_line(capsys)
    assert f"--export: cannot write '{target}' (Permission denied)" in err, err
    assert sorted(os.listdir(directory)) == ["notes.txt"]


def test_sigterm_during_the_save_leaves_no_partial(cartpole_run, tmp_path, capsys,
                                                   monkeypatch):
    import keras
    directory, written = _export_in(tmp_path), []
    monkeypatch.setattr(keras.Model, "save", _save_then(Terminated(), written))
    capsys.readouterr()
    target = directory / "agent.keras"
    assert run_tool(PROG, lambda: main([str(cartpole_run), f"--export={target}"])) == 143
    assert _one_line(capsys) == f"{PROG}: stopped by SIGTERM; no partial file of '{target}' " \
        "is left"
    assert written and sorted(os.listdir(directory)) == ["notes.txt"]


def test_the_partial_file_takes_no_one_elses_name(cartpole_run, tmp_path, capsys):
    """A partial left by an earlier export of this PID (containers reuse PIDs), or anyone's
    file of that name, is neither written over nor removed."""
    directory = _export_in(tmp_path)
    left = directory / f".agent.keras.partial-{os.getpid()}.keras"
    left.write_text("not this export's")
    assert main([str(cartpole_run), f"--export={directory / 'agent.keras'}"]) == 0
    assert left.read_text() == "not this export's"
    assert sorted(os.listdir(directory)) == sorted([left.name, "agent.keras", "notes.txt"])


@pytest.mark.parametrize("flag", ["--export", "--video"])
def test_a_dangling_symbolic_link_is_named_as_one(cartpole_run, tmp_path, capsys, flag):
    directory = _export_in(tmp_path)
    link = directory / ("agent.keras" if flag == "--export" else "game.mp4")
    link.symlink_to(directory / "missing")
    capsys.readouterr()
    assert main([str(cartpole_run), "--episodes=1", f"{flag}={link}"]) == 2
    err = _one_line(capsys)
    assert f"'{link}' is a symbolic link to a missing file; remove it or give another path" \
        in err, err
    assert sorted(os.listdir(directory)) == [link.name, "notes.txt"] and link.is_symlink()


def _command(run_dir, argv, env=None):
    return subprocess.run([sys.executable, "-m", "fast_dqn", "evaluate", str(run_dir)] + argv,
                          capture_output=True, text=True, timeout=hang_guard(300), cwd=ROOT,
                          env=code_path_env({**os.environ, **(env or {})}))


@pytest.mark.parametrize("backend", ["TensorFlow", "torch"])
def test_an_unsupported_backend_is_one_line_on_export(cartpole_run, tmp_path, backend):
    done = _command(cartpole_run, [f"--export={tmp_path / 'a.keras'}"],
                    env={"KERAS_BACKEND": backend})
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"python -m fast_dqn evaluate: error: KERAS_BACKEND={backend!r} is not a backend "
        "fast-dqn runs on; set it to tensorflow or jax (lower case), or unset it"], done.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("case", ["existing export", "mistyped config"])
def test_an_export_refusal_is_one_line_without_start_up_noise(cartpole_run, tmp_path, case):
    """TensorFlow's C++ writes lines at its import; a refusal is the only line."""
    (tmp_path / "taken.keras").write_text("the user's")
    run_dir = cartpole_run
    if case == "mistyped config":
        run_dir = _edited(cartpole_run, tmp_path, batch_size="64")
    target = tmp_path / ("taken.keras" if case == "existing export" else "a.keras")
    done = _command(run_dir, [f"--export={target}"])
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert (tmp_path / "taken.keras").read_text() == "the user's"


@pytest.mark.slow  # a Python that imports TensorFlow and builds the network
def test_a_refusal_after_the_backend_started_is_one_line(cartpole_run, tmp_path):
    """The checkpoint's network is not config.json's (a hand edit): refused once Keras has
    built the network, still the only line on stderr."""
    run_dir = _edited(cartpole_run, tmp_path, dueling=True)
    done = _command(run_dir, [f"--export={tmp_path / 'a.keras'}"])
    assert done.returncode == 2 and done.stderr.splitlines() == [
        done.stderr.strip()] and "do not fit the run's config.json" in done.stderr, \
        done.stderr
    assert not (tmp_path / "a.keras").exists()


# Another game's checkpoints in the run: CartPole-v0's network has CartPole-v1's shapes, so
# only the checkpoint's record of its game tells them apart, as --resume reads it.
@pytest.mark.parametrize("mode", [[], ["--export={tmp}/a.keras"]], ids=["play", "export"])
def test_another_games_checkpoint_is_refused_as_resume_refuses_it(cartpole_run, tmp_path,
                                                                  capsys, mode):
    run_dir = _edited(cartpole_run, tmp_path, env="CartPole-v0")
    argv = [str(run_dir), "--episodes=1", *(m.format(tmp=tmp_path) for m in mode)]
    assert main(argv) == 2
    err = _one_line(capsys)
    assert "was trained on CartPole-v1 (2 actions" in err and "describes CartPole-v0" in err
    assert "not this run's" in err
    assert not (tmp_path / "a.keras").exists()


def test_a_negative_seed_is_one_line(cartpole_run, capsys):
    assert main([str(cartpole_run), "--seed=-1"]) == 2
    assert _one_line(capsys).endswith("--seed: must be 0 or more, got -1")


def test_a_run_whose_checkpoints_were_removed_says_so(cartpole_run, tmp_path, capsys):
    run_dir = tmp_path / "moved"
    shutil.copytree(cartpole_run, run_dir)
    shutil.rmtree(run_dir / "checkpoints")
    assert main([str(run_dir)]) == 2
    err = _one_line(capsys)
    assert "has had checkpoints (one of agent step" in err and "put them back" in err
    assert "yet" not in err
