"""A fixed handful of benchmarks/crash_fuzzer.py's trials: real runs stopped by signals at
random moments and resumed until they finish, then checked as the fuzzer checks them.
The 100+ random trials are run with the script itself (see the README's Reliability)."""


import pytest

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers

from benchmarks import crash_fuzzer as fuzzer

TRIALS = [
    # The reported failure: Ctrl-C mid-period without --save-replay, then resume.
    fuzzer.Trial(1, "cartpole", "fast", "python", False, 800, [("SIGINT", 0.5)]),
    # kill -9, then a clean stop: the logs must equal an uninterrupted run's.
    fuzzer.Trial(2, "pong", "fast", "python", True, 96, [("SIGKILL", 0.5), ("SIGINT", 0.3)]),
    # Games that cannot be saved, no replay: the Nature loop and the vector backend.
    fuzzer.Trial(3, "pong", "nature", "python", False, 96, [("SIGTERM", 0.4)]),
    fuzzer.Trial(4, "pong", "fast", "vector", False, 800, [("SIGTERM", 0.6), ("SIGKILL", 0.2)]),
]


@pytest.mark.parametrize("trial", TRIALS, ids=lambda t: t.describe().replace(" ", "-"))
def test_a_run_stopped_at_random_moments_finishes_with_consistent_logs(tmp_path, trial):
    passed, line = fuzzer.run_trial(trial, str(tmp_path))
    assert passed, line


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
