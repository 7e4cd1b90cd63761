"""The learner's compiled functions on JAX: `jax.jit` over Keras's stateless calls.

The learner's state (LearnerState) lives on the device between calls, as the state of pure
functions a reader can call alone: `update` is one minibatch's step (Dopamine's `train`,
CleanRL's `update`), and `train_many` is K of them in one `lax.scan`. CompiledSteps jits them
and holds the state; the Keras variables are brought up to date only when something reads
them (`keras_variables`), so a call pays no per-variable reads and writes on the host.

Threads. The trainer thread alone runs the train calls and so replaces the main network's
and the optimizer's values. The samplers act through the target network's values, which
only `update_target` replaces, and the loops call that only while nobody trains (a sync
point). A reader takes the arrays current when it starts, which no later call changes: JAX
arrays are immutable, and no buffer of the state is donated to XLA (after `update_target` the
target's arrays are the main network's, which the next call still reads while a sampler may
be acting with them).
"""

import functools
from typing import NamedTuple

import jax
import keras
import numpy as np

from fast_dqn.agent.batch import Batch
from fast_dqn.agent.fused_optimizer import FlatSlots, FusedLayout


class LearnerState(NamedTuple):
    """The learner's state between calls: the values of both networks and the optimizer."""
    trainable: list              # the main network's trainable values
    non_trainable: list          # its non-trainable values (none of ours changes in training)
    target_trainable: list       # the target network's, alike
    target_non_trainable: list
    optimizer: list              # the optimizer's variables' values (iterations, slots, scale)


def _values(variables):
    return [v.value for v in variables]


def _assign(variables, values):
    for variable, value in zip(variables, values):
        variable.assign(value)


class UpdateParts(NamedTuple):
    """What an update computes with, besides its state: fixed for a learner's life."""
    main: object        # the main network (a Keras model), called statelessly
    target: object      # the target network, of the same architecture
    optimizer: object   # a Keras optimizer, applied statelessly
    train_step: object  # fast_dqn.agent.learner.DQNLearner._train_step
    unroll: object      # the scan's unroll: an int, or True for all K (CompileOptions.unroll)
    fused: object       # the optimizer's FusedLayout where its step is fused, else None


def loss_of(parts, trainable, state, batch, next_target_q=None):
    """(the loss to differentiate, scaled where the optimizer scales it; (loss, mean Q)).

    The gradient is taken of `trainable`, the main network's trainable values; the other values
    come from `state`. next_target_q is the target network's Q-values of the batch's next
    states, (B, actions), where the caller computed them (train_many); None computes them here.
    """
    # The optimizer's variables are mapped too: a loss-scaling optimizer reads its current
    # scale from them in scale_loss.
    mapping = (list(zip(parts.main.trainable_variables, trainable))
               + list(zip(parts.main.non_trainable_variables, state.non_trainable))
               + list(zip(parts.target.trainable_variables, state.target_trainable))
               + list(zip(parts.target.non_trainable_variables, state.target_non_trainable))
               + list(zip(parts.optimizer.variables, state.optimizer)))
    with keras.StatelessScope(state_mapping=mapping):
        loss, scaled_loss, mean_q = parts.train_step(parts.main, parts.target, *batch,
                                                     next_target_q=next_target_q)
    return scaled_loss, (loss, mean_q)


def update(parts, state, batch, next_target_q=None):
    """One minibatch's gradient step, a pure function: (LearnerState after, (loss, mean Q))."""
    state, metrics = _step(parts, _carried(parts, state), batch, next_target_q)
    return _kept(parts, state), metrics


