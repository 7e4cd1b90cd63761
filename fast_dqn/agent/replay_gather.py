"""Replay's minibatch gather in Keras ops, so that it runs inside the learner's compiled call.

It keeps fast_dqn.agent.replay_memory's rules, and that numpy gather stays the reference:
states, next states and actions come out byte for byte as numpy's; the n-step returns are
summed in float32 here (float64 there), within 1e-6 of them. The indices come from the host
(ReplayMemory.sample_indices), so a seeded run draws the same minibatches whichever side
gathers them.
"""

import numpy as np
from keras import ops

from fast_dqn.agent.batch import Batch

FIELDS = ("frames", "actions", "rewards", "terminals", "episode_ends")


class ReplayGather:
    """The gather of one minibatch from replay's arrays, as tensors: shapes are fixed."""

    def __init__(self, shard_capacity, history_length, n_step, discount):
        self.capacity, self.k, self.n = shard_capacity, history_length, n_step
        # gamma^j in float64, rounded once: the same float32 discounts as numpy's.
        self.powers = (float(discount) ** np.arange(n_step + 1)).astype(np.float32)

    def batch(self, arrays, shards, idx):
        """The minibatch, a Batch of B transitions, at records (shards, idx) of replay's arrays.

        arrays: replay's FIELDS as tensors, each (num_shards, shard_capacity, ...); shards, idx:
        int32 (B,), each record's shard and its column there.
        """
        frames, actions, rewards, terminals, ends = (arrays[f] for f in FIELDS)
        flat = lambda a: ops.reshape(a, (-1, *a.shape[2:]))  # noqa: E731 - (S*N, ...)
        frames, actions, rewards = flat(frames), flat(actions), flat(rewards)
        terminals, ends = flat(terminals), flat(ends)
        base = shards * self.capacity

        def at(cols):  # flat positions of shard-relative columns, wrapped in the ring
            return base[:, None] + ops.mod(cols, self.capacity)

        n = self.n
        if n == 1:
            terminal = ops.take(terminals, base + idx)
            rewards_out = ops.take(rewards, base + idx)
            discounts = ops.full(ops.shape(idx), self.powers[1])
            next_idx = idx + 1
        else:
            window = at(idx[:, None] + ops.arange(n, dtype="int32")[None, :])  # (B, n)
            w_ends, w_terms = ops.take(ends, window), ops.take(terminals, window)
            any_end = ops.any(w_ends, axis=1)
            first_end = ops.where(any_end, ops.argmax(ops.cast(w_ends, "int32"), axis=1), n)
            first_end = ops.cast(first_end, "int32")
            ended_by = ops.minimum(first_end, n - 1)
            row_pick = ops.arange(n, dtype="int32")[None, :] == ended_by[:, None]
            terminal = any_end & ops.any(w_ends & w_terms & row_pick, axis=1)
            steps = ops.where(any_end, ops.where(terminal, first_end + 1, first_end), n)
            weights = ops.where(ops.arange(n, dtype="int32")[None, :] < steps[:, None],
                                ops.convert_to_tensor(self.powers[:n])[None, :], 0.0)
            rewards_out = ops.sum(ops.take(rewards, window) * weights, axis=1)
            discounts = ops.take(ops.convert_to_tensor(self.powers), steps)
            next_idx = idx + steps
        states = self._stacks(frames, ends, at, idx)
        next_states = self._stacks(frames, ends, at, next_idx)
        zero = ops.zeros_like(next_states)
        next_states = ops.where(ops.reshape(terminal, (-1,) + (1,) * (len(zero.shape) - 1)),
                                zero, next_states)
        return Batch(states, ops.take(actions, base + idx), rewards_out, next_states,
                     ops.cast(terminal, "float32"), discounts)

    def _stacks(self, frames, ends, at, idx):
        """The states of records idx, with the numpy gather's zeroing of older episodes' frames."""
        k = self.k
        cols = at(idx[:, None] + ops.arange(-k + 1, 1, dtype="int32")[None, :])   # (B, k)
        stack = ops.take(frames, cols, axis=0)                                 # (B, k, ...)
        if k == 1:
            return stack
        older = ops.cast(ops.take(ends, cols[:, :k - 1]), "int32")            # (B, k-1)
        # An end at record j blanks frames 0..j: a cumulative OR from the newest side.
        blank = ops.flip(ops.cumsum(ops.flip(older, axis=1), axis=1), axis=1) > 0
        blank = ops.concatenate([blank, ops.zeros_like(blank[:, :1])], axis=1)
        shape = (-1, k, *(1,) * (len(stack.shape) - 2))
        return ops.where(ops.reshape(blank, shape), ops.zeros_like(stack), stack)
