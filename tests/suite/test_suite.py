"""`fast-dqn suite` without training: the game sets, the checks that refuse bad input before
anything is written, the commands it gives each run, its table, and a suite's score
(fast_dqn.tools.suite_scores) on synthetic logs against a computation by hand. The real
suites, local and on Ray, are in tests/end_to_end/test_suite_runs.py."""

import csv
import itertools
import json
import os
import shutil

import numpy as np
import pytest

from fast_dqn.errors import ConfigError
from fast_dqn.suite import game_sets
from fast_dqn.suite.cli import main as suite_main
from fast_dqn.suite.plan import (
    DAMAGED,
    FINISHED,
    NEW,
    UNFINISHED,
    Suite,
    check_logdir,
    check_parallel,
    check_run_flags,
    command,
    run_state,
    write_suite_file,
)

GAMES = ["pong", "breakout", "space_invaders", "boxing", "seaquest", "zaxxon", "alien"]


def test_the_named_sets_are_the_benchmarks_games():
    assert len(game_sets.NATURE49) == len(set(game_sets.NATURE49)) == 49
    assert len(game_sets.ATARI57) == 57 and set(game_sets.NATURE49) < set(game_sets.ATARI57)
    assert len(game_sets.DOPAMINE60) == 60
    # Every game of dopamine60 has Dopamine's published curves in the package, and no other.
    shipped = {name[:-4] for name in os.listdir(os.path.join(
        os.path.dirname(game_sets.__file__), "..", "reference_data", "dopamine"))
        if name.endswith(".csv")}
    assert shipped == set(game_sets.DOPAMINE60)


def test_games_are_read_as_typed_sets_included_each_once():
    parse = game_sets.parse_games
    assert parse("pong, Breakout,SpaceInvaders", GAMES) == ["pong", "breakout", "space_invaders"]
    both = parse("pong,nature49", list(game_sets.ATARI57))
    assert both[0] == "pong" and len(both) == 49
    with pytest.raises(ConfigError, match=r"unknown game 'pongg'; did you mean pong\?"):
        parse("pongg,breakout", GAMES)
    with pytest.raises(ConfigError, match="no game given"):
        parse(" , ", GAMES)
    with pytest.raises(ConfigError, match="not in the installed ale-py"):
        parse("atari57", GAMES)


def suite(tmp_path, **changes):
    values = dict(logdir=str(tmp_path / "suite"), games=("pong", "breakout"), seeds=(0, 1),
                  timesteps=1_600, loop="fast", preset=None,
                  run_flags=("--workers=4", "--replay-capacity=2000", "--prepopulate=400"))
    return Suite(**{**values, **changes})


def test_a_directory_of_something_else_is_refused(tmp_path):
    s = suite(tmp_path)
    check_logdir(s)  # new
    os.makedirs(s.logdir)
    check_logdir(s)  # empty
    (tmp_path / "suite" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds files but no suite.json"):
        check_logdir(s)
    os.remove(tmp_path / "suite" / "notes.txt")
    (tmp_path / "suite" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="is a run directory, not a suite's"):
        check_logdir(s)
    os.remove(tmp_path / "suite" / "config.json")
    write_suite_file(s)
    check_logdir(s)  # its own: continued
    check_logdir(suite(tmp_path, games=("pong",), seeds=(0,), timesteps=3_200))
    with pytest.raises(ConfigError, match=r"holds another suite \(--loop fast -- --workers=4 "
                       r".*\), not \(--loop nature"):
        check_logdir(suite(tmp_path, loop="nature"))
    with pytest.raises(ConfigError, match="holds another suite"):
        check_logdir(suite(tmp_path, preset="dopamine"))
    (tmp_path / "suite" / "suite.json").write_text("{broken")
    with pytest.raises(ConfigError, match=r"suite.json is damaged \(not JSON: "):
        check_logdir(s)
    # Its runs without suite.json: a suite's, not "not a suite's", and nothing retrained.
    os.makedirs(tmp_path / "suite" / "pong" / "seed-0")
    (tmp_path / "suite" / "pong" / "seed-0" / "config.json").write_text("{}")
    os.remove(tmp_path / "suite" / "suite.json")
    with pytest.raises(ConfigError) as lost:
        check_logdir(s)
    assert "holds the runs of a suite (pong/seed-0) but no suite.json" in str(lost.value)
    assert "put back a copy of suite.json to continue them" in str(lost.value)
    write_suite_file(s)
    # An edited value is named as an edit, never described as a flag (--loop None).
    for key, value, expected in [("loop", None, "one of fast, nature"),
                                 ("preset", 3, "a preset's name or null"),
                                 ("run_flags", "--workers=4", "a list of flags")]:
        (tmp_path / "suite" / "suite.json").write_text(json.dumps(
            {"format": 1, "loop": "fast", "preset": None, "run_flags": [], key: value}))
        with pytest.raises(ConfigError) as edited:
            check_logdir(s)
        assert f'suite.json has "{key}": {json.dumps(value)}, which is not {expected}: it ' \
            "was edited; put back the value the suite was started with" in str(edited.value)
        assert "None" not in str(edited.value)


def finished_suite(tmp_path):
    """suite(tmp_path) as it ends: its suite.json, and each run finished at its budget."""
    s = suite(tmp_path)
    write_suite_file(s)
    for run in s.runs():
        step = os.path.join(run.run_dir, "checkpoints", "step-000000001600")
        os.makedirs(step)
        with open(os.path.join(run.run_dir, "config.json"), "w") as f:
            json.dump({"loop": "fast", "game": run.game, "seed": run.seed}, f)
        with open(os.path.join(step, "manifest.json"), "w") as f:
            json.dump({"finished": True}, f)
    return s


def suite_argv(s):
    return ["--logdir", s.logdir, "--games", ",".join(s.games), "--seeds", str(len(s.seeds)),
            "--timesteps", str(s.timesteps), "--", *s.run_flags]


def _files(root):
    return {os.path.relpath(os.path.join(folder, name), root): open(
        os.path.join(folder, name), "rb").read()
        for folder, _, names in os.walk(root) for name in names}


@pytest.mark.parametrize("content,why", [
    (b'{"format": 1, "loop": "fa', "not JSON: Unterminated string starting at"),
    (b"\xff\xfe", "not JSON: 'utf-8' codec can't decode byte 0xff"),
    (b"[1, 2]", "not a suite's record of its settings"),
    (b'{"loop": "fast"}', "not a suite's record of its settings")])
def test_a_damaged_suite_file_is_one_line_that_says_how_to_keep_the_runs(tmp_path, capsys,
                                                                        content, why):
    """A finished suite's suite.json cut short or overwritten: one line, exit 2, that says
    what is wrong with it and how to keep the runs (never "give another directory", which
    would train them all again), and nothing written."""
    s = finished_suite(tmp_path)
    (tmp_path / "suite" / "suite.json").write_bytes(content)
    before = _files(s.logdir)
    assert suite_main(suite_argv(s), prog="fast-dqn suite") == 2
    out, err = capsys.readouterr()
    assert not out and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"fast-dqn suite: error: --logdir: {s.logdir}/suite.json is "
                          f"damaged ({why}")
    assert err.strip().endswith(
        "), and it records the loop, preset and run flags of the runs beside it "
        "(breakout/seed-0, breakout/seed-1, pong/seed-0 and 1 more); nothing was changed: put "
        "back a copy of suite.json to continue them, or resume each with `fast-dqn fast "
        "--resume RUN_DIR` (or nature)")
    assert _files(s.logdir) == before
    # Without runs beside it, another directory loses nothing.
    for run in s.runs():
        shutil.rmtree(run.run_dir)
    assert suite_main(suite_argv(s), prog="fast-dqn suite") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.strip().endswith("; put back a copy of it, or give another directory")