def _step(parts, state, batch, next_target_q):
    """update on a state as a call carries it (_carried)."""
    if parts.fused is None:
        grads, (loss, mean_q) = jax.grad(functools.partial(loss_of, parts), has_aux=True)(
            state.trainable, state, batch, next_target_q)
        trainable, optimizer_values = parts.optimizer.stateless_apply(state.optimizer, grads,
                                                                      state.trainable)
    else:
        # The gradient of the flat weights comes back flat. The loss reads a loss-scaling
        # optimizer's scale from its values: a fused step has none, and reads Keras's list.
        read = state._replace(optimizer=state.optimizer.others)
        grad, (loss, mean_q) = jax.grad(
            lambda flat, *rest: loss_of(parts, parts.fused.split(flat), *rest), has_aux=True)(
            state.trainable, read, batch, next_target_q)
        trainable, optimizer_values = parts.fused.step(state.optimizer, grad, state.trainable)
    return state._replace(trainable=trainable, optimizer=optimizer_values), (loss, mean_q)


def _carried(parts, state):
    """The state as a call carries it: where fused, its weights and slots flat (FusedLayout)."""
    if parts.fused is None:
        return state
    return state._replace(trainable=parts.fused.join(state.trainable),
                          optimizer=parts.fused.flatten(state.optimizer))


def _kept(parts, state):
    """The state as Keras keeps it (undoes _carried)."""
    if parts.fused is None or not isinstance(state.optimizer, FlatSlots):
        return state
    return state._replace(trainable=parts.fused.split(state.trainable),
                          optimizer=parts.fused.unflatten(state.optimizer))


def target_q_values(parts, state, states):
    """The target network's Q-values (K, B, actions) of K minibatches' states (K, B, ...)."""
    flat = jax.numpy.reshape(states, (-1, *states.shape[2:]))
    q = parts.target.stateless_call(state.target_trainable, state.target_non_trainable, flat,
                                    training=False)[0]
    return jax.numpy.reshape(q, (*states.shape[:2], -1))


def train_many(parts, state, batches):
    """K updates in order on a Batch of (K, B, ...) arrays: (state after, (K losses, K mean Qs)).

    The target network is frozen within a call, so its Q-values of all K minibatches' next
    states come from one batched pass before the K updates, not from K small ones inside
    them (Double DQN's argmax over the main network's Q-values stays inside each update).
    """
    next_target_q = target_q_values(parts, state, batches.next_states)
    state = _carried(parts, state)

    def body(changed, minibatch):
        trainable, optimizer_values = changed
        batch, next_q = minibatch
        after, metrics = _step(parts, state._replace(trainable=trainable,
                                                     optimizer=optimizer_values),
                               batch, next_q)
        return (after.trainable, after.optimizer), metrics

    (trainable, optimizer_values), metrics = jax.lax.scan(
        body, (state.trainable, state.optimizer), (batches, next_target_q),
        unroll=parts.unroll)
    return _kept(parts, state._replace(trainable=trainable, optimizer=optimizer_values)), metrics


def train_from_replay(parts, gather, state, arrays, shards, idx):
    """train_many on the minibatches at records (shards, idx) of replay's arrays on the device.

    arrays: replay's FIELDS, each (num_shards, shard_capacity, ...). shards, idx: int32 (K, B),
    each record's shard and its column in that shard. One gather serves all K minibatches.
    """
    k, b = idx.shape
    gathered = gather.batch(arrays, jax.numpy.reshape(shards, (-1,)),
                            jax.numpy.reshape(idx, (-1,)))
    batches = Batch(*(jax.numpy.reshape(a, (k, b, *a.shape[1:])) for a in gathered))
    return train_many(parts, state, batches)


