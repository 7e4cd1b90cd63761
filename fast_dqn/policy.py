"""Epsilon-greedy action selection.

Both functions draw exactly two random numbers per state whatever happens, so a run's RNG
stream does not depend on which branch was taken, and seeded runs stay reproducible.
"""

import numpy as np


def epsilon_greedy(q_values, epsilon, rng):
    """Batched: greedy action of each row of q_values, uniform with probability epsilon."""
    q_values = np.asarray(q_values)
    n, num_actions = q_values.shape
    explore = rng.random(n) < epsilon
    random_actions = rng.integers(0, num_actions, size=n)
    return np.where(explore, random_actions, np.argmax(q_values, axis=1))


def select_action(state, epsilon, q_values_fn, num_actions, rng):
    """One state; calls the network only when it does not explore (it dominates step time)."""
    explore = rng.random() < epsilon
    random_action = int(rng.integers(0, num_actions))
    if explore:
        return random_action
    return int(np.argmax(q_values_fn(state[None])[0]))