def test_a_suite_file_of_another_format_names_it(tmp_path):
    s = finished_suite(tmp_path)
    (tmp_path / "suite" / "suite.json").write_text('{"format": 2}')
    with pytest.raises(ConfigError) as other:
        check_logdir(s)
    assert str(other.value).endswith("suite.json is in format 2, which this fast-dqn (format "
                                     "1) does not read: continue the suite with the fast-dqn "
                                     "that wrote it")


@pytest.mark.parametrize("content,why", [(b"{oops", "is damaged (not JSON: "),
                                         (b'"text"', "is damaged (not a JSON object)")])
def test_a_run_whose_config_json_is_damaged_is_named_and_left_alone(tmp_path, capsys,
                                                                    content, why):
    """A finished suite with one run's config.json damaged: the suite names the run at its
    start and at its end, starts nothing, shows it in the table, and exits 1 (not every run
    is finished); it said nothing and exited 0."""
    s = finished_suite(tmp_path)
    damaged = s.runs()[0]  # pong/seed-0
    config = os.path.join(damaged.run_dir, "config.json")
    with open(config, "wb") as f:
        f.write(content)
    assert run_state(damaged, s.timesteps) == DAMAGED
    assert suite_main(suite_argv(s), prog="fast-dqn suite") == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    note = (f"fast-dqn suite: pong/seed-0 is left out, neither trained nor scored: {config} "
            f"{why}")
    named = [line for line in err.splitlines() if line.startswith(note)]
    assert len(named) == 2, err
    assert named[0].endswith(f"; put back its config.json, or move {damaged.run_dir} out of "
                             f"{s.logdir} to train it again from the start")
    assert "fast-dqn suite: 3 finished already, skipped; 0 to resume" in out
    assert any(line.startswith("pong") and "config.json damaged" in line
               for line in out.splitlines())
    assert "1 of 4 runs did not finish (pong/seed-0)" in err
    assert not os.path.exists(damaged.log)  # no training command was started for it
    with open(config, "rb") as f:
        assert f.read() == content


