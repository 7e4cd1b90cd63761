"""The minibatch replay hands the learner: one named type, whatever the return's length.

Each transition carries its own bootstrap discount, so an m-step return (m < n where an
episode ended or was cut) is valued exactly, and the learner holds no gamma that could
disagree with the one replay summed the rewards with.
"""

from typing import NamedTuple

import numpy as np


class Batch(NamedTuple):
    states: np.ndarray       # (B, k, *frame_shape) in the frame dtype: s_t
    actions: np.ndarray      # (B,) int32: a_t
    rewards: np.ndarray      # (B,) float32: r_t, or sum_{j<m} gamma^j r_{t+j}
    next_states: np.ndarray  # like states: s_{t+m}, zeros where `dones`
    dones: np.ndarray        # (B,) float32: 1 where nothing is bootstrapped (a terminal)
    discounts: np.ndarray    # (B,) float32: gamma^m, the bootstrap's discount

    @classmethod
    def of(cls, states, actions, rewards, next_states, dones, discounts):
        """From array-likes, in the dtypes the learner takes (the states' are kept)."""
        return cls(np.asarray(states), np.asarray(actions, np.int32),
                   np.asarray(rewards, np.float32), np.asarray(next_states),
                   np.asarray(dones, np.float32),
                   np.broadcast_to(np.asarray(discounts, np.float32), np.shape(actions)))

    @classmethod
    def of_stacked(cls, states, actions, rewards, next_states, dones, discounts):
        """Like `of`, for K minibatches stacked on a leading axis: (K, B, ...)."""
        actions = np.asarray(actions, np.int32)
        return cls(np.asarray(states), actions, np.asarray(rewards, np.float32),
                   np.asarray(next_states), np.asarray(dones, np.float32),
                   np.broadcast_to(np.asarray(discounts, np.float32), actions.shape))
