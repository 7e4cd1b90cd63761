"""Bad input: one line naming the flag, exit 2, nothing created. And the flag forms."""

import os
import subprocess
import sys

import pytest
from helpers import ROOT

from fast_dqn.run import cli
from fast_dqn.run.run_kinds import NATURE
from fast_dqn.run.settings import flags, precedence
from fast_dqn.run.settings.hyperparameters import Config


def never_train(config):
    raise AssertionError("training must not start on bad input")


def run_main(argv, tmp_path, capsys):
    code = cli.main(NATURE, argv, train=never_train)
    err = capsys.readouterr().err
    return code, err


BAD_INPUT = [
    (["--game", "pongg"], "--game", "pong"),
    (["--game", "not_a_game_at_all"], "--game", "unknown game"),
    (["--timesteps", "0"], "--timesteps", "positive"),
    (["--timesteps", "-5"], "--timesteps", "positive"),
    (["--timesteps", "abc"], "--timesteps", "whole number"),
    (["--replay-capacity", "1.5"], "--replay-capacity", "whole number"),
    (["--batch-size", "0"], "--batch-size", "positive"),
    (["--lr", "nan"], "--lr", "finite"),
    (["--lr", "0"], "--lr", "positive"),
    (["--eps-start", "1.5"], "--eps-start", "[0, 1]"),
    (["--eps-end", "-0.1"], "--eps-end", "[0, 1]"),
    (["--eval-epsilon", "2"], "--eval-epsilon", "[0, 1]"),
    (["--sticky-actions", "1.01"], "--sticky-actions", "[0, 1]"),
    (["--discount", "1.2"], "--discount", "[0, 1]"),
    (["--evaluate", "-1"], "--evaluate", "0 or more"),
    (["--batch-size", "64", "--replay-capacity", "32", "--prepopulate", "10"], "--batch-size",
     "larger than --replay-capacity"),
    (["--prepopulate", "2000", "--replay-capacity", "1000"], "--prepopulate", "warm-up"),
    (["--prepopulate", "2"], "--prepopulate", "at least"),
    (["--replay-capacity", "100_000_000"], "--replay-capacity", "GiB"),
    (["--optimizer", "sgd"], "--optimizer", "invalid choice"),
    (["--full-action-space=maybe"], "--full-action-space", "true/false"),
    (["--interp", "bogus"], "--interp", "invalid choice"),
]


@pytest.mark.parametrize("argv,flag,words", BAD_INPUT, ids=[" ".join(c[0]) for c in BAD_INPUT])
def test_bad_input_is_one_line_naming_the_flag(argv, flag, words, tmp_path, capsys):
    logdir = tmp_path / "run"
    try:
        code, err = run_main(argv + ["--logdir", str(logdir)], tmp_path, capsys)
    except SystemExit as exit_:  # argparse's own errors exit from parse_args
        code, err = exit_.code, capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert flag in lines[0] and words in lines[0] and "Traceback" not in err
    assert not logdir.exists()


def test_logdir_holding_files_is_never_touched(tmp_path, capsys):
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "episodes.csv").write_text("precious\n")
    code, err = run_main(["--logdir", str(run)], tmp_path, capsys)
    assert code == 2 and "--logdir" in err and "already holds files" in err
    assert os.listdir(run) == ["episodes.csv"]
    assert (run / "episodes.csv").read_text() == "precious\n"


def test_logdir_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "afile"
    target.write_text("x")
    code, err = run_main(["--logdir", str(target / "run")], tmp_path, capsys)
    assert code == 2 and "--logdir" in err and target.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere chmod allows nothing")
def test_unwritable_logdir(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, err = run_main(["--logdir", str(locked / "run")], tmp_path, capsys)
    assert code == 2 and "--logdir" in err


def test_unwritable_logdir_even_for_root(tmp_path, capsys):
    # /proc refuses new files for everyone, root included.
    code, err = run_main(["--logdir", "/proc/fast-dqn-run"], tmp_path, capsys)
    assert code == 2 and "--logdir" in err and "cannot write" in err


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


@pytest.mark.parametrize("typed,words", [("1.5k5", "expected a whole number"),
                                         ("0.0005k", "expected a whole number, got '0.0005k'"),
                                         ("1m", "expected a whole number"),
                                         ("1e400", "'1e400' is too large or too small"),
                                         ("1e-100000000", "is too large or too small"),
                                         ("1e-400", "is too large or too small"),
                                         ("1" * 5000, "(5000 characters) is too long"),
                                         ("0." + "0" * 100 + "1e100", "is too long")])
def test_counts_that_are_no_whole_number_are_one_line(typed, words, capsys):
    """Each in well under a second: 1e-100000000 once took Fraction over a minute."""
    import time
    parser = flags.build_parser("x", "y")
    started = time.perf_counter()
    with pytest.raises(SystemExit):
        parser.parse_args(["--timesteps", typed])
    assert time.perf_counter() - started < 5
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--timesteps" in err and words in err


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


def test_a_library_error_is_worded_with_the_flags_on_the_command_line(capsys):
    from fast_dqn.errors import ConfigError
    error = ConfigError("replay_capacity", "too large for ${env} with ${logdir}; lower it")
    assert str(error) == "replay_capacity: too large for env with logdir; lower it"
    assert flags.fail("run_dqn.py", error) == 2
    assert capsys.readouterr().err == ("run_dqn.py: error: --replay-capacity: too large for "
                                       "--env with --logdir; lower it\n")
    # A tool's own argument names are already its words.
    assert ConfigError("RUN_DIR", "x").worded(flags.flag_name) == "RUN_DIR: x"
    assert ConfigError("-o", "x").worded(flags.flag_name) == "-o: x"


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