@pytest.mark.parametrize("signal_name, code, words", [
    ("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "stopped by SIGTERM")])
def test_a_signal_before_the_runs_start_says_nothing_was_written(tmp_path, monkeypatch, capsys,
                                                                 signal_name, code, words):
    """Ctrl-C or SIGTERM to `fast-dqn suite` while it checks its input (seconds: the run
    flags are checked as the training command would): stopped, and nothing lost, not a
    storage error's "no partial file is left"."""
    import signal

    from fast_dqn import commands
    from fast_dqn.suite import cli as suite_cli
    s = suite(tmp_path)

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, signal_name))
        pytest.fail("the signal did not stop the suite")
    monkeypatch.setattr(suite_cli, "check_run_flags", stopped)
    assert commands.main(["suite", *suite_argv(s)]) == code
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fast-dqn suite: {words}; no file was being written, so nothing is lost"]
    assert not os.path.exists(s.logdir)


def test_a_signal_after_every_run_finished_says_so(tmp_path, capsys):
    """The suite's own ending of a stop: what is left to finish, or that nothing is."""
    import signal

    from fast_dqn.suite.cli import _ending
    s = finished_suite(tmp_path)
    assert _ending("fast-dqn suite", s, s.runs(), {}, [signal.SIGTERM], False, []) == 143
    assert capsys.readouterr().err.strip().splitlines() == [
        "fast-dqn suite: stopped by SIGTERM; every run had finished, so nothing is lost"]
    shutil.rmtree(s.runs()[0].run_dir)
    assert _ending("fast-dqn suite", s, s.runs(), {}, [signal.SIGINT], False, []) == 130
    assert capsys.readouterr().err.strip().splitlines() == [
        "fast-dqn suite: stopped by SIGINT; 1 of 4 runs to finish: the same command "
        "continues it"]


def test_a_run_moved_into_the_wrong_place_is_refused(tmp_path):
    s = suite(tmp_path)
    write_suite_file(s)
    run = s.runs()[1]  # pong, seed 1
    os.makedirs(run.run_dir)
    (tmp_path / "suite" / "pong" / "seed-1" / "config.json").write_text(
        json.dumps({"game": "pong", "seed": 0, "loop": "fast"}))
    with pytest.raises(ConfigError, match="seed-1 holds a run of --game pong --seed 0, where "
                       "the suite expects its run of --game pong --seed 1"):
        check_logdir(s)


def test_swapped_run_directories_are_one_line_in_flags_with_where_each_belongs(tmp_path,
                                                                                capsys):
    """Printed {'game': 'pong', 'seed': 1, 'loop': 'fast'}, a Python dict."""
    s = suite(tmp_path)
    write_suite_file(s)
    holds = {("pong", 0): ("breakout", 1, "fast"), ("breakout", 1): ("pong", 0, "fast")}
    for (game, seed), (their_game, their_seed, loop) in holds.items():
        os.makedirs(tmp_path / "suite" / game / f"seed-{seed}")
        (tmp_path / "suite" / game / f"seed-{seed}" / "config.json").write_text(json.dumps(
            {"game": their_game, "seed": their_seed, "loop": loop}))
    assert suite_main(suite_argv(s)) == 2
    root = tmp_path / "suite"
    assert capsys.readouterr().err.splitlines() == [
        f"fast-dqn suite: error: --logdir: {root / 'pong' / 'seed-0'} holds a run of --game "
        "breakout --seed 1, where the suite expects its run of --game pong --seed 0: it was "
        f"moved or copied there; move it to {root / 'breakout' / 'seed-1'}, its place in this "
        f"suite (moving aside what is there first), or out of {root}"]
    # Of another loop, or a seed the suite has not: no place in it; the loop is named.
    (root / "pong" / "seed-0" / "config.json").write_text(json.dumps(
        {"game": "pong", "seed": 0, "loop": "dqn"}))
    (root / "breakout" / "seed-1" / "config.json").write_text(json.dumps(
        {"game": "breakout", "seed": 7, "loop": "fast"}))
    assert suite_main(suite_argv(s)) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"fast-dqn suite: error: --logdir: {root / 'pong' / 'seed-0'} holds a run of --game "
        "pong --seed 0 --loop nature, where the suite expects its run of --game pong --seed 0 "
        f"--loop fast: it was moved or copied there; move it out of {root}"]
    (root / "pong" / "seed-0" / "config.json").write_text(json.dumps(
        {"game": "pong", "seed": 0, "loop": "fast"}))
    assert suite_main(suite_argv(s)) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"fast-dqn suite: error: --logdir: {root / 'breakout' / 'seed-1'} holds a run of "
        "--game breakout --seed 7, where the suite expects its run of --game breakout --seed "
        f"1: it was moved or copied there; move it out of {root}"]


def test_run_flags_are_checked_as_the_training_command_checks_them(tmp_path):
    check_run_flags(suite(tmp_path))
    for flags, message in [(("--wrokers=4",), "unrecognized arguments: --wrokers=4; they go "
                            "to `fast-dqn fast`"),
                           (("--seed=3",), "--seed is the suite's to give: use --seeds"),
                           (("--game=pong",), "use --games"),
                           (("--timesteps=5",), "use --timesteps"),
                           (("--resume=x",), "use --logdir"),
                           (("--lr=-1",), "--lr")]:
        with pytest.raises(ConfigError, match=message) as error:
            check_run_flags(suite(tmp_path, run_flags=flags))
        assert error.value.setting == "run_flags"
    with pytest.raises(ConfigError, match="unrecognized arguments: --workers"):
        check_run_flags(suite(tmp_path, loop="nature", run_flags=("--workers=4",)))


def test_parallel_runs_need_a_core_each_and_the_ram_for_their_replays():
    check_parallel(2, runs=4, cores=2, replay_bytes=1, available_bytes=10)
    with pytest.raises(ConfigError, match="3 runs at a time need a core each, and this "
                       "machine has 2; give --parallel 2 or fewer"):
        check_parallel(3, runs=4, cores=2, replay_bytes=1, available_bytes=10)
    with pytest.raises(ConfigError, match=r"2 runs at a time need 14.0 GiB .* 10.0 GiB of "
                       "RAM is available; give --parallel 1 or fewer"):
        check_parallel(2, runs=4, cores=4, replay_bytes=7 * 2**30, available_bytes=10 * 2**30)
    # Only the runs left count: one run to go needs one replay.
    check_parallel(2, runs=1, cores=4, replay_bytes=7 * 2**30, available_bytes=10 * 2**30)
    with pytest.raises(ConfigError, match=r"^parallel: 1 run at a time needs 14.0 GiB for its replay, "
                       r"and 10.0 GiB of RAM is available; give a smaller --replay-capacity$"):
        check_parallel(2, runs=1, cores=4, replay_bytes=14 * 2**30, available_bytes=10 * 2**30)


def test_the_suites_lines_count_in_good_grammar(tmp_path, capsys):
    """Issue 54: "1 runs of 1 games" was reported."""
    from fast_dqn.suite.cli import _announce
    from fast_dqn.suite.ray_runs import counted_share
    one = suite(tmp_path, games=("pong",), seeds=(0,))
    _announce("fast-dqn suite", one, one.runs())
    assert "fast-dqn suite: 1 run (1 game × 1 seed) of `fast-dqn fast`, 1,600 agent steps " \
        "each" in capsys.readouterr().out
    _announce("fast-dqn suite", suite(tmp_path), suite(tmp_path).runs())
    assert ": 4 runs (2 games × 2 seeds) of " in capsys.readouterr().out
    assert [counted_share(n, "GPU") for n in (0, 0.5, 1, 1.0, 2)] == \
        ["0 GPUs", "0.5 GPUs", "1 GPU", "1 GPU", "2 GPUs"]
    import io

    from fast_dqn.tools.suite_scores import _print_suite
    out = io.StringIO()
    _print_suite("scored", [], (3_000, 3_000), {"pong": [1.0]}, {}, [], out)
    assert out.getvalue().startswith("scored: 1 run of 1 game, each scored at its latest ")


