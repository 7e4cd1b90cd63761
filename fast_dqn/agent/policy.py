"""Epsilon-greedy action selection.

Both functions draw exactly two random numbers per state whatever happens, so a run's RNG
stream does not depend on which branch was taken, and seeded runs stay reproducible.
"""

import numpy as np


def epsilon_greedy_rows(states, epsilon, q_values_fn, num_actions, rng, batched=True):
    """Epsilon-greedy actions for a batch of states, one per row.

    Only the greedy rows go through the network, in one q_values_fn call (batched) or one each;
    the draws do not depend on which rows explore, so both give the same actions.

    Args:
        states: the states, one per row (an array whose first axis is the row).
        epsilon: the probability of a random action: one number, or an array of one per row.
        q_values_fn: maps a batch of states to their Q-values, one row of num_actions each.
        num_actions: how many actions the game has.
        rng: the numpy Generator that draws two numbers per row.
        batched: whether the greedy rows go through the network in one call.

    Returns:
        The actions, an integer array of one per row.
    """
    actions, greedy = epsilon_draws(len(states), epsilon, num_actions, rng)
    if len(greedy) == 0:
        return actions
    if batched:
        actions[greedy] = np.argmax(q_values_fn(states[greedy]), axis=1)
    else:
        for j in greedy:
            actions[j] = int(np.argmax(q_values_fn(states[j:j + 1])[0]))
    return actions


def epsilon_draws(n, epsilon, num_actions, rng):
    """The two draws per row of epsilon_greedy_rows: (random actions, the greedy rows).

    The caller puts the network's argmax in the greedy rows (a run group does, for all its
    runs' rows in one call).

    Args:
        n: the number of rows to draw for.
        epsilon: the probability of a random action: one number, or one per row.
        num_actions: how many actions the game has.
        rng: the numpy Generator that draws two numbers per row.

    Returns:
        (an integer array of n random actions, the indices of the rows that act greedily).
    """
    explore = rng.random(n) < epsilon
    actions = rng.integers(0, num_actions, size=n)
    return actions, np.flatnonzero(~explore)


def select_action(state, epsilon, q_values_fn, num_actions, rng):
    """The epsilon-greedy action for one state; the network is called only to exploit.

    Args:
        state: one state, without a batch axis.
        epsilon: the probability of a random action.
        q_values_fn: maps a batch of states to their Q-values, one row of num_actions each.
        num_actions: how many actions the game has.
        rng: the numpy Generator that draws two numbers.

    Returns:
        The action, an int.
    """
    explore = rng.random() < epsilon
    random_action = int(rng.integers(0, num_actions))
    if explore:
        return random_action
    return int(np.argmax(q_values_fn(state[None])[0]))
