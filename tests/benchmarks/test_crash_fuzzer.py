"""benchmarks/crash_fuzzer.py: two of its fixed trials (real runs stopped by signals at
random moments or the instant a file appears, resumed until they finish, then checked as the
fuzzer checks them), each the reproduction of a defect that was fixed; and unit tests of the
fuzzer's own checks, draws and damage, so that a trial that passes means what it says.

All eight fixed trials run with `python -m benchmarks.crash_fuzzer --fixed`, the 100+ random
ones with `--trials N --seed S` (docs/reliability-internals.md); docs/testing.md names, for
each fixed trial left out here, the tests that prove what it stops and checks."""


import os

import pytest

pytestmark = pytest.mark.faults  # stop/resume proofs: see docs/testing.md's markers

from benchmarks import crash_fuzzer as fuzzer


@pytest.mark.slow  # a real run of the script
def test_the_checks_catch_a_duplicated_episode_and_a_leftover_partial_checkpoint(tmp_path):
    trial = fuzzer.Trial(5, "cartpole", "nature", stops=[])
    passed, line = fuzzer.run_trial(trial, str(tmp_path))
    assert passed, line
    run = tmp_path / "run"
    assert fuzzer.check_run(trial, str(run)) == []
    with open(run / "episodes.csv", "a") as f:
        f.write(open(run / "episodes.csv").read().splitlines()[-1] + "\n")
    (run / "checkpoints" / ".partial-step-000000000400-1").mkdir()
    problems = fuzzer.check_run(trial, str(run))
    assert any("numbers its games" in p for p in problems)
    assert any("agent steps do not increase" in p for p in problems)
    assert any(".partial-step-000000000400-1" in p for p in problems)


def test_the_evaluation_schedule_the_checks_expect():
    assert fuzzer.expected_evaluations(fuzzer.Trial(0, "pong", "nature")) == [600, 1200]
    # The fast loop evaluates at sync points: with a period of 800 and 4 workers, at 800
    # (past 600) and at the end.
    assert fuzzer.expected_evaluations(fuzzer.Trial(0, "pong", "fast", period=800)) == \
        [800, 1200]


def test_the_damage_a_log_gets_and_the_budget_a_resume_cuts_to(tmp_path):
    log = tmp_path / "episodes.csv"
    original = b"episode,agent_step\r\n1,37\r\n2,80\r\n"
    for what, damaged in [("empty", b""), ("dos2unix", b"episode,agent_step\n1,37\n2,80\n"),
                          ("cut10", original[:-10]),
                          ("edit", b"episode,agent_step\r\n2,37\r\n2,80\r\n")]:
        log.write_bytes(original)
        assert fuzzer.damage_log(str(log), what) == f"{what}:episodes.csv"
        assert log.read_bytes() == damaged
    assert fuzzer.damage_log(str(log), "delete") == "delete:episodes.csv"
    assert not log.exists()
    assert fuzzer.damage_log(str(log), "cut10") == "cut10:episodes.csv(none)"
    trial = fuzzer.Trial(0, "cartpole", cut=(1, 0.0, False))
    assert trial.cut_budget(1200, 2400) == 1200 and trial.cut_budget(0, 2400) == 1
    trial.cut = (1, 0.5, True)
    assert trial.cut_budget(1200, 2400) == 1801 and trial.cut_budget(2400, 2400) == 2400
    # A lowered budget's schedule: the fast loop ends at whole rounds of the workers.
    assert fuzzer.final_step(trial, 1801) == 1804
    assert fuzzer.expected_evaluations(fuzzer.Trial(0, "cartpole", period=800), 1801) == \
        [800, 1600, 1804]
    # A seed draws the same trial every time.
    assert fuzzer.Trial.draw(3007) == fuzzer.Trial.draw(3007)


def test_a_stop_is_timed_by_the_games_the_new_process_logs(tmp_path):
    log = tmp_path / "episodes.csv"
    assert fuzzer.logged_step(str(log), 0) is None
    log.write_bytes(b"episode,agent_step,length\r\n")
    assert fuzzer.logged_step(str(log), 0) is None
    log.write_bytes(b"episode,agent_step,length\r\n1,37,9\r\n2,80,11\r\n")
    assert fuzzer.logged_step(str(log), 0) == 80
    # Rows a stopped run left past its checkpoint are not the new process's progress: the
    # resume cuts them, and only a log written since the segment began counts.
    since = log.stat().st_mtime + 1
    assert fuzzer.logged_step(str(log), since) is None
    os.utime(log, (since, since))
    assert fuzzer.logged_step(str(log), since) == 80
    with open(log, "ab") as f:
        f.write(b"3,1")  # a row half written: the last whole one counts
    assert fuzzer.logged_step(str(log), 0) == 80