class CompiledSteps:
    """The learner's jitted calls on JAX, holding the LearnerState on the device between them.

    train_step_tf.CompiledSteps has the same methods, documented here; the train calls'
    metrics stay on the device (tensors under TensorFlow). train_step is
    DQNLearner._train_step; of the CompileOptions, xla is moot (JAX compiles all with XLA).
    """

    def __init__(self, main, target, optimizer, train_step, options):
        self.main, self.target, self.optimizer = main, target, optimizer
        self._fresh = True  # the Keras variables hold the state (it has not moved since)
        self.state = self._state_of_variables()
        # Where the optimizer's update count sits among its variables.
        self.iterations_index = next(i for i, v in enumerate(optimizer.variables)
                                     if v.path == optimizer.iterations.path)
        self.parts = parts = UpdateParts(
            main, target, optimizer, train_step, options.unroll(jax.default_backend()),
            FusedLayout(optimizer) if options.fused_optimizer else None)
        # Only the train calls sum gradients, where kernel order shows.
        self.jit_options = jit_options(options)
        self._update = jax.jit(lambda state, batch: update(parts, state, batch),
                               **self.jit_options)
        self._train_many = jax.jit(functools.partial(train_many, parts), **self.jit_options)
        # The gather is static, hashed by identity: one compile per replay.
        self._train_replay = jax.jit(functools.partial(train_from_replay, parts),
                                     static_argnums=0, **self.jit_options)
        # One compiled forward pass serves both networks: they share the architecture, and
        # the values passed in decide whose Q-values come out.
        self._q = jax.jit(_stateless_q(main))
        self._all_finite = jax.jit(all_finite)
        # --act-on-cpu: the target's values copied to the host's CPU device once per sync
        # point, so that the samplers' calls run there, off the queue of the GPU's calls.
        self._acting_cpu = jax.devices("cpu")[0] if options.act_on_cpu else None
        self._target_on_cpu = None

    def _state_of_variables(self):
        main, target = self.main, self.target
        return LearnerState(_values(main.trainable_variables),
                            _values(main.non_trainable_variables),
                            _values(target.trainable_variables),
                            _values(target.non_trainable_variables),
                            _values(self.optimizer.variables))

    def _changed(self, result):
        self.state, metrics = result
        self._fresh = False
        return metrics

    def train(self, *batch):
        """One gradient step (update) on a Batch's six (B, ...) arrays: (loss, mean Q)."""
        return self._changed(self._update(self.state, Batch(*batch)))

    def train_many(self, *batches):
        """train_many on a Batch's six (K, B, ...) arrays: (K losses, K mean Qs)."""
        return self._changed(self._train_many(self.state, Batch(*batches)))

    def train_from_replay(self, gather, arrays, shards, idx):
        """train_from_replay (the function) on the held state: (K losses, K mean Qs)."""
        return self._changed(self._train_replay(gather, self.state, arrays, shards, idx))

    def keras_variables(self):
        """Bring the Keras variables up to date with the state, for a reader of them."""
        if not self._fresh:
            state = self.state
            _assign(self.main.trainable_variables, state.trainable)
            _assign(self.main.non_trainable_variables, state.non_trainable)
            _assign(self.target.trainable_variables, state.target_trainable)
            _assign(self.target.non_trainable_variables, state.target_non_trainable)
            _assign(self.optimizer.variables, state.optimizer)
            self._fresh = True

    def set_state(self, state):
        """Make `state` the learner's (a run group hands a run's slice back)."""
        self.state = state
        self._fresh = False
        self._target_on_cpu = None

    def variables_changed(self):
        """The Keras variables were assigned (a checkpoint loaded): they are the state now."""
        self.state = self._state_of_variables()
        self._fresh = True
        self._target_on_cpu = None

    def main_q(self, states):
        """The main network's Q-values, numpy (N, actions), of stacked observations (N, ...)."""
        return _q_of(self._q, self.state.trainable, self.state.non_trainable, states)

    def target_q(self, states):
        """As main_q, with the target network."""
        state = self.state
        return _q_of(self._q, state.target_trainable, state.target_non_trainable, states)

    def acting_q(self, states):
        """As target_q, for the samplers: on the CPU with --act-on-cpu, else target_q."""
        if self._acting_cpu is None:
            return self.target_q(states)
        if self._target_on_cpu is None:  # the first call after the target changed
            self._target_on_cpu = jax.device_put(
                (self.state.target_trainable, self.state.target_non_trainable),
                self._acting_cpu)
        return _q_of(self._q, *self._target_on_cpu, states)

    def update_target(self):
        """Copy main to target: the target's values become the main network's."""
        state = self.state
        self.state = state._replace(target_trainable=state.trainable,
                                    target_non_trainable=state.non_trainable)
        self._fresh = False
        self._target_on_cpu = None

    def iterations(self):
        """The optimizer's update count: the minibatches trained since the run began."""
        return int(self.state.optimizer[self.iterations_index])

    def all_finite(self):
        """Whether the state's floating-point values are all finite, in one device reduction."""
        return bool(self._all_finite(self.state))