def test_each_run_is_started_then_resumed_by_the_training_command(tmp_path):
    s = suite(tmp_path, preset="dopamine")
    run = s.runs()[0]
    argv = command(s, run, threads=2)
    assert argv[1:4] == ["-m", "fast_dqn", "fast"]
    assert argv[4:] == ["--game=pong", "--seed=0", "--timesteps=1600",
                        f"--logdir={run.run_dir}", "--preset=dopamine", "--workers=4",
                        "--replay-capacity=2000", "--prepopulate=400", "--threads=2",
                        "--env-threads=2"]
    assert run_state(run, s.timesteps) == NEW
    os.makedirs(run.run_dir)
    (tmp_path / "suite" / "pong" / "seed-0" / "config.json").write_text("{}")
    assert run_state(run, s.timesteps) == UNFINISHED
    assert command(s, run)[4:] == [f"--resume={run.run_dir}", "--timesteps=1600"]
    mine = suite(tmp_path, run_flags=("--threads=1",))
    assert "--threads=2" not in command(mine, run, threads=2)


def test_a_run_is_finished_when_its_last_checkpoint_ended_it_at_the_budget(tmp_path):
    s = suite(tmp_path)
    run = s.runs()[0]
    step = os.path.join(run.run_dir, "checkpoints", "step-000000001600")
    os.makedirs(step)
    (tmp_path / "suite" / "pong" / "seed-0" / "config.json").write_text("{}")
    with open(os.path.join(step, "manifest.json"), "w") as f:
        json.dump({"finished": False}, f)
    assert run_state(run, s.timesteps) == UNFINISHED  # stopped at its last step's work
    with open(os.path.join(step, "manifest.json"), "w") as f:
        json.dump({"finished": True}, f)
    assert run_state(run, s.timesteps) == FINISHED
    assert run_state(run, 3_200) == UNFINISHED  # a larger budget: it goes on


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    logdir = tmp_path / "suite"
    for argv, message in [
            (["--games", "pongg", "--timesteps", "60k"], "--games: unknown game 'pongg'"),
            (["--games", "pong", "--timesteps", "60k", "--parallel", "64"],
             "--parallel: 64 runs at a time need a core each"),
            (["--games", "pong", "--timesteps", "60k", "--", "--wrokers=2"],
             "RUN FLAGS: unrecognized arguments: --wrokers=2"),
            (["--games", "pong", "--timesteps", "60k", "--seeds", "0"],
             "--seeds: must be 1 or more"),
            (["--games", "pong", "--timesteps", "ten"], "--timesteps"),
            (["--games", "pong", "--timesteps", "1k"], "--timesteps: 1,000 steps end before "
             "training starts, after the --prepopulate warm-up of 50,000 steps"),
            (["--games", "pong", "--timesteps", "60k", "--cpus-per-run", "2"],
             "--backend: --ray-address, --cpus-per-run and --gpus-per-run are for --backend "
             "ray"),
            (["--games", "pong", "--timesteps", "60k", "--interval", "0"],
             "--interval: must be more than 0 seconds"),
            (["--games", "pong", "--timesteps", "60k", "--gpus-per-run", "1"],
             "--backend: --ray-address, --cpus-per-run and --gpus-per-run are for --backend "
             "ray"),
            (["--games", "pong", "--timesteps", "60k", "--backend", "ray", "--ray-address",
              "127.0.0.1:9"], "--ray-address: nothing answers at"),
            (["--games", "pong", "--timesteps", "60k", "--backend", "ray", "--parallel", "2"],
             "--parallel: is for --backend local"),
            (["--games", "pong", "--timesteps", "60k", "--preset", "nosuch"],
             "argument --preset: invalid choice: 'nosuch'"),
            (["--games", "pong", "--timesteps", "60k", "--preset", "DOPAMINE"],
             "argument --preset: invalid choice: 'DOPAMINE'"),
            (["--games", "pong", "--timesteps", "60k", "--seeds", "100000000"],
             "--seeds: 100,000,000 seeds is more than the 1,000 a suite takes"),
            (["--games", "pong", "--timesteps", "60k", "--backend", "ray", "--gpus-per-run",
              "nan"], "argument --gpus-per-run: 'nan' is not a finite number"),
            (["--games", "pong", "--timesteps", "60k", "--backend", "ray", "--gpus-per-run",
              "inf"], "argument --gpus-per-run: 'inf' is not a finite number"),
            (["--games", "pong", "--timesteps", "60k", "--backend", "ray", "--cpus-per-run",
              "inf"], "argument --cpus-per-run: 'inf' is not a whole number"),
            (["--games", "pong", "--timesteps", "60k", "--backend", "ray", "--cpus-per-run",
              "nan"], "argument --cpus-per-run: 'nan' is not a whole number"),
            (["--games", "pong", "--timesteps", "60k", "--interval", "nan"],
             "argument --interval: 'nan' is not a finite number"),
            (["--games", "pong", "--timesteps", "60k", "--", "--help"],
             "RUN FLAGS: --help is not a run flag; run `fast-dqn fast --help` on its own"),
            (["--games", "pong", "--timesteps", "60k", "--", "--workers=2", "-h"],
             "RUN FLAGS: -h is not a run flag; run `fast-dqn fast --help` on its own"),
            (["--games", "pong", "--timesteps", "60k", "--loop", "nature", "--",
              "--version"], "RUN FLAGS: --version is not a run flag; run `fast-dqn nature "
             "--version` on its own")]:
        parsing = argv[-1] in ("ten", "nosuch", "DOPAMINE", "nan", "inf")
        with pytest.raises(SystemExit) if parsing else _no_exit() as exited:
            code = suite_main(["--logdir", str(logdir)] + argv, prog="fast-dqn suite")
        out, err = capsys.readouterr()
        if exited:
            code = exited.value.code
        assert code == 2, argv
        assert len(err.strip().splitlines()) == 1 and message in err, err
        assert err.startswith("fast-dqn suite: error: ")
        assert not out  # no usage or version under another name
        assert not logdir.exists()