def test_the_edits_the_fuzzer_makes_and_how_it_judges_a_refusal(tmp_path):
    import random

    from benchmarks import fuzz_attacks as attacks
    document = {"a": {"b": [1, 2.5], "c": None, "d": []}, "e": "x", "f": True}
    assert attacks.leaves(document) == [("a", "b", 0), ("a", "b", 1), ("a", "c"), ("a", "d"),
                                        ("e",), ("f",)]
    rng = random.Random(0)
    for path in attacks.leaves(document) * 5:
        edited = {"a": {"b": [1, 2.5], "c": None, "d": []}, "e": "x", "f": True}
        old, new = attacks.replace_value(edited, path, rng)
        kinds = {type(old), type(new)}
        assert new is not None and len(kinds) == 2 and not kinds <= {int, float}
    (tmp_path / "config.json").write_text("{}")
    before = attacks.snapshot(str(tmp_path))
    assert attacks.refusal_problems("config.json", 2, "x: error: config.json has ...\n",
                                    before, before) == []
    assert "not 2 with one line" in attacks.refusal_problems(
        "config.json", 0, "", before, before)[0]
    assert "does not name the edited file" in attacks.refusal_problems(
        "state.json", 2, "x: error: something else\n", before, before)[0]
    (tmp_path / "episodes.csv").write_text("episode\r\n")
    assert attacks.refusal_problems("config.json", 2, "config.json bad\n", before,
                                    attacks.snapshot(str(tmp_path))) == [
        "the refused resume changed ['episodes.csv']"]
    assert not attacks.appeared(str(tmp_path), ".partial-")
    (tmp_path / "checkpoints" / ".partial-step-000000000400-1").mkdir(parents=True)
    assert attacks.appeared(str(tmp_path), ".partial-") and \
        attacks.appeared(str(tmp_path), "config.json")


def test_the_suite_trials_are_drawn_apart_from_the_run_trials(monkeypatch, tmp_path, capsys):
    # A seed draws the run trial it always drew: the suite trials take a stream of their own.
    assert fuzzer.Trial.draw(0) == fuzzer.Trial(
        0, "pong", "nature", "python", True, 800, [("SIGKILL", 1.0568311079523967)], 400,
        None, [], "episodes.csv", False, None, None, False)
    assert not any(fuzzer.Trial.draw(seed).checkout for seed in range(200))
    # Each suite trial is reproducible by seed, and 200 draw every attack and damage.
    draws = [fuzzer.SuiteTrial.draw(seed) for seed in range(200)]
    assert draws == [fuzzer.SuiteTrial.draw(seed) for seed in range(200)]
    assert {t.attack for t in draws} == set(fuzzer.SUITE_ATTACKS)
    assert {t.damage for t in draws if t.attack.endswith(".json")} == \
        set(fuzzer.attacks.JSON_DAMAGES)
    assert {t.seeds for t in draws} == {1, 2} and all(0.1 <= t.at <= 0.9 for t in draws)
    assert all(t.stop == t.attack for t in draws if t.attack in ("SIGINT", "SIGTERM"))
    assert fuzzer.SuiteTrial.draw(6) == fuzzer.SuiteTrial(6, "config.json", 2, 0.39,
                                                          "SIGTERM", "cut", "nature")
    # The suite's command: pong by name, its flags after --, none the suite owns.
    command = draws[0].command("/s")
    assert command[:3] == ["-m", "fast_dqn", "suite"] and "--parallel=1" in command
    assert "--plain" in command and not any(f.startswith("--game=")
                                            for f in command[command.index("--"):])
    # The checkout trial is a CartPole run trial stopped once by SIGINT, from a copy.
    checkout = next(t for t in draws if t.attack == "checkout").run_trial()
    assert checkout.game == "cartpole" and checkout.checkout and len(checkout.stops) == 1
    assert checkout.stops[0][0] == "SIGINT"
    copy = fuzzer.attacks.copy_checkout(str(tmp_path))
    assert os.fsencode(copy).endswith(b"/caf\xe9co/checkout")
    assert os.path.isfile(os.path.join(copy, "fast_dqn", "__main__.py"))
    # --suites runs drawn suite trials by seed; it and --fixed exclude each other.
    ran = []
    monkeypatch.setattr(fuzzer, "run_suite_trial",
                        lambda trial, workdir: (ran.append(trial) or True, "ok"))
    assert fuzzer.main(["--suites", "--seed=5", "--trials=3", f"--keep={tmp_path}"]) == 0
    assert ran == [fuzzer.SuiteTrial.draw(seed) for seed in (5, 6, 7)]
    with pytest.raises(SystemExit):
        fuzzer.main(["--fixed", "--suites"])
    assert "--fixed and --suites" in capsys.readouterr().err


