"""Epsilon-greedy action selection.

Both functions draw exactly two random numbers per state whatever happens, so a run's RNG
stream does not depend on which branch was taken, and seeded runs stay reproducible.
"""

import numpy as np


def epsilon_greedy_rows(states, epsilon, q_values_fn, num_actions, rng, batched=True):
    """Batched and lazy: only the rows that act greedily go through the network.

    epsilon may differ per row. batched=True makes at most one q_values_fn call with all the
    greedy rows (a synchronized round); batched=False makes one call per greedy row. The
    random draws do not depend on which rows explore, so both settings give the same actions.
    """
    n = len(states)
    explore = rng.random(n) < epsilon
    actions = rng.integers(0, num_actions, size=n)
    greedy = np.flatnonzero(~explore)
    if len(greedy) == 0:
        return actions
    if batched:
        actions[greedy] = np.argmax(q_values_fn(states[greedy]), axis=1)
    else:
        for j in greedy:
            actions[j] = int(np.argmax(q_values_fn(states[j:j + 1])[0]))
    return actions


def select_action(state, epsilon, q_values_fn, num_actions, rng):
    """One state; calls the network only when it does not explore (it dominates step time)."""
    explore = rng.random() < epsilon
    random_action = int(rng.integers(0, num_actions))
    if explore:
        return random_action
    return int(np.argmax(q_values_fn(state[None])[0]))
