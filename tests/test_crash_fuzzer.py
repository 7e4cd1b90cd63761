"""A fixed handful of benchmarks/crash_fuzzer.py's trials: real runs stopped by signals at
random moments or the instant a file appears, and resumed until they finish (one from before
its first checkpoint, one with a lowered budget, one with logs damaged between runs, two with
a run file's value edited, one with evaluate and plot beside it), then checked as the fuzzer
checks them. The 100+ random trials are run with the script itself (see docs/reliability.md)."""


import os

import pytest

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers

from benchmarks import crash_fuzzer as fuzzer

TRIALS = [
    # The reported failure: Ctrl-C mid-period without --save-replay, then resume.
    # evaluate and plot run beside it all along, and before the resume a value of the
    # checkpoint's state.json is replaced: that resume refuses in one line, changing nothing.
    fuzzer.Trial(1, "cartpole", "fast", "python", False, 800, [("SIGINT", 0.5)], beside=True,
                 edit=(1, "state.json")),
    # kill -9, then a clean stop: the logs must equal an uninterrupted run's.
    fuzzer.Trial(2, "pong", "fast", "python", True, 96, [("SIGKILL", 0.5), ("SIGINT", 0.3)]),
    # Games that cannot be saved, no replay: the Nature loop and the vector backend.
    fuzzer.Trial(3, "pong", "nature", "python", False, 96, [("SIGTERM", 0.4)]),
    fuzzer.Trial(4, "pong", "fast", "vector", False, 800, [("SIGTERM", 0.6), ("SIGKILL", 0.2)]),
    # kill -9 the instant config.json appears (none is periodic), then --resume: it starts
    # again from step 0 with the saved settings, and logs what a straight run logs.
    fuzzer.Trial(6, "cartpole", "nature", "python", True, 96, [("SIGKILL", 0.3)],
                 checkpoint_freq=100_000, on_disk="config.json"),
    # Ctrl-C mid-period on the fast loop, the instant its first checkpoint is begun, resumed
    # with --timesteps a tenth of the way from the checkpoint to the budget, off a multiple
    # of the workers: the period's minibatches past the new end are taken back, and the logs
    # equal a straight run's with that budget.
    fuzzer.Trial(7, "cartpole", "fast", "python", True, 800, [("SIGINT", 0.5)],
                 cut=(1, 0.1, True), on_disk=".partial-"),
    # The budget cut at the first resume, then Ctrl-C: the second resume gives no
    # --timesteps, goes on to the cut budget its checkpoint recorded, and says so.
    fuzzer.Trial(9, "cartpole", "nature", "python", True, 96, [("SIGINT", 0.4), ("SIGINT", 0.4)],
                 cut=(1, 0.8, False)),
    # eval.csv deleted and episodes.csv converted by dos2unix between runs: both rebuilt from
    # the checkpoint's copy, the converted one kept aside, and the logs as a straight run's.
    # A value of config.json replaced too: that resume refuses it first.
    fuzzer.Trial(8, "cartpole", "nature", "python", True, 96, [("SIGTERM", 0.5)],
                 damage=[(1, "delete", "eval.csv"), (1, "dos2unix", "episodes.csv")],
                 edit=(1, "config.json")),
]
# What the trial's line must show it did, or the trial did not test what it is here for.
DONE = {1: ["(evaluate->", "[state:/", "refused->2"], 6: ["SIGKILL->", "[from 0]"],
        7: ["[timesteps="], 9: ["[timesteps=", "kept"],
        8: ["delete:eval.csv,", "dos2unix:episodes.csv]", "[config:", "refused->2"]}


@pytest.mark.parametrize("trial", TRIALS, ids=lambda t: t.describe().replace(" ", "-"))
def test_a_run_stopped_at_random_moments_finishes_with_consistent_logs(tmp_path, trial):
    passed, line = fuzzer.run_trial(trial, str(tmp_path))
    assert passed, line
    for sign in DONE.get(trial.seed, []):
        assert sign in line, line


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