def test_a_suites_damaged_json_and_its_runs_processes(tmp_path):
    from benchmarks import fuzz_attacks as attacks
    path = tmp_path / "suite.json"
    original = b'{"loop": "fast", "runs": []}'
    for how in attacks.JSON_DAMAGES:
        path.write_bytes(original)
        assert attacks.damage_json(str(path), how) == original
        with pytest.raises(ValueError):
            import json
            json.loads(path.read_bytes().decode())
    (tmp_path / "suite.lock").write_text("process 1")
    assert list(attacks.suite_snapshot(str(tmp_path))) == ["suite.json"]
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in attacks.children(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_the_table_trials_damage_a_session_folder_and_judge_gpu_table(tmp_path, capsys):
    """--tables: one file of a real GPU session's folder damaged, then benchmarks.gpu_table
    on it; its own stream, every file and damage drawn, and the judge's rules."""
    from benchmarks import fuzz_attacks as attacks
    draws = [fuzzer.TableTrial.draw(seed) for seed in range(200)]
    assert draws == [fuzzer.TableTrial.draw(seed) for seed in range(200)]
    assert {t.file for t in draws} == set(attacks.TABLE_FILES)
    assert {t.how for t in draws} == set(attacks.TABLE_DAMAGES)
    assert fuzzer.Trial.draw(0).game == "pong"  # the run trials' stream is untouched
    # Each damage, on a small folder.
    csv = b"name,steps_per_s\r\nfast-32-on-on,4477.1\r\n"
    for how, name, damaged in [
            ("cut", "a.csv", csv[:len(csv) // 2]), ("empty", "a.csv", b""),
            ("digits", "a.csv", csv.replace(b"4477.1", b"9" * 5000)),
            ("word", "a.csv", csv.replace(b"4477.1", b"n/a")),
            ("column", "a.csv", csv.replace(b"steps_per_s", b" renamed ")),
            ("column", "learner.txt", b"| batch | renamed |\n| 32 | 1.0 |\n")]:
        (tmp_path / name).write_bytes(csv if name == "a.csv" else
                                      b"| batch | updates/s |\n| 32 | 1.0 |\n")
        attacks.damage_table_file(str(tmp_path), name, how, 0.5)
        assert (tmp_path / name).read_bytes() == damaged, how
    attacks.damage_table_file(str(tmp_path), "a.csv", "folder", 0.5)
    assert (tmp_path / "a.csv").is_dir()
    # The judge: exit 0 quietly, or 2 with one line naming the file and its rows damaged.
    line = "gpu_table: /s/speedtest.csv: row 3 has 4 of 11 fields (cut short?); ...\n"
    row = "| samplers alone, W = 64 | damaged: speedtest.csv | ≥ 15,000 |\n"
    assert attacks.table_problems("speedtest.csv", "cut", 2, row, line, {}, {}) == []
    assert attacks.table_problems("speedtest.csv", "cut", 0, "| x | 1 |\n", "", {}, {}) == []
    assert attacks.table_problems("header.txt", "binary", 2, "", line.replace(
        "speedtest.csv", "header.txt"), {}, {}) == []
    for code, out, err, how, found in [
            (1, "", "Traceback (most recent call last):\n", "cut", "not 0 or 2"),
            (2, row, line * 2, "cut", "without one line"),
            (2, "| x | 1 |\n", line, "cut", "no row of the table reads"),
            (0, row, "", "cut", "exited 0 but said"),
            (0, "| x | 1 |\n", "", "binary", "read as a file of figures"),
            (None, "", "", "cut", "hung")]:
        problems = attacks.table_problems("speedtest.csv", how, code, out, err, {}, {})
        assert any(found in p for p in problems), (found, problems)
    assert attacks.table_problems("speedtest.csv", "cut", 2, row, line, {"a": b"1"},
                                  {"a": b"2"}) == ["gpu_table changed ['a']"]
    # Real trials: each damage that must be refused, then --tables as a user runs it.
    for how in attacks.ALWAYS_REFUSED:
        for name in ("header.txt", "speedtest.csv", "episodes.csv"):
            passed, line = fuzzer.run_table_trial(fuzzer.TableTrial(0, name, how),
                                                  str(tmp_path / f"{how}-{name}"))
            assert passed and "gpu_table->2" in line, line
    assert fuzzer.main(["--tables", "--seed=0", "--trials=12"]) == 0
    assert capsys.readouterr().out.endswith("12 trials, 12 passed\n")
    with pytest.raises(SystemExit):
        fuzzer.main(["--suites", "--tables"])
    assert "--suites and --tables are two kinds of trial" in capsys.readouterr().err


def test_an_array_edit_still_verifies_and_is_put_back_whole(finished_cartpole_run, tmp_path):
    import random
    import shutil

    from benchmarks import fuzz_attacks as attacks
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    run = tmp_path / "run"
    shutil.copytree(finished_cartpole_run, run)
    newest = CheckpointStore(str(run)).latest()
    before = {p.name: p.read_bytes() for p in sorted((run / "checkpoints").rglob("*"))
              if p.is_file()}
    seen = set()
    for seed in range(30):
        note, originals = attacks.edit_value(str(run), "arrays", random.Random(seed), newest)
        what, how, where = note.split(":")
        seen.add(how)
        edited = CheckpointStore(str(run)).latest()  # the manifest was kept in step
        assert edited.path == newest.path and edited.load_state() is not None
        attacks.put_back(originals)
        assert {p.name: p.read_bytes() for p in sorted((run / "checkpoints").rglob("*"))
                if p.is_file()} == before
    # A run without best/ has no best weights to edit: every other edit is drawn.
    assert seen == set(attacks.ARRAY_EDITS) - {"best not finite"}
