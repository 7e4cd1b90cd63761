"""A run's command line (fast_dqn.run.cli): the flag forms, --help, each setting resolved once
on the way to training, the lines a run ends with, and its exit status when it is stopped or
cannot write. Bad input (one line, exit 2) is tested in test_bad_input.py."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT

from fast_dqn import code_version
from fast_dqn.run import cli
from fast_dqn.run.run_kinds import NATURE
from fast_dqn.run.settings import flags, precedence
from fast_dqn.run.settings.hyperparameters import TOPICS, Config, FastConfig
from fast_dqn.run.storage.checkpoint import CheckpointStore


@pytest.mark.parametrize("form,value", [(["--xla"], True), (["--xla=False"], False),
                                        (["--xla=0"], False), (["--xla=true"], True),
                                        (["--no-xla"], False), ([], False)])
def test_boolean_flag_forms(form, value):
    parser = flags.build_parser("x", "y")
    assert precedence.config_from_args(parser.parse_args(form)).xla is value


def test_counts_accept_readable_forms():
    parser = flags.build_parser("x", "y")
    assert parser.parse_args(["--timesteps", "5e6"]).timesteps == 5_000_000
    assert parser.parse_args(["--timesteps", "10_000"]).timesteps == 10_000
    # As the docs write them.
    for typed, value in (("1M", 10**6), ("100k", 10**5), ("2.5k", 2500), ("1.5M", 1_500_000),
                         ("50K", 50_000), ("2G", 2 * 10**9)):
        assert parser.parse_args(["--timesteps", typed]).timesteps == value, typed


def test_game_names_resolve_in_both_cases(tmp_path):
    for typed in ("space_invaders", "SpaceInvaders", "spaceinvaders"):
        config = cli.validate_and_resolve(Config(game=typed, logdir=str(tmp_path / "r")))
        assert config.game == "space_invaders"


def test_valid_input_creates_the_run_directory_with_config(tmp_path, capsys):
    seen = []
    logdir = tmp_path / "run"
    code = cli.main(NATURE, ["--game", "Breakout", "--logdir", str(logdir), "--seed", "7"],
                    train=lambda config, **kw: seen.append(config))
    assert code == 0 and seen[0].game == "breakout" and seen[0].seed == 7
    import json
    saved = json.loads((logdir / "config.json").read_text())
    assert saved["game"] == "breakout" and saved["loop"] == "dqn"
    assert set(Config().to_dict()) <= set(saved)


def test_help_lists_every_option_with_its_default():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "run_dqn.py"), "--help"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    flat = " ".join(out.split())
    for name, value in Config().to_dict().items():
        assert flags.flag_name(name) in out
    assert "(default: 50_000_000 agent steps)" in flat
    assert "(default: 10_000 agent steps)" in flat
    assert "Counts may be written 50_000_000, 5e7, 50M or 100k." in flat
    assert flags.parse_count("100k") == 100_000 and flags.parse_count("50M") == 50_000_000


def test_the_resume_hint_is_a_command_to_paste():
    from fast_dqn.run.cli import resume_command
    assert resume_command("run_dqn.py", "runs/pong dqn") == ("python run_dqn.py --resume "
                                                            "'runs/pong dqn'")


@pytest.mark.parametrize("with_logdir", [True, False])
def test_each_setting_is_resolved_once_on_the_way_to_training(tmp_path, monkeypatch,
                                                               with_logdir):
    """The command line resolves before it creates the run directory; train_* resolves what
    it is given. The probes behind resolve (a Ray address, a gymnasium env, the hardware's
    compute types) must run once, and train_* must get the config as it was resolved."""
    from fast_dqn.run.settings import validation
    calls, seen = [], []
    monkeypatch.setattr(validation, "validate", lambda config: calls.append(config))
    monkeypatch.chdir(tmp_path)
    argv = ["--env", "CartPole-v1", "--optimizer", "adam"]
    if with_logdir:
        argv += ["--logdir", str(tmp_path / "run")]
    code = cli.main(NATURE, argv,
                    train=lambda config, **kw: seen.append((config, validation.resolve(config))))
    assert code == 0 and len(calls) == 1
    given, resolved = seen[0]
    assert resolved is given and given.optimizer_epsilon == 1.5e-4
    # A resolved config cannot change; a changed copy is resolved again.
    with pytest.raises(AttributeError, match="cannot change"):
        given.optimizer_epsilon = 0.5
    changed = given.replace(optimizer="rmsprop", optimizer_epsilon=None)
    assert isinstance(changed, validation.ResolvedConfig)
    assert changed.optimizer_epsilon == 0.01 and len(calls) == 2
    assert given.optimizer_epsilon == 1.5e-4


def test_the_parts_are_never_built_from_an_unresolved_config():
    """Even a Config whose every setting looks explicit: only resolve says it is checked."""
    from fast_dqn.run.components import build_learner, network_builder
    from fast_dqn.run.settings.validation import resolve
    with pytest.raises(TypeError, match="resolve returns, not a Config"):
        build_learner(Config(env="CartPole-v1"), (4, 4), 2)
    explicit = Config(env="CartPole-v1", precision="float32", optimizer_epsilon=0.01,
                      loss_reduction="sum")
    with pytest.raises(TypeError, match="resolve returns, not a Config"):
        network_builder(explicit, (4, 4), 2)
    assert network_builder(resolve(explicit), (4, 4), 2)().output_shape == (None, 2)


def test_a_finished_run_names_the_next_commands_in_the_users_words():
    from fast_dqn.run.settings.hyperparameters import Config
    config = Config(timesteps=1_000_000, logdir="runs/my run")
    assert cli.next_commands("run_dqn.py", config, best=True).splitlines() == [
        "next:",
        "  python -m fast_dqn.tools.evaluate 'runs/my run' --best   # play its best "
        "evaluation's weights",
        "  python -m fast_dqn.tools.plot 'runs/my run' -o curves.png   # its learning curves",
        "  python run_dqn.py --resume 'runs/my run' --timesteps 2M   # train it on, to twice "
        "the budget"]
    lines = cli.next_commands("fast-dqn nature", config, best=False).splitlines()
    assert lines[1].startswith("  fast-dqn evaluate 'runs/my run'   # play its last checkpoint")
    assert lines[3].startswith("  fast-dqn nature --resume 'runs/my run' --timesteps 2M")
    assert cli.tool_command("python -m fast_dqn fast", "plot") == "python -m fast_dqn plot"
    assert [cli._count(n) for n in (2_000_000, 500_000, 4_800, 1_234_567)] == [
        "2M", "500k", "4_800", "1_234_567"]
    from fast_dqn.run.settings.flags import parse_count
    assert all(parse_count(cli._count(n)) == n for n in (2_000_000, 4_800, 1_234_567))


@pytest.mark.faults
def test_a_stop_that_came_as_the_run_finished_is_a_finished_run(tmp_path, capsys):
    """SIGTERM in the last period: the run finishes that period, its last checkpoint says
    finished, and the command line says so (exit 0), not 'continue with --resume'."""
    logdir = tmp_path / "run"

    def train(config, resume=None, stop=None):
        os.kill(os.getpid(), __import__("signal").SIGTERM)
        CheckpointStore(str(logdir)).save(600, {"w": np.zeros(1)}, finished=True)

    assert cli.main(NATURE, ["--env=CartPole-v1", "--timesteps=600", "--prepopulate=200",
                             f"--logdir={logdir}"], train=train) == 0
    captured = capsys.readouterr()
    assert "stopped after a checkpoint" not in captured.err
    assert "next:" in captured.out


def test_ctrl_c_while_git_is_asked_at_a_runs_start_is_one_line(monkeypatch, capsys, tmp_path):
    def slow_git():
        raise KeyboardInterrupt
    monkeypatch.setattr(code_version, "commit", slow_git)
    assert cli.main(NATURE, ["--env=CartPole-v1", f"--logdir={tmp_path / 'run'}"],
                    train=lambda config, **kw: pytest.fail("trained")) == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        "run_dqn.py: interrupted before training began; nothing was made"]
    assert not (tmp_path / "run").exists()


def test_ctrl_c_while_version_asks_git_is_one_line(monkeypatch, capsys):
    def slow_git(prog):
        raise KeyboardInterrupt
    monkeypatch.setattr(code_version, "version_line", slow_git)
    with pytest.raises(SystemExit) as stop:
        cli.main(NATURE, ["--version"])
    assert stop.value.code == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        "run_dqn.py: interrupted; nothing was made"]


@pytest.mark.parametrize("code, ending", [("ENOSPC", "once there is space"),
                                          ("EROFS", "once that is fixed")])
def test_a_storage_error_in_training_says_the_fix_of_its_own_kind(tmp_path, capsys, code,
                                                                  ending):
    """A read-only disk between checkpoints: no space would mend it."""
    import errno

    def fails(config, **kwargs):
        number = getattr(errno, code)
        raise OSError(number, os.strerror(number), str(tmp_path / "run" / "episodes.csv"))
    assert cli.main(NATURE, ["--env=CartPole-v1", f"--logdir={tmp_path / 'run'}"],
                    train=fails) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("run_dqn.py: error: cannot write ") and last.endswith(ending), last


def test_every_setting_is_declared_under_a_help_topic():
    assert {f.metadata["topic"] for f in dataclasses.fields(FastConfig)} == set(TOPICS)


def test_a_divergence_never_calls_the_checkpoint_it_resumed_from_good(finished_cartpole_run):
    from types import SimpleNamespace

    from fast_dqn.run.cli import last_good_checkpoint
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    run_dir = str(finished_cartpole_run)
    step, path = CheckpointStore(run_dir).newest()
    fresh = last_good_checkpoint("run_dqn.py", run_dir)
    assert f"the last good checkpoint is {path} (step {step:,})" in fresh
    resumed = last_good_checkpoint("run_dqn.py", run_dir, resumed=SimpleNamespace(path=path))
    assert "good" not in resumed and "the one this run resumed from" in resumed
    assert f"if that checkpoint was edited, move it out of {os.path.dirname(path)}" in resumed
