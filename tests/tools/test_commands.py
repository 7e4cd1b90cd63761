"""The installed command: `fast-dqn COMMAND` (and `python -m fast_dqn COMMAND`) runs the
scripts and tools under their own flags, `--version` everywhere, and the code's version and
commit recorded in config.json and in every checkpoint; a tool stopped by a signal, meeting a
full disk or losing its reader says so in one line. The slow test installs the package with
pip into a fresh virtual environment and runs its command. A run's own command line is tested
in tests/run/test_cli.py."""

import json
import os
import shutil
import site
import subprocess
import venv

import numpy as np
import pytest
from helpers import ROOT, hang_guard

from fast_dqn import __version__, code_version, commands
from fast_dqn.run import cli
from fast_dqn.run.run_kinds import FAST, NATURE
from fast_dqn.run.storage.checkpoint import CheckpointStore


def git_commit():
    done = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def test_each_command_runs_its_job_under_its_own_name(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(cli, "main", lambda kind, argv, **kw: calls.append((kind, argv, kw))
                        or 0)
    assert commands.main(["fast", "--game", "pong"]) == 0
    assert commands.main(["nature", "--resume", "runs/x"]) == 0
    assert calls == [(FAST, ["--game", "pong"], {"script": True, "prog": "fast-dqn fast"}),
                     (NATURE, ["--resume", "runs/x"],
                      {"script": True, "prog": "fast-dqn nature"})]
    from fast_dqn.tools import evaluate, plot
    tools = []
    monkeypatch.setattr(evaluate, "main", lambda argv, prog: tools.append((prog, argv)) or 0)
    monkeypatch.setattr(plot, "main", lambda argv, prog: tools.append((prog, argv)) or 0)
    assert commands.main(["evaluate", "runs/x", "--best"]) == 0
    assert commands.main(["plot", "runs/x", "-o", "c.png"]) == 0
    assert tools == [("fast-dqn evaluate", ["runs/x", "--best"]),
                     ("fast-dqn plot", ["runs/x", "-o", "c.png"])]


def test_an_unknown_or_missing_command_is_one_line_with_the_choices(capsys):
    assert commands.main(["train"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown command 'train'" in err
    assert "fast, nature, evaluate, plot" in err
    assert commands.main([]) == 2  # the usage, on stdout, lists every command
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in ("fast", "nature", "evaluate", "plot"))
    assert commands.main(["--help"]) == 0


def test_a_resume_hint_names_the_command_the_user_typed():
    assert cli.resume_command("run_dqn.py", "runs/a b") == "python run_dqn.py --resume 'runs/a b'"
    assert cli.resume_command("fast-dqn fast", "runs/x") == "fast-dqn fast --resume runs/x"
    assert (cli.resume_command("python -m fast_dqn nature", "runs/x")
            == "python -m fast_dqn nature --resume runs/x")


@pytest.mark.parametrize("argv", [["--version"], ["fast", "--version"], ["nature", "--version"],
                                  ["evaluate", "--version"], ["plot", "--version"]])
def test_version_on_every_command(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        if commands.main(argv) == 0:
            raise SystemExit(0)
    assert stop.value.code == 0
    out = capsys.readouterr().out.strip()
    name = " ".join(["fast-dqn"] + argv[:-1])
    assert out.startswith(f"{name} {__version__}")
    if git_commit():  # a checkout: its commit is named
        assert f"(commit {git_commit()}" in out


def test_the_commit_is_the_checkouts_and_none_outside_one(tmp_path, monkeypatch):
    found = code_version.commit()
    if git_commit():
        assert found.removesuffix("-dirty") == git_commit()
    code_version.commit.cache_clear()
    # A copy of the package without .git, or a wheel installed inside some other project's
    # repository, records no commit.
    monkeypatch.setattr(code_version, "_PACKAGE_ROOT", str(tmp_path))
    assert code_version.commit() is None
    subprocess.run(["git", "init", "-q", str(tmp_path / "project")], check=True)
    monkeypatch.setattr(code_version, "_PACKAGE_ROOT", str(tmp_path / "project" / "venv"))
    os.makedirs(tmp_path / "project" / "venv")
    code_version.commit.cache_clear()
    assert code_version.commit() is None
    code_version.commit.cache_clear()


@pytest.mark.parametrize("name", ["repo", "caf\udce9"])  # the second: b"caf\xe9", not UTF-8
def test_a_dirty_checkout_is_marked(tmp_path, monkeypatch, name):
    repo = tmp_path / name
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run(git + ["add", "a.py"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "a"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    monkeypatch.setattr(code_version, "_PACKAGE_ROOT", str(repo))
    code_version.commit.cache_clear()
    assert code_version.commit() == head
    (repo / "a.py").write_text("x = 2\n")
    code_version.commit.cache_clear()
    assert code_version.commit() == head + "-dirty"
    code_version.commit.cache_clear()


def test_config_json_and_every_checkpoint_record_the_code(tmp_path):
    logdir = tmp_path / "run"
    assert cli.main(NATURE, ["--game", "pong", f"--logdir={logdir}"],
                    train=lambda config, **kw: None) == 0
    saved = json.loads((logdir / "config.json").read_text())
    assert saved["code"] == {"version": __version__, "commit": code_version.commit()}
    path = CheckpointStore(str(logdir)).save(100, {"weights": np.zeros(3)})
    manifest = json.loads(open(os.path.join(path, "manifest.json")).read())
    assert manifest["code"] == {"version": __version__, "commit": code_version.commit()}


def test_a_resume_accepts_the_code_record_and_plot_groups_seeds_across_commits(tmp_path):
    from fast_dqn.tools.plot import groups
    runs = []
    for seed, commit in ((0, "aaa"), (1, "bbb")):
        logdir = tmp_path / f"s{seed}"
        assert cli.main(NATURE, ["--game", "pong", f"--seed={seed}", f"--logdir={logdir}"],
                        train=lambda config, **kw: None) == 0
        saved = json.loads((logdir / "config.json").read_text())
        saved["code"]["commit"] = commit
        (logdir / "config.json").write_text(json.dumps(saved))
        runs.append(str(logdir))
    assert list(groups(runs).values()) == [runs]
    seen = []
    assert cli.main(NATURE, [f"--resume={runs[0]}"],
                    train=lambda config, **kw: seen.append(config)) == 0
    assert seen and seen[0].seed == 0


@pytest.mark.slow
def test_pip_install_gives_the_fast_dqn_command(tmp_path):
    """`pip install .` into a fresh virtual environment (the dependencies, pip and setuptools
    come from the environment running the tests: nothing is downloaded) gives `fast-dqn` and
    `python -m fast_dqn`, with the published curves as package data."""
    source = tmp_path / "source"
    os.makedirs(source)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, name), source)
    shutil.copytree(os.path.join(ROOT, "fast_dqn"), source / "fast_dqn",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env_dir = tmp_path / "venv"
    # Not system_site_packages: inside a virtual environment (the README's install) that
    # is the base interpreter's, whose setuptools (65.5 on Python 3.11) cannot build a
    # wheel. The environment's own packages are put on the new one's path instead, after
    # its own site-packages, which is left without pip or setuptools of its own.
    venv.create(env_dir, with_pip=False)
    site_dir, = (env_dir / "lib").glob("python3*/site-packages")
    (site_dir / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    python, command = env_dir / "bin" / "python", env_dir / "bin" / "fast-dqn"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", str(source)], check=True,
                   cwd=tmp_path, timeout=hang_guard(300))
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*argv):
        return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=clean,
                              timeout=hang_guard(120))

    done = run(command, "--version")
    # Installed from a copy, outside any checkout: the version without a commit.
    assert done.returncode == 0 and done.stdout.strip() == f"fast-dqn {__version__}"
    done = run(command, "fast", "--help")
    assert done.returncode == 0 and "usage: fast-dqn fast [options]" in done.stdout
    assert "--workers" in done.stdout
    done = run(command, "nature", "--game", "pongg")
    assert done.returncode == 2 and done.stderr.startswith("fast-dqn nature: error: --game")
    done = run(python, "-m", "fast_dqn", "plot", "--version")
    assert done.returncode == 0 and done.stdout.startswith("python -m fast_dqn plot")
    where = run(python, "-c", "import fast_dqn, os; print(os.path.dirname(fast_dqn.__file__))")
    installed = where.stdout.strip()
    assert installed.startswith(str(env_dir)), installed  # the wheel's copy, not this checkout
    assert os.path.exists(os.path.join(installed, "reference_data", "dopamine",
                                       "breakout.csv"))


def test_seeds_of_an_env_run_made_before_and_after_the_null_record_are_one_setting(tmp_path):
    from fast_dqn.run.settings import hyperparameters as hp
    from fast_dqn.tools.plot import groups
    runs = []
    for seed in (0, 1):
        logdir = tmp_path / f"s{seed}"
        assert cli.main(NATURE, ["--env=CartPole-v1", f"--seed={seed}", f"--logdir={logdir}"],
                        train=lambda config, **kw: None) == 0
        runs.append(str(logdir))
    # Seed 0 as an older version recorded it: the Atari defaults, not null.
    saved = json.loads((tmp_path / "s0" / "config.json").read_text())
    defaults = hp.Config()
    saved.update({name: getattr(defaults, name) for name in hp.ATARI_ONLY})
    (tmp_path / "s0" / "config.json").write_text(json.dumps(saved))
    assert list(groups(runs).values()) == [runs]


@pytest.mark.backends
def test_a_run_trained_in_float16_elsewhere_is_evaluated_in_what_this_machine_computes():
    from fast_dqn.agent import backend_setup
    from fast_dqn.run.settings.hyperparameters import Config
    from fast_dqn.tools.evaluate import _computable
    for precision, mixed in (("float16", False), ("float32", True)):
        config = _computable(Config(precision=precision, mixed_precision=mixed))
        if not backend_setup.computes_float16():
            assert config.precision in ("float32", "bfloat16") and not config.mixed_precision


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["evaluate", "--help"],
                                  ["plot", "--version"]])
