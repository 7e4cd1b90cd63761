"""A run group: G learners of one protocol trained as one, their state on a leading run axis.

One DQN update of batch 32 is microseconds of arithmetic and hundreds of microseconds of small
kernels that wait on each other, and a GPU runs one process's kernels at a time: G runs in G
processes train no faster than one. Mapped over a run axis (`jax.vmap`), the same pure update
(train_step_jax) trains G runs in one kernel each, for about one run's cost. Each run keeps
its initial weights, its replay and its minibatch indices (drawn by the caller from that
replay's RNG); the group only stacks and computes. On TensorFlow a group is refused.

Games with different action sets: every run's Q-head is padded with zero columns to the
group's largest action count, masked out of every max, argmax and mean (`valid_actions` of
DQNLearner._train_step); a taken action is always a real one. So no gradient reaches the
padding, its weights and optimizer slots stay zero, and the real columns compute what the
unpadded network computes (rounded as a vmapped program rounds). A dueling head centres its
advantages over all columns, so dueling runs of a group must share one action count.
"""

import numpy as np

from fast_dqn.agent.learner import TrainingDiverged


class GroupNeedsJax(ValueError):
    """A run group was asked for on a backend other than JAX."""


class GroupMismatch(ValueError):
    """The runs of a group do not share one protocol, or the padded learner does not fit."""


def num_actions(learner):
    return int(learner.main.output_shape[-1])


def _is_dueling(learner):
    return any(type(layer).__name__ == "DuelingCombine" for layer in learner.main.layers)


def _padded_to(array, shape):
    """`array` with zeros after its values, to `shape` (the padded Q-head's columns)."""
    array = np.asarray(array)
    if array.shape == tuple(shape):
        return array
    return np.pad(array, [(0, big - small) for small, big in zip(array.shape, shape)])


def _cut_to(array, shape):
    return np.asarray(array)[tuple(slice(0, size) for size in shape)]


def _map_state(fn, state, like):
    return {part: [fn(a, np.shape(b)) for a, b in zip(state[part], like[part])]
            for part in ("main", "target", "optimizer")}


