"""ε-greedy (fast_dqn.agent.policy): ε = 0 is greedy and 1 uniform, only the greedy rows reach
the network, in one call, and the same randomness is drawn whether it is called or not."""

import numpy as np

from fast_dqn.agent.policy import epsilon_greedy_rows, select_action


class RecordingQ:
    """Q-values that prefer action 1; records the batch size of every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, states):
        self.calls.append(len(states))
        return np.tile([0.0, 5.0, 1.0], (len(states), 1))


def test_epsilon_zero_is_greedy_and_one_is_uniform():
    rng, q = np.random.default_rng(0), RecordingQ()
    states = np.zeros((3000, 2))
    assert set(epsilon_greedy_rows(states, 0.0, q, 3, rng)) == {1} and q.calls == [3000]
    counts = np.bincount(epsilon_greedy_rows(states, 1.0, q, 3, rng), minlength=3)
    assert counts.min() > 900 and q.calls == [3000]  # all explored: no call at all


def test_only_greedy_rows_reach_the_network_in_one_call():
    q = RecordingQ()
    eps = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    actions = epsilon_greedy_rows(np.zeros((5, 2)), eps, q, 3, np.random.default_rng(1))
    assert q.calls == [3] and list(actions[[1, 3, 4]]) == [1, 1, 1]


def test_batched_and_per_row_queries_choose_the_same_actions():
    eps = np.linspace(0, 1, 64)
    a = epsilon_greedy_rows(np.zeros((64, 2)), eps, RecordingQ(), 3, np.random.default_rng(3))
    per_row = RecordingQ()
    b = epsilon_greedy_rows(np.zeros((64, 2)), eps, per_row, 3, np.random.default_rng(3),
                            batched=False)
    assert np.array_equal(a, b) and set(per_row.calls) == {1}


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