class _no_exit:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# --- the table

def test_the_table_reads_each_runs_progress_line_and_episodes(tmp_path):
    from fast_dqn.suite.table import parse_duration, read_row, render, suite_eta
    assert [parse_duration(t) for t in ("1d03h", "2h53m", "4m10s", "?")] == \
        [97_200, 10_380, 250, None]
    s = suite(tmp_path)
    running, queued = s.runs()[0], s.runs()[1]
    os.makedirs(running.run_dir)
    with open(running.log, "w") as log:
        log.write("step 800/1,600 (50.0%) | training | 100 steps/s | eps 0.5 | games 3 | "
                  "mean100 -20.00 | loss 0.01 | ETA 0h13m\n\rnoise\n")
    with open(os.path.join(running.run_dir, "episodes.csv"), "w") as f:
        f.write("episode,agent_step,length,return,mean_100,epsilon,hours\n"
                "1,700,700,-20.0,-20.5,0.5,0.1\n2,790,90,-2")  # a row being written
    row = read_row(running, s.timesteps, {running.name})
    assert (row.state, row.step, row.mean_100, row.phase, row.eta, row.rate) == \
        ("running", 800, -20.5, "training", 780, 100)
    waiting = read_row(queued, s.timesteps, {running.name})
    assert (waiting.state, waiting.step, waiting.mean_100) == ("queued", 0, None)
    # The running run's own ETA, then the queued one at the runs' rate, over one lane.
    assert suite_eta([row, waiting], s.timesteps, parallel=1) == (780 + 1_600 / 100, True)
    lines = render([row, waiting], s.timesteps, parallel=2)
    assert "800/1,600" in lines[1] and "-20.50" in lines[1] and "0h13m" in lines[1]
    assert " 100 " in lines[1] and "100" not in lines[2].replace("1,600", "")
    # Two lanes: the work left, 780 + 16 s, spread over them, but not before the running run
    # ends.
    assert lines[-1] == "suite: 0 of 2 finished, 1 running; 100 agent steps/s in all; ETA 0h13m"
    assert suite_eta([row, waiting], s.timesteps, parallel=2) == (780, True)
    # The suite's rate adds up its running runs' rates; a finished run's last rate is not
    # counted, nor a run whose line shows none yet.
    from fast_dqn.suite.table import RunRow, suite_rate
    other = RunRow(queued, "running", rate=250)
    done = RunRow(queued, "finished", rate=400)
    assert suite_rate([row, other, done, waiting]) == 350
    assert suite_rate([waiting, done]) is None
    assert render([waiting], s.timesteps, parallel=2)[-1] == \
        "suite: 0 of 1 finished, 0 running; ETA ?"


def test_the_suite_eta_is_known_as_soon_as_a_running_run_shows_one(tmp_path):
    """Issue 54: a row showed an ETA while the suite's line said 'ETA ?'."""
    from fast_dqn.suite.table import RunRow, render, suite_eta
    s = suite(tmp_path)
    first, second = s.runs()[0], s.runs()[1]
    waiting = RunRow(second, "queued")
    # An evaluating run shows no rate, a catching-up run's phase is not "training": either way
    # the run's own ETA is known, and so is the suite's, when nothing else is left.
    evaluating = RunRow(first, "running", step=1_600, phase="evaluating game 2 of 3", eta=600)
    assert suite_eta([evaluating], s.timesteps, parallel=1) == (600, True)
    assert render([evaluating], s.timesteps, 1)[-1] == \
        "suite: 0 of 1 finished, 1 running; ETA 0h10m"
    # With a queued run and no training rate yet: a lower bound, said to be one.
    assert suite_eta([evaluating, waiting], s.timesteps, parallel=1) == (600, False)
    assert render([evaluating, waiting], s.timesteps, 1)[-1] == \
        "suite: 0 of 2 finished, 1 running; ETA at least 0h10m"
    # Catching up's rate (slower than training's) estimates the queued run: 1,600 / 80 s.
    catching = RunRow(first, "running", step=800, rate=80, eta=900,
                      phase="catching up on 40 deferred minibatches, one with each due")
    assert suite_eta([catching, waiting], s.timesteps, parallel=1) == (900 + 20, True)
    # A warm-up's rate is not a training rate; its ETA is '?' until training is measured.
    warming = RunRow(first, "running", step=100, rate=5_000, phase="warm-up")
    assert suite_eta([warming, waiting], s.timesteps, parallel=1) == (None, False)
    # A finished run's last training rate still estimates the runs left.
    done = RunRow(second, "finished", step=1_600, rate=200, phase="training", eta=0)
    assert suite_eta([done, warming], s.timesteps, parallel=1) == (1_500 / 200, True)
    assert suite_eta([done], s.timesteps, parallel=1) == (0, True)


# --- the score of a suite, by hand

def write_suite_run(root, game, seed, values, steps=None, preset="dopamine"):
    """A finished run of `game`: its games' returns `values`, ending at `steps`."""
    path = os.path.join(root, game, f"seed-{seed}")
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"loop": "fast", "game": game, "seed": seed, "preset": preset}, f)
    steps = steps or [1_000 * (n + 1) for n in range(len(values))]
    with open(os.path.join(path, "episodes.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["episode", "agent_step", "length", "return", "mean_100", "epsilon",
                      "hours"])
        for n, (step, value) in enumerate(zip(steps, values), 1):
            out.writerow([n, step, 100, value, value, 0.1, step / 1e6])
    return path


def human(game, fraction):
    """The raw score that normalizes to `fraction` in `game`."""
    from fast_dqn.tools.atari_scores import SCORES
    random, best = SCORES[game]
    return random + fraction * (best - random)


