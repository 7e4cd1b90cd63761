"""The minibatch schedule: the Nature count, and deferral across a refill, checked by hand
and against a step-by-step count."""

import numpy as np

from fast_dqn.loops.minibatch_schedule import MinibatchSchedule, minibatches_due


def test_minibatches_due_counts_nature_train_steps():
    # Nature trains at every step s > prepopulate with s % 4 == 0.
    brute = lambda a, b: sum(1 for s in range(a + 1, b + 1) if s > 10 and s % 4 == 0)
    for a, b in [(0, 10), (0, 12), (8, 30), (12, 13), (11, 100), (50, 50)]:
        assert minibatches_due(a, b, 10, 4) == brute(a, b)


def test_a_refill_defers_its_minibatches_and_repays_them_at_most_one_per_due_one():
    schedule = MinibatchSchedule(train_start=10, train_freq=4)
    assert schedule.take(0, 20, final=False) == 3          # steps 12, 16, 20
    schedule.refill(20, prepopulate=12, owed=3)            # replay emptied at step 20
    # Due at 24, 28, 32 (in the refill: deferred) and 36, 40; with the 3 owed, 6 deferred,
    # of which 2 ride along with the 2 due after the refill.
    assert schedule.take(20, 40, final=False) == 4
    assert schedule.deferred == 4
    assert schedule.take(40, 44, final=False) == 2
    assert schedule.take(44, 60, final=True) == 4 + 3      # the last step repays the rest
    assert schedule.deferred == 0
    # 3 + 4 + 2 + 7 == the Nature count for (0, 60] plus the 3 owed when replay was lost.
    assert 3 + 4 + 2 + 7 == minibatches_due(0, 60, 10, 4) + 3


def test_nothing_trains_before_the_refill_ends_and_the_total_is_the_nature_one():
    rng = np.random.default_rng(0)
    for _ in range(200):
        train_start, freq = int(rng.integers(0, 50)), int(rng.integers(1, 5))
        total = int(rng.integers(1, 400))
        schedule = MinibatchSchedule(train_start, freq)
        step, trained, owed_lost = 0, 0, 0
        refills = sorted(rng.integers(0, total, size=rng.integers(0, 3)))
        while step < total:
            end = min(total, step + int(rng.integers(1, 40)))
            if refills and refills[0] <= step:
                refills.pop(0)
                owed = int(rng.integers(0, 5))
                owed_lost += owed
                schedule.refill(step, int(rng.integers(1, 60)), owed)
            count = schedule.take(step, end, final=end == total)
            due = minibatches_due(step, end, train_start, freq)
            if end == total:
                pass  # the last step repays whatever is left
            elif end <= schedule.refill_until:
                assert count == 0
            else:
                assert count <= 2 * due
            trained += count
            step = end
        assert trained == minibatches_due(0, total, train_start, freq) + owed_lost


def test_a_run_that_ends_before_replay_can_be_sampled_drops_its_debt_and_says_so():
    said = []
    schedule = MinibatchSchedule(train_start=0, train_freq=1, warn=said.append)
    schedule.refill(100, prepopulate=50, owed=7)
    assert schedule.take(100, 110, final=False, replay_ready=lambda: False) == 0
    assert schedule.take(110, 120, final=True, replay_ready=lambda: False) == 0
    assert said == ["27 minibatches were not trained: the run ended before replay held a "
                    "complete transition"]


def test_a_checkpoint_keeps_the_schedule_as_it_is():
    schedule = MinibatchSchedule(train_start=500, train_freq=4)
    schedule.refill(700, prepopulate=100, owed=9)
    restored = MinibatchSchedule.from_loop_state({"schedule": schedule.state_dict()}, 4)
    assert restored.state_dict() == schedule.state_dict() == {
        "train_start": 500, "refill_until": 800, "deferred": 9}