def jit_options(options):
    """jax.jit's keywords for a train call compiled with CompileOptions `options`.

    XLA_FLAGS asks every GPU kernel to be deterministic (backend_setup); a call compiled with
    options.deterministic off may use the faster, non-deterministic ones.
    """
    if options.deterministic:
        return {}
    return {"compiler_options": {"xla_gpu_deterministic_ops": False}}


def _masked_parts(parts, valid_actions):
    return parts._replace(train_step=functools.partial(parts.train_step,
                                                       valid_actions=valid_actions))


def group_train_many(parts, states, batches, valid_actions):
    """train_many for G runs in one call (jax.vmap): every argument gains a leading run axis.

    valid_actions: bool (G, actions), each run's columns of the padded Q-head.
    """
    def one(state, batch, valid):
        return train_many(_masked_parts(parts, valid), state, batch)
    return jax.vmap(one)(states, batches, valid_actions)


def group_train_from_replay(parts, gather, states, arrays, shards, idx, valid_actions):
    """train_from_replay for G runs in one call, as group_train_many; they share `gather`."""
    def one(state, run_arrays, run_shards, run_idx, valid):
        return train_from_replay(_masked_parts(parts, valid), gather, state, run_arrays,
                                 run_shards, run_idx)
    return jax.vmap(one)(states, arrays, shards, idx, valid_actions)


class GroupSteps:
    """A run group's jitted calls: its G runs' states stacked, trained and queried as one.

    options: the padded learner's jit keywords (CompiledSteps.jit_options).
    """

    def __init__(self, parts, valid_actions, options=None):
        self.valid_actions = jax.device_put(np.asarray(valid_actions, bool))
        options = options or {}
        self._train_many = jax.jit(functools.partial(group_train_many, parts), **options)
        self._train_replay = jax.jit(functools.partial(group_train_from_replay, parts),
                                     static_argnums=0, **options)
        self._q = jax.jit(jax.vmap(_stateless_q(parts.main)))
        self._all_finite = jax.jit(jax.vmap(all_finite))

    def train_many(self, states, batches):
        """(states after, ((G, K) losses, (G, K) mean Qs)) of group_train_many."""
        return self._train_many(states, batches, self.valid_actions)

    def train_from_replay(self, gather, states, arrays, shards, idx):
        """(states after, ((G, K) losses, (G, K) mean Qs)) of group_train_from_replay."""
        return self._train_replay(gather, states, arrays, shards, idx, self.valid_actions)

    def q(self, trainable, non_trainable, states):
        """Each run's network's Q-values of its states: (G, N, ...) -> numpy (G, N, actions)."""
        rows = states.shape[1]
        padded = np.swapaxes(_padded(np.swapaxes(states, 0, 1)), 0, 1)
        return jax.device_get(self._q(trainable, non_trainable, padded))[:, :rows]

    def all_finite(self, states):
        """Whether each run's state is finite: a numpy bool (G,)."""
        return np.asarray(jax.device_get(self._all_finite(states)))


def stack_states(states):
    """G LearnerStates stacked on a leading run axis, on the device."""
    return jax.tree_util.tree_map(lambda *runs: jax.numpy.stack(runs), *states)


def run_state(states, run):
    """Run `run`'s LearnerState out of a stacked one."""
    return jax.tree_util.tree_map(lambda a: a[run], states)


