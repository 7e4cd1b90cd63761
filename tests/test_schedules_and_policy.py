import numpy as np
import pytest

from fast_dqn.policy import epsilon_greedy, select_action
from fast_dqn.schedules import LinearSchedule


def test_linear_schedule_nature_values():
    eps = LinearSchedule(1.0, 0.1, 1_000_000)
    assert eps(0) == 1.0
    assert eps(500_000) == pytest.approx(0.55)
    assert eps(1_000_000) == pytest.approx(0.1)
    assert eps(50_000_000) == pytest.approx(0.1)


def test_epsilon_zero_is_greedy_and_one_is_uniform():
    rng = np.random.default_rng(0)
    q = np.array([[0.0, 5.0, 1.0]] * 3000)
    assert set(epsilon_greedy(q, 0.0, rng)) == {1}
    counts = np.bincount(epsilon_greedy(q, 1.0, rng), minlength=3)
    assert counts.min() > 900  # about 1000 each


def test_select_action_skips_the_network_when_exploring():
    calls = []

    def q_fn(states):
        calls.append(states.shape)
        return np.array([[0.0, 1.0]])

    rng = np.random.default_rng(0)
    for _ in range(50):
        select_action(np.zeros((4, 2)), 1.0, q_fn, 2, rng)
    assert calls == []
    assert select_action(np.zeros((4, 2)), 0.0, q_fn, 2, rng) == 1
    assert calls == [(1, 4, 2)]


def test_select_action_consumes_the_same_randomness_either_way():
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    select_action(np.zeros(1), 1.0, None, 4, a)
    select_action(np.zeros(1), 0.0, lambda s: np.zeros((1, 4)), 4, b)
    assert a.random() == b.random()