def scored_suite(tmp_path):
    """Three games with human scores, two seeds each, and one game without them."""
    root = tmp_path / "scored"
    os.makedirs(root)
    (root / "suite.json").write_text(json.dumps({"format": 1, "loop": "fast",
                                                 "preset": "dopamine", "run_flags": []}))
    fractions = {("pong", 0): 0.2, ("pong", 1): 0.6, ("breakout", 0): 1.5,
                 ("breakout", 1): 0.1, ("space_invaders", 0): 0.0, ("space_invaders", 1): 0.4}
    for (game, seed), fraction in fractions.items():
        write_suite_run(root, game, seed, [human(game, fraction)] * 3)
    write_suite_run(root, "air_raid", 0, [500.0] * 3)
    return root, fractions


def test_a_suites_aggregates_are_the_hand_computed_ones(tmp_path):
    from fast_dqn.tools import suite_scores
    root, fractions = scored_suite(tmp_path)
    runs = suite_scores.suite_runs(str(root))
    assert [os.path.relpath(r, root) for r in runs] == [
        "air_raid/seed-0", "breakout/seed-0", "breakout/seed-1", "pong/seed-0", "pong/seed-1",
        "space_invaders/seed-0", "space_invaders/seed-1"]
    notes = []
    span, raw = suite_scores.suite_scores(runs, notes=notes)
    human_scores = suite_scores.normalized(raw, notes)
    assert span == (3_000, 3_000) and notes == ["air_raid has no human score: left out of the "
                                       "aggregates"]
    assert {g: pytest.approx(v) for g, v in human_scores.items()} == {
        "breakout": [1.5, 0.1], "pong": [0.2, 0.6], "space_invaders": [0.0, 0.4]}
    stats = suite_scores.aggregates(human_scores, reps=8_000)
    # By hand: the six scores sorted are 0.0, 0.1, 0.2, 0.4, 0.6, 1.5; the IQM cuts one at
    # each end (int(6 / 4)) and averages 0.1, 0.2, 0.4, 0.6.
    assert stats["IQM"][0] == pytest.approx(1.3 / 4)
    # Game means: breakout 0.8, pong 0.4, space_invaders 0.2.
    assert stats["median"][0] == pytest.approx(0.4)
    assert stats["mean"][0] == pytest.approx(1.4 / 3)
    # Shortfalls below 1: 1.0, 0.9, 0.8, 0.6, 0.4 and none for 1.5, over six runs.
    assert stats["optimality gap"][0] == pytest.approx(3.7 / 6)
    # The intervals: each game's two runs resampled, so 4^3 = 64 equally likely draws. Their
    # statistics, sorted, are the whole bootstrap distribution, in steps of 1/64 = 1.5625%:
    # its 2.5th percentile is the 2nd value (the 1st holds only 1.5625%), its 97.5th the
    # 63rd (the first 62 hold 96.875%). 8,000 resamples land on them: their fractions are
    # within 0.2% of the exact ones.
    from fast_dqn.tools.aggregate import SUITE_AGGREGATES
    pairs = [itertools.product(runs, repeat=2) for runs in ([1.5, 0.1], [0.2, 0.6],
                                                            [0.0, 0.4])]
    draws = list(itertools.product(*pairs))
    assert len(draws) == 64
    for name, statistic in SUITE_AGGREGATES.items():
        games = [[np.array(g) for g in draw] for draw in draws]
        values = [statistic(g) if getattr(statistic, "per_game", False)
                  else statistic(np.concatenate(g)) for g in games]
        values = sorted(values)
        assert stats[name][1] == pytest.approx(values[1]), name
        assert stats[name][2] == pytest.approx(values[62]), name


def test_the_performance_profile_is_the_fraction_of_runs_above_each_threshold():
    from fast_dqn.tools.suite_scores import performance_profile
    profile, low, high = performance_profile({"a": [0.5, 1.5], "b": [2.0]}, [0.0, 1.0, 3.0],
                                             reps=200)
    # Above 0: all; above 1: half of a's runs and all of b's, averaged over the two games.
    np.testing.assert_allclose(profile, [1.0, 0.75, 0.0])
    assert low[0] == high[0] == 1.0 and low[1] <= 0.5 and high[1] >= 1.0


def test_plot_scores_a_suite_with_its_table_and_profile(tmp_path, capsys):
    from fast_dqn.tools.plot import main
    root, _ = scored_suite(tmp_path)
    image = tmp_path / "profile.png"
    assert main([str(root), "--aggregate", "-o", str(image)]) == 0
    out = capsys.readouterr().out
    assert image.stat().st_size > 10_000
    assert "scored fast dopamine: 7 runs of 4 games, each scored at its latest score " \
        "(agent steps 3,000)" in out
    assert "| IQM | 0.325 |" in out and "| median | 0.400 |" in out
    assert "| optimality gap | 0.617 |" in out
    assert "| air_raid | 1 | 500.00 | - | - | - | - | - | no whole iteration yet |" in out
    assert "note: air_raid has no human score" in out
    assert main([str(root), "-o", str(image)]) == 2  # a suite is scored, not drawn
    assert "a suite's directory is scored with --aggregate" in capsys.readouterr().err