def test_a_reader_that_goes_away_is_no_traceback(argv):
    """`fast-dqn --version | true`, `--help | head`: the reader is gone before the output is
    written (here its end of the pipe is closed before the child has started)."""
    import sys
    child = subprocess.Popen([sys.executable, "-m", "fast_dqn", *argv], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=hang_guard(120)) == 0 and err == "", err


@pytest.mark.parametrize("signal_name, code, words", [
    ("SIGINT", 130, "interrupted; no file was being written, so nothing is lost"),
    ("SIGTERM", 143, "stopped by SIGTERM; no file was being written, so nothing is lost")])
def test_a_tool_stopped_by_a_signal_says_so_in_one_line(monkeypatch, capsys, signal_name, code,
                                                        words):
    """Ctrl-C or SIGTERM while evaluate plays its games, writing no file: what a storage
    error's line says ("no partial file is left") would be about a file there was none of."""
    import signal

    from fast_dqn.tools import evaluate

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, signal_name))
        pytest.fail("the signal did not stop the tool")
    monkeypatch.setattr(evaluate, "evaluate_run", stopped)
    before = signal.getsignal(signal.SIGTERM)
    assert commands.main(["evaluate", "runs/x"]) == code
    assert capsys.readouterr().err.strip().splitlines() == [f"fast-dqn evaluate: {words}"]
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize("signal_name, code, words", [
    ("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "stopped by SIGTERM")])
def test_a_tool_stopped_while_writing_says_no_partial_file_of_it_is_left(
        monkeypatch, capsys, tmp_path, signal_name, code, words):
    """Ctrl-C or SIGTERM while evaluate writes its video (from the first game to its
    publication): the line names the file, of which no partial one is left."""
    import signal

    from fast_dqn.tools import evaluate
    from fast_dqn.tools.partial_file import writing
    video = str(tmp_path / "game.mp4")

    def recording(*args, **kwargs):
        with writing(video):
            os.kill(os.getpid(), getattr(signal, signal_name))
            pytest.fail("the signal did not stop the tool")
    monkeypatch.setattr(evaluate, "evaluate_run", recording)
    assert commands.main(["evaluate", "runs/x", f"--video={video}"]) == code
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fast-dqn evaluate: {words}; no partial file of '{video}' is left"]


@pytest.mark.parametrize("code, advice", [
    ("ENOSPC", "free some space, or give a path on another disk"),
    ("EROFS", "the file system is mounted read-only: give a path on a writable disk"),
    ("EIO", "the disk failed a write: check it, or give a path on another disk")])
def test_a_full_disk_under_a_tool_is_one_line(monkeypatch, capsys, code, advice):
    """Each storage error gets its own fix: no space to free on a read-only disk."""
    import errno

    from fast_dqn.tools import plot

    def full(*args, **kwargs):
        number = getattr(errno, code)
        raise OSError(number, os.strerror(number), "c.png")
    monkeypatch.setattr(plot, "main", full)
    assert commands.main(["plot", "runs/x"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fast-dqn plot: error: cannot write 'c.png' ({os.strerror(getattr(errno, code))}); "
        f"no partial file is left: {advice}"]