class RunGroup:
    """G runs' learners trained and queried in one compiled call each.

    The members stay the runs' own DQNLearners: a checkpoint, an evaluation or an export of run
    r reads member r after `write_back`; until then the group's stacked state is the truth.

    Args:
        members: the G runs' DQNLearners as their runs build them, of one network and optimizer.
        padded: a DQNLearner like theirs but of the group's largest action count, to compute with.
    """

    def __init__(self, members, padded):
        from fast_dqn.agent.backend_setup import keras_backend
        if keras_backend() != "jax":
            raise GroupNeedsJax(f"a group of {len(members)} runs in one process trains on JAX "
                                "only; set KERAS_BACKEND=jax (pip install -e '.[jax]'), or "
                                "train one run per process")
        from fast_dqn.agent import train_step_jax
        self._jax = train_step_jax
        self.members, self.padded = list(members), padded
        self.num_actions = [num_actions(m) for m in self.members]
        self.width = num_actions(padded)
        self._check_protocol()
        self.valid_actions = np.arange(self.width)[None, :] < np.array(self.num_actions)[:, None]
        self._steps = train_step_jax.GroupSteps(padded.compiled_steps.parts, self.valid_actions,
                                                 padded.compiled_steps.jit_options)
        self.read_members()

    @property
    def runs(self):
        """G, the runs in the group."""
        return len(self.members)

    def _check_protocol(self):
        if self.width != max(self.num_actions):
            raise GroupMismatch(f"the padded network has {self.width} actions; the group's "
                                f"largest action set has {max(self.num_actions)}")
        if _is_dueling(self.padded) and len(set(self.num_actions)) > 1:
            raise GroupMismatch("a dueling head centres its advantages over every column, so "
                                "its padding would change the runs' Q-values: group dueling "
                                "runs of games with one action count "
                                f"(these have {sorted(set(self.num_actions))})")
        like = self.padded.state_dict()
        for r, member in enumerate(self.members):
            state = member.state_dict()
            for part in like:
                shapes = [np.shape(a) for a in state[part]]
                wanted = [np.shape(a) for a in like[part]]
                fits = len(shapes) == len(wanted) and all(
                    len(s) == len(w) and all(a == b or (a == self.num_actions[r]
                                                        and b == self.width)
                                             for a, b in zip(s, w))
                    for s, w in zip(shapes, wanted))
                if not fits:
                    raise GroupMismatch(f"run {r}'s {part} has shapes {shapes}, the group's "
                                        f"{wanted}: a group's runs share one network and "
                                        "optimizer")

    def read_members(self):
        """Take the members' states (a checkpoint loaded into them) as the group's, padded."""
        like, states = self.padded.state_dict(), []
        for member in self.members:
            self.padded.load_state_dict(_map_state(_padded_to, member.state_dict(), like))
            states.append(self.padded.compiled_steps.state)
        self.states = self._jax.stack_states(states)

    def write_back(self, runs=None):
        """Bring members up to date with the group's state, unpadded.

        Args:
            runs: the runs' indices (None: all); a diverged member raises TrainingDiverged.
        """
        for r in range(self.runs) if runs is None else runs:
            self.padded.compiled_steps.set_state(self._jax.run_state(self.states, r))
            member = self.members[r]
            member.load_state_dict(_map_state(_cut_to, self.padded.state_dict(),
                                              member.state_dict()))

    def train_many(self, batches):
        """K gradient steps for every run, in one compiled call.

        Args:
            batches: a Batch of (G, K, B, ...) arrays: run r's K minibatches at [r].

        Returns:
            (losses, mean Qs) as numpy, each (G, K), unchecked (see `diverged`).
        """
        self.states, metrics = self._steps.train_many(self.states, batches)
        return tuple(np.asarray(m) for m in metrics)

    def mirror_replays(self, replays):
        """The runs' replays mirrored on the device, in one stacked array per field.

        Args:
            replays: the G runs' ReplayMemories, of one shape.

        Returns:
            G ReplayMirrors, run r's writing into slice r, for train_from_replay.
        """
        from fast_dqn.agent.replay_gather import FIELDS
        from fast_dqn.agent.replay_mirror import ReplayMirror
        arrays = replays[0].arrays()
        group = self._jax.GroupDeviceArrays({f: arrays[f] for f in FIELDS}, len(replays))
        mirrors = [ReplayMirror(replay, group.run_view(r)) for r, replay in enumerate(replays)]
        self._device_replay = group
        return mirrors

    def train_from_replay(self, mirrors, shards, idx):
        """K gradient steps for every run, each on minibatches of its own replay.

        Args:
            mirrors: the ReplayMirrors of mirror_replays, synced.
            shards: int (G, K, B): run r's records' shards in its own replay.
            idx: int (G, K, B): their columns in their shards.

        Returns:
            (losses, mean Qs) as numpy, each (G, K), unchecked (see `diverged`).
        """
        self.states, metrics = self._steps.train_from_replay(
            mirrors[0].gather, self.states, self._device_replay.arrays,
            np.asarray(shards, np.int32), np.asarray(idx, np.int32))
        return tuple(np.asarray(m) for m in metrics)

    def diverged(self, losses, mean_qs):
        """The runs whose losses, mean Qs or weights are not all finite.

        One run's divergence stops that run only: its neighbours' values do not depend on it.

        Args:
            losses: (G, K), as a train call returned them.
            mean_qs: (G, K), as a train call returned them.

        Returns:
            A sorted list of run indices.
        """
        finite = (np.isfinite(losses).all(axis=1) & np.isfinite(mean_qs).all(axis=1)
                  & self._steps.all_finite(self.states))
        return [int(r) for r in np.flatnonzero(~finite)]

    def _q(self, networks, states_per_run, strict):
        rows = [len(s) for s in states_per_run]
        shape = np.shape(states_per_run[int(np.argmax(rows))])[1:]
        dtype = np.asarray(states_per_run[0]).dtype
        stacked = np.zeros((self.runs, max(max(rows), 1), *shape), dtype)
        for r, s in enumerate(states_per_run):
            stacked[r, :len(s)] = s
        q = self._steps.q(*networks, stacked)
        values = [q[r, :rows[r], :self.num_actions[r]] for r in range(self.runs)]
        for r, v in enumerate(values):
            if strict and not np.all(np.isfinite(v)):
                raise TrainingDiverged(f"a Q-value of run {r}'s network is not finite: "
                                       "training diverged")
        return values

    def target_q_values(self, states_per_run, strict=True):
        """Each run's target network's Q-values of its states, in one batched call.

        Args:
            states_per_run: G stacks of states, run r's (N_r, ...); N_r may be 0.
            strict: raise TrainingDiverged for a value that is not finite; False: the caller checks.

        Returns:
            G numpy arrays, run r's (N_r, its game's action count).
        """
        s = self.states
        return self._q((s.target_trainable, s.target_non_trainable), states_per_run, strict)

    def q_values(self, states_per_run):
        """As target_q_values (strict), of each run's main network.

        Args:
            states_per_run: G stacks of states, run r's (N_r, ...); N_r may be 0.

        Returns:
            G numpy arrays, run r's (N_r, its game's action count).
        """
        return self._q((self.states.trainable, self.states.non_trainable), states_per_run,
                       strict=True)

    def update_target(self):
        """Copy main to target in every run (only while nobody trains)."""
        s = self.states
        self.states = s._replace(target_trainable=s.trainable,
                                 target_non_trainable=s.non_trainable)

    def minibatches_trained(self):
        """Each run's optimizer update count.

        Returns:
            A list of G ints, in minibatches.
        """
        return [int(n) for n in np.asarray(
            self.states.optimizer[self.padded.compiled_steps.iterations_index])]