def test_a_damaged_run_of_a_suite_is_named_and_left_out_of_its_score(tmp_path, capsys):
    """A run's config.json damaged ({oops), another's episodes.csv: each named in a note with
    its file and not scored, never half a table and a TypeError."""
    from fast_dqn.tools.plot import main
    root, _ = scored_suite(tmp_path)
    (root / "pong" / "seed-0" / "config.json").write_text("{oops")
    (root / "breakout" / "seed-1" / "episodes.csv").write_bytes(b"\xff\xfe\x00")
    assert main([str(root), "--aggregate", "-o", str(tmp_path / "p.png")]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    run = root / "pong" / "seed-0"
    assert f"note: '{run}' is left out: {run / 'config.json'} is damaged (not JSON: " in out
    run = root / "breakout" / "seed-1"
    assert f"note: '{run}' is left out: {run / 'episodes.csv'} is damaged (not text); put " \
        "back the file the run wrote, or move the run out of the suite" in out
    assert "| pong | 1 | " in out and "| breakout | 1 | " in out  # their other seeds are scored


EPISODES_HEADER = b"episode,agent_step,length,return,mean_100,epsilon,hours\n"


@pytest.mark.parametrize("name,content,why", [
    ("config.json", b"{oops", "is damaged (not JSON: "),
    ("config.json", b'{"loop": "fast"}', "does not say its game (damaged or edited)"),
    ("episodes.csv", b"\xff\xfe\x00", "is damaged (not text)"),
    ("episodes.csv", b"", "is damaged (empty)"),
    ("episodes.csv", b"garbage\n1,2\n", "it has no agent_step column"),
    ("episodes.csv", EPISODES_HEADER + b"1,x,3,4,5,6,7\n", "no line of it is a row of numbers"),
    ("eval.csv", b"agent_step,mean\n\x00,\x01\n", "no line of it is a row of numbers"),
])
def test_a_suite_of_damaged_runs_names_the_first_with_its_file_and_the_fix(tmp_path, capsys,
                                                                          name, content, why):
    """Said "no run has a finished game yet" of a suite whose scored run was damaged."""
    from fast_dqn.tools.plot import main
    root = tmp_path / "s"
    os.makedirs(root)
    (root / "suite.json").write_text(json.dumps({"format": 1, "loop": "fast",
                                                 "preset": "dopamine", "run_flags": []}))
    run = write_suite_run(root, "pong", 0, [human("pong", 0.3)] * 3)
    write_suite_run(root, "pong", 1, [])  # no game finished yet: not damaged
    with open(os.path.join(run, name), "wb") as f:
        f.write(content)
    image = tmp_path / "p.png"
    assert main([str(root), "--aggregate", "-o", str(image)]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and not out and not image.exists(), err
    assert lines[0].startswith(f"python -m fast_dqn.tools.plot: error: RUN_DIR: '{root}': no "
                               f"run can be scored: {os.path.join(run, name)} ")
    assert why in lines[0]
    assert lines[0].endswith(f"; put back the file the run wrote, or move '{run}' out of "
                             f"'{root}' to score the suite without it")


def test_each_game_is_judged_against_dopamine_at_the_last_whole_iteration(tmp_path):
    from fast_dqn.tools.suite_scores import dopamine_rows
    root = tmp_path / "s"
    # Breakout: a whole first iteration (games to 250k) averaging 1.65, inside Dopamine's
    # 1.57-1.70; the second iteration is not reached.
    runs = [write_suite_run(root, "breakout", seed, [1.6, 1.7],
                            steps=[100_000, 250_000 + seed]) for seed in (0, 1)]
    rows = dopamine_rows(runs)
    game, count, iteration, ours, theirs, (low, high), inside = rows[0]
    assert (game, count, iteration, inside) == ("breakout", 2, 0, "2 of 2")
    # Dopamine's iteration 0 (reference_data/dopamine/breakout.csv's first row).
    assert ours == pytest.approx(1.65) and (low, high) == (1.5711, 1.6993)
    assert theirs == pytest.approx(np.mean([1.5711, 1.6510, 1.6471, 1.6358, 1.6993]))
    write_suite_run(root, "boxing", 0, [1.0])
    assert dopamine_rows([str(root / "boxing" / "seed-0")])[0][-1] == "no whole iteration yet"


# --- the lanes, with a stand-in for the training command

def stand_in(monkeypatch, tmp_path, code):
    """Each run's command becomes `python -c code`, counting its attempts in a file."""
    import sys

    from fast_dqn.suite import local_runs
    counts = tmp_path / "attempts.txt"

    def fake(suite, run, threads=None):
        return [sys.executable, "-c", f"open({str(counts)!r}, 'a').write({run.name!r} + '\\n')"
                f"\n{code}"]
    monkeypatch.setattr(local_runs, "command", fake)
    return counts


def test_a_failed_run_is_retried_once_then_named(tmp_path, monkeypatch):
    import threading

    from fast_dqn.suite.local_runs import Lanes
    counts = stand_in(monkeypatch, tmp_path, "print('ValueError: the cause'); raise SystemExit(3)")
    s = suite(tmp_path)
    told = []
    outcomes = Lanes(s, s.runs()[:2], 2, 1, dict(os.environ), threading.Event(),
                     told.append).run()
    assert sorted(counts.read_text().split()) == ["pong/seed-0"] * 2 + ["pong/seed-1"] * 2
    for outcome in outcomes.values():
        assert (outcome.state, outcome.status, outcome.last_line) == \
            ("failed", 3, "ValueError: the cause")
    assert sum("retrying once from its last checkpoint" in line for line in told) == 2


def test_a_stop_signals_each_running_run_once_and_starts_no_other(tmp_path, monkeypatch):
    import threading
    import time

    from fast_dqn.suite.local_runs import Lanes
    counts = stand_in(monkeypatch, tmp_path, "import time; time.sleep(60)")
    s = suite(tmp_path)
    stopping = threading.Event()
    lanes = Lanes(s, s.runs(), 2, 1, dict(os.environ), stopping, lambda line: None)
    result = {}
    thread = threading.Thread(target=lambda: result.update(lanes.run()))
    thread.start()
    deadline = time.monotonic() + 30
    while len(lanes.running()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    stopping.set()
    thread.join(30)
    assert not thread.is_alive()
    assert not counts.exists() or len(counts.read_text().split()) <= 2
    # The two running were started; the other two never were (no command in a log).
    assert sum(os.path.exists(run.log) for run in s.runs()) == 2
    assert {o.state for o in result.values()} == {"stopped"} and len(result) == 2


def test_a_second_suite_on_the_same_directory_is_refused(tmp_path, capsys):
    import fcntl
    logdir = tmp_path / "suite"
    os.makedirs(logdir)
    with open(logdir / "suite.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("process 4242 on elsewhere")
        held.flush()
        code = suite_main(["--logdir", str(logdir), "--games", "pong", "--timesteps", "60k"],
                          prog="fast-dqn suite")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"--logdir: {logdir} is in use by process 4242 on elsewhere: one suite at a time" in err
    assert os.listdir(logdir) == ["suite.lock"]


def test_a_read_only_disk_is_a_refusal_with_its_own_fix(tmp_path, capsys, monkeypatch):
    """suite.lock cannot be opened on a read-only file system: one line, exit 2, and no
    advice to free space."""
    import builtins
    import errno

    import fast_dqn.suite.cli as suite_cli
    logdir = tmp_path / "suite"

    def read_only(path, *args, **kwargs):
        if str(path).endswith("suite.lock"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return builtins.open(path, *args, **kwargs)
    monkeypatch.setattr(suite_cli, "open", read_only, raising=False)
    code = suite_main(["--logdir", str(logdir), "--games", "pong", "--timesteps", "60k"],
                      prog="fast-dqn suite")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.strip() == (f"fast-dqn suite: error: --logdir: cannot write {logdir}/suite.lock "
                           "(Read-only file system); the file system is mounted read-only: "
                           "give a path on a writable disk")


def finished_checkpoint(run, step, finished=True):
    """A run directory with one checkpoint at `step`, as run_state and the groups read it."""
    path = os.path.join(run.run_dir, "checkpoints", f"step-{step:012d}")
    os.makedirs(path)
    with open(os.path.join(run.run_dir, "config.json"), "w") as f:
        f.write("{}")
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump({"finished": finished}, f)


def test_runs_are_grouped_by_the_agent_step_they_go_on_from(tmp_path):
    from fast_dqn.suite.plan import form_groups
    s = suite(tmp_path, seeds=(0, 1, 2))
    runs = s.runs()  # pong 0-2, breakout 0-2
    finished_checkpoint(runs[1], 800, finished=False)
    finished_checkpoint(runs[4], 800, finished=False)
    groups = form_groups(runs, 2, s.timesteps)
    assert [[r.name for r in g] for g in groups] == [
        ["pong/seed-0", "pong/seed-2"], ["breakout/seed-0", "breakout/seed-2"],
        ["pong/seed-1", "breakout/seed-1"]]
    assert [len(g) for g in form_groups(runs, 4, s.timesteps)] == [4, 2]


def test_a_group_is_one_command_of_each_runs_own_flags(tmp_path):
    import shlex

    from fast_dqn.suite.plan import group_command
    s = suite(tmp_path, preset="dopamine")
    runs = s.runs()[:2]
    argv = group_command(s, runs, threads=2)
    assert argv[1:4] == ["-m", "fast_dqn", "group"]
    assert [shlex.split(flag.removeprefix("--run=")) for flag in argv[4:]] == \
        [command(s, run, threads=2)[4:] for run in runs]


def test_a_groups_runs_are_judged_by_their_own_files_and_the_unfinished_retried(
        tmp_path, monkeypatch):
    """The group exits 1: its run that finished is finished, the other is retried once."""
    import sys
    import threading

    from fast_dqn.suite import local_runs
    counts = stand_in(monkeypatch, tmp_path, "raise SystemExit(1)")
    s = suite(tmp_path, games=("pong",))
    done = s.runs()[0]

    def fake_group(suite, runs, threads=None):
        step = os.path.join(done.run_dir, "checkpoints", f"step-{s.timesteps:012d}")
        return [sys.executable, "-c", f"open({str(counts)!r}, 'a').write('group\\n')\n"
                f"import json, os; os.makedirs({step!r}, exist_ok=True)\n"
                f"open(os.path.join({done.run_dir!r}, 'config.json'), 'w').write('{{}}')\n"
                f"json.dump({{'finished': True}}, open(os.path.join({step!r}, "
                "'manifest.json'), 'w'))\nraise SystemExit(1)"]
    monkeypatch.setattr(local_runs, "group_command", fake_group)
    told = []
    outcomes = local_runs.Lanes(s, s.runs(), 1, 1, dict(os.environ), threading.Event(),
                                told.append, runs_per_process=2).run()
    assert counts.read_text().split() == ["group", "pong/seed-1"]
    assert outcomes["pong/seed-0"].state == "finished"
    assert outcomes["pong/seed-1"].state == "failed"
    assert any("a group of 2 in one process" in line for line in told)
    assert os.path.exists(f"{done.run_dir}.group.log")


def test_a_group_needs_the_ram_for_all_its_replays():
    check_parallel(1, runs=4, cores=2, replay_bytes=2**30, available_bytes=10 * 2**30,
                   runs_per_process=4)
    with pytest.raises(ConfigError, match=r"a group of 4 runs needs 12.0 GiB .* give "
                       "--runs-per-process 3 or fewer"):
        check_parallel(1, runs=4, cores=2, replay_bytes=3 * 2**30,
                       available_bytes=10 * 2**30, runs_per_process=4)


@pytest.mark.parametrize("args,env,says", [
    (["--runs-per-process=2"], "tensorflow", "KERAS_BACKEND=jax"),
    (["--runs-per-process=2", "--loop=nature"], "jax", "--loop nature"),
    (["--runs-per-process=2", "--backend=ray"], "tensorflow", "KERAS_BACKEND=jax"),
    (["--runs-per-process=2", "--", "--no-concurrent"], "jax", "lockstep"),
    (["--runs-per-process=0"], "jax", "must be 1 or more"),
])
def test_groups_the_suite_cannot_run_are_refused_in_one_line(tmp_path, capsys, monkeypatch,
                                                             args, env, says):
    monkeypatch.setenv("KERAS_BACKEND", env)
    flags = ["--games=pong", "--timesteps=100k", f"--logdir={tmp_path / 's'}"]
    if "--" not in args:
        args = args + ["--"]
    assert suite_main(flags + args + ["--prepopulate=1000", "--replay-capacity=2000"]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and ("--runs-per-process" in err or "--no-concurrent" in err), err
    assert len(err.splitlines()) == 1
    assert not os.path.exists(tmp_path / "s")