class GroupDeviceArrays:
    """G runs' replay arrays on the device, stacked on a leading run axis, written in place.

    host_arrays: one run's replay FIELDS, for the shapes. `arrays` holds {name: device array
    (G, num_shards, shard_capacity, ...)}.
    """

    def __init__(self, host_arrays, runs):
        self.arrays = {name: jax.numpy.zeros((runs, *a.shape), a.dtype)
                       for name, a in host_arrays.items()}

        def write(arrays, run, shards, cols, values):
            return {name: arrays[name].at[run, shards, cols].set(values[name])
                    for name in arrays}

        # Donated, as DeviceArrays' write: in place, not into a copy of G replays.
        self._write = jax.jit(write, donate_argnums=0)
        self._fill = jax.jit(lambda arrays, run, values: {
            name: arrays[name].at[run].set(values[name]) for name in arrays},
            donate_argnums=0)

    def run_view(self, run):
        """A factory of a DeviceArrays-like view of run `run`'s slice, for its ReplayMirror.

        ReplayMirror calls it with the run's replay arrays, which fill the slice.
        """
        return functools.partial(_RunSlice, self, run)

    def fill(self, run, host_arrays):
        self.arrays = self._fill(self.arrays, np.int32(run), host_arrays)

    def write(self, run, shards, cols, values):
        self.arrays = self._write(self.arrays, np.int32(run), shards, cols, values)


class _RunSlice:
    """One run's share of GroupDeviceArrays, as ReplayMirror writes to a DeviceArrays."""

    def __init__(self, group, run, host_arrays):
        self.group, self.run = group, run
        group.fill(run, host_arrays)

    def write(self, shards, cols, values):
        self.group.write(self.run, shards, cols, values)


def all_finite(state):
    """Whether every floating-point array of a pytree (a LearnerState) is finite: a device bool."""
    checks = [jax.numpy.all(jax.numpy.isfinite(leaf)) for leaf in jax.tree_util.tree_leaves(state)
              if jax.numpy.issubdtype(leaf.dtype, jax.numpy.floating)]
    return jax.numpy.all(jax.numpy.stack(checks)) if checks else jax.numpy.bool_(True)


def _stateless_q(network):
    def q(trainable, non_trainable, states):
        return network.stateless_call(trainable, non_trainable, states, training=False)[0]
    return q


def _padded(states):
    """The rows padded with zeros to the next power of two.

    jit compiles once per shape, and an acting batch (the greedy rows of W games) may have any
    size from 1 to W: so at most log2(W) + 1 compiles, in a run's first rounds, instead of W.
    """
    rows = len(states)
    size = 1 << max(rows - 1, 0).bit_length()
    if size == rows:
        return states
    return np.concatenate([states, np.zeros((size - rows, *states.shape[1:]), states.dtype)])


def _q_of(call, trainable, non_trainable, states):
    states = np.asarray(states)
    q = call(trainable, non_trainable, _padded(states))
    return jax.device_get(q)[:len(states)]


def predictor(network):
    """learner.predictor on JAX: network(states) jitted once; it reads the current weights."""
    call = jax.jit(_stateless_q(network))
    return lambda states: _q_of(call, _values(network.trainable_variables),
                                _values(network.non_trainable_variables), states)


def to_device(array):
    """A host array copied into the device's memory."""
    return jax.device_put(array)


class DeviceArrays:
    """Replay's arrays mirrored on the device, written in place at given records.

    host_arrays: replay's FIELDS, each (num_shards, shard_capacity, ...). `arrays` holds them on
    the device; each write replaces it.
    """

    def __init__(self, host_arrays):
        self.arrays = {name: jax.device_put(a) for name, a in host_arrays.items()}

        def write(arrays, shards, cols, values):
            return {name: arrays[name].at[shards, cols].set(values[name]) for name in arrays}

        # The old arrays are donated: XLA writes the records in place, not into a copy of
        # a replay of gigabytes (nothing else holds them: the learner's calls take them
        # from here each time).
        self._write = jax.jit(write, donate_argnums=0)

    def write(self, shards, cols, values):
        """Write records in place: shards, cols int32 (N,); values {name: (N, ...) array}."""
        self.arrays = self._write(self.arrays, shards, cols, values)
