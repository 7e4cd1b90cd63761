"""DQN learning: main and target networks, the TD target, the Huber loss, the optimizer.

Every loss and Q-value leaving it is checked finite, and so is every weight and optimizer
slot before it leaves for a checkpoint, best/ or an export (check_weights): a call can leave
NaN weights behind finite losses. TrainingDiverged says otherwise. The math is Keras ops;
train_step_tf and train_step_jax compile it. Single-threaded by itself: the fast loop's
trainer calls `train`, its samplers the `*_q_values`, and `update_target` runs only while
nobody trains; each backend's module says why its functions bear that.
"""

import keras
import numpy as np
from keras import ops

from fast_dqn.agent.batch import Batch
from fast_dqn.agent.compile_options import CompileOptions
from fast_dqn.agent.optimizer_defaults import OPTIMIZER_DEFAULTS
from fast_dqn.state_schema import StateMismatch


def td_targets(rewards, dones, next_target_q, discount):
    """The Nature TD targets, y = r + gamma * (1 - done) * max_a' Q_target(s', a')."""
    return rewards + discount * (1.0 - dones) * ops.max(next_target_q, axis=1)


def double_td_targets(rewards, dones, next_main_q, next_target_q, discount):
    """Double DQN's TD targets (van Hasselt et al. 2016): main picks a', the target values it.

    y = r + gamma * (1 - done) * Q_target(s', argmax_a' Q_main(s', a')).
    """
    value = _taken(next_target_q, ops.argmax(next_main_q, axis=1))
    return rewards + discount * (1.0 - dones) * value


def masked(q_values, valid_actions):
    """Q-values with the padded columns at -inf, so that no max or argmax picks one."""
    if valid_actions is None:
        return q_values
    return ops.where(valid_actions, q_values, float("-inf"))


def masked_mean(q_values, valid_actions):
    """The mean Q-value over the game's actions only (all columns where None)."""
    if valid_actions is None:
        return ops.mean(q_values)
    valid = ops.cast(valid_actions, q_values.dtype)
    return ops.sum(q_values * valid) / (q_values.shape[0] * ops.sum(valid))


def huber(x, delta=1.0):
    """Quadratic inside [-delta, delta], linear outside: Nature's clipping of the TD error."""
    abs_x = ops.abs(x)
    quadratic = ops.minimum(abs_x, delta)
    return 0.5 * ops.square(quadratic) + delta * (abs_x - quadratic)


def _taken(q_values, actions):
    """q_values[i, actions[i]] for each row i."""
    return ops.squeeze(ops.take_along_axis(q_values, ops.expand_dims(actions, 1), axis=1), 1)


def dqn_loss(q_values, actions, targets, reduction="sum"):
    """Huber loss of the TD errors of the taken actions, summed (as Nature) or averaged.

    The reduction goes with the optimizer's epsilon: fast_dqn.agent.optimizer_defaults says why.
    """
    errors = huber(ops.stop_gradient(targets) - _taken(q_values, actions))
    if reduction == "sum":
        return ops.sum(errors)
    if reduction == "mean":
        return ops.mean(errors)
    raise ValueError(f"unknown loss reduction {reduction!r}")


class RMSpropFromMeanSquare(keras.optimizers.RMSprop):
    """Keras's RMSprop whose running mean square starts at `initial_mean_square`.

    Keras, like the Nature code, starts it at 0. TensorFlow 1's tf.train.RMSPropOptimizer,
    which Dopamine trains with, starts it at 1, so its first few hundred updates are smaller.
    """

    def __init__(self, initial_mean_square=0.0, **kwargs):
        super().__init__(**kwargs)
        self.initial_mean_square = float(initial_mean_square)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        for velocity in self._velocities:
            velocity.assign(keras.ops.full(velocity.shape, self.initial_mean_square,
                                           velocity.dtype))


def make_optimizer(name, lr, epsilon=None, loss_scaling=False, rmsprop_init=0.0):
    """The optimizer named `name`, with the source's settings for it.

    Args:
        name: "rmsprop" (centered, rho 0.95, as Nature) or "adam".
        lr: the learning rate, a positive float (config.lr).
        epsilon: the optimizer's epsilon; None takes the source's value (OPTIMIZER_DEFAULTS).
        loss_scaling: wrap it for mixed precision, so small float16 gradients do not vanish.
        rmsprop_init: RMSProp's starting mean square (RMSpropFromMeanSquare).

    Returns:
        A Keras optimizer, not built yet.
    """
    if name not in OPTIMIZER_DEFAULTS:
        raise ValueError(f"unknown optimizer {name!r}")
    if epsilon is None:
        epsilon = OPTIMIZER_DEFAULTS[name]["epsilon"]
    if name == "rmsprop":
        optimizer = RMSpropFromMeanSquare(rmsprop_init, learning_rate=lr, rho=0.95,
                                          epsilon=epsilon, centered=True)
    else:
        optimizer = keras.optimizers.Adam(learning_rate=lr, epsilon=epsilon)
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scaling else optimizer


def _backend_module():
    from fast_dqn.agent.backend_setup import keras_backend
    # Through backend_setup: it refuses a backend we do not run on, and tells XLA its
    # settings if JAX has not started yet.
    if keras_backend() == "jax":
        from fast_dqn.agent import train_step_jax
        return train_step_jax
    from fast_dqn.agent import train_step_tf
    return train_step_tf


def predictor(network):
    """States to numpy Q-values, compiled once, for a copy of a network that acts elsewhere (Ray).

    Args:
        network: the Keras network to predict with.

    Returns:
        predict(states (N, ...)) -> numpy (N, actions), read from the current weights.
    """
    return _backend_module().predictor(network)


class TrainingDiverged(FloatingPointError):
    """The loss, the Q-values, the weights or the optimizer's slots stopped being finite."""


class NetworkMismatch(StateMismatch, ValueError):
    """Saved weights or optimizer slots of another network; a ValueError, as Keras's refusal was."""


class BadCount(StateMismatch, ValueError):
    """A negative saved optimizer update count, which no run writes; a ValueError too."""


def _check_finite(what, value):
    if not np.all(np.isfinite(value)):
        raise TrainingDiverged(f"{what} is not finite ({np.ravel(value)[:4]}...): training "
                               "diverged")
    return value


def _is_float(dtype):
    return "float" in str(dtype)


def first_not_finite(named_arrays):
    """The name of the first floating-point array holding a NaN or an infinity, or None."""
    for name, array in named_arrays:
        array = np.asarray(array)
        if _is_float(array.dtype) and not np.all(np.isfinite(array)):
            return name
    return None


def _diverged(where):
    error = TrainingDiverged(f"{where} is not finite: training diverged")
    error.where = where  # what is not finite, for a message that blames no divergence
    return error


def check_state_finite(state):
    """Raise TrainingDiverged, naming the first array, where a state_dict holds NaN or infinity."""
    where = first_not_finite(
        [(f"weight {i} of the main network", w) for i, w in enumerate(state["main"])]
        + [(f"weight {i} of the target network", w) for i, w in enumerate(state["target"])]
        + [(f"optimizer variable {i}", v) for i, v in enumerate(state["optimizer"])])
    if where:
        raise _diverged(where)


def _check_shapes(variables, values, where):
    if len(variables) != len(values):
        raise NetworkMismatch(f"{where} holds {len(values)} arrays, not the {len(variables)} "
                              "of this run's network")
    for i, (variable, value) in enumerate(zip(variables, values)):
        if tuple(variable.shape) != np.shape(value):
            raise NetworkMismatch(f"{where}/{i} holds shape {np.shape(value)}, not "
                                  f"{tuple(variable.shape)} as this run's network needs")


def _count(value):
    value = np.asarray(value)
    return value.dtype.kind in "iu" and bool(np.all(value >= 0))


class DQNLearner:
    """Owns the two networks and the optimizer; everything goes in and out as numpy.

    Their state lives where the backend computes: `main`, `target` and the weight and state
    readers bring the Keras variables up to date first. The discount comes with each minibatch.

    Args:
        build_network: a function of no arguments that builds a fresh Q-network.
        optimizer: the Keras optimizer (make_optimizer); the learner builds it.
        options: the CompileOptions the backend compiles the steps with.
        loss_reduction: "sum" (as Nature) or "mean" over the minibatch (dqn_loss).
        double: Double DQN's target (see double_td_targets); off, the Nature target.
    """

    def __init__(self, build_network, optimizer, options=CompileOptions(), loss_reduction="sum",
                 double=False):
        self.loss_reduction = loss_reduction
        self.double = double
        self._main = build_network()
        self._target = build_network()
        self._target.set_weights(self._main.get_weights())
        self.optimizer = optimizer
        self.optimizer.build(self._main.trainable_variables)
        self._compiled = _backend_module().CompiledSteps(self._main, self._target, optimizer,
                                                         self._train_step, options)

    @property
    def main(self):
        """The main network, its variables up to date (read it only while nobody trains)."""
        self._compiled.keras_variables()
        return self._main

    @property
    def target(self):
        """The target network, its variables up to date (read it only while nobody trains)."""
        self._compiled.keras_variables()
        return self._target

    @property
    def compiled_steps(self):
        """The backend's CompiledSteps, which hold the state (a run group stacks theirs)."""
        return self._compiled

    def _train_step(self, main, target, states, actions, rewards, next_states, dones,
                    discounts, next_target_q=None, valid_actions=None):
        """(loss, the loss the gradients come from, mean Q) of one minibatch.

        next_target_q: the target's Q-values (B, actions) of next_states, where the caller computed
        them in one pass for several minibatches. valid_actions: a bool (actions,) mask of the
        game's columns of a Q-head that a run group padded (fast_dqn.agent.run_group).
        """
        if next_target_q is None:
            next_target_q = target(next_states, training=False)
        next_target_q = masked(next_target_q, valid_actions)
        if self.double:
            next_main_q = masked(main(next_states, training=False), valid_actions)
            targets = double_td_targets(rewards, dones, next_main_q, next_target_q, discounts)
        else:
            targets = td_targets(rewards, dones, next_target_q, discounts)
        q = main(states, training=True)
        loss = dqn_loss(q, actions, targets, self.loss_reduction)
        # A loss-scaling optimizer's scaled loss; any other's, the loss itself.
        return loss, self.optimizer.scale_loss(loss), masked_mean(q, valid_actions)

    def train(self, batch):
        """One gradient step on a minibatch.

        Args:
            batch: one minibatch, a Batch of (B, ...) arrays, or its fields in order.

        Returns:
            (loss, mean Q) of the minibatch, as floats.
        """
        loss, mean_q = self._compiled.train(*Batch.of(*batch))
        # Checked at every step: one NaN spreads to every weight within a few updates, and
        # a checkpoint must never hold a diverged network.
        return float(_check_finite("the loss", loss)), float(_check_finite("the mean Q", mean_q))

    def train_many(self, batches):
        """K gradient steps in one compiled call, in order, on K stacked minibatches.

        Args:
            batches: a Batch of K minibatches stacked on a leading axis, (K, B, ...) arrays.

        Returns:
            (losses, mean Qs) as numpy, (K,) each.
        """
        batches = Batch.of_stacked(*batches)
        return self._checked(*self._compiled.train_many(*batches))

    def train_from_replay(self, mirror, shards, idx):
        """K gradient steps in one compiled call on minibatches gathered on the device.

        Args:
            mirror: the ReplayMirror (mirror_replay) of the replay the indices come from.
            shards: the shard of each transition, (K, B): K minibatches of B.
            idx: the index of each transition in its shard, (K, B).

        Returns:
            (losses, mean Qs) as numpy, (K,) each.
        """
        return self._checked(*self._compiled.train_from_replay(
            mirror.gather, mirror.device.arrays, np.asarray(shards, np.int32),
            np.asarray(idx, np.int32)))

    @staticmethod
    def _checked(losses, mean_qs):
        # Once per call, before anything can be saved: a minibatch that diverged leaves its
        # NaN in every later loss of the call, and a checkpoint must never hold it.
        return (_check_finite("the loss", np.asarray(losses)),
                _check_finite("the mean Q", np.asarray(mean_qs)))

    def mirror_replay(self, replay):
        """A copy of `replay`'s arrays on the device, for train_from_replay.

        Args:
            replay: the ReplayMemory to mirror.

        Returns:
            A ReplayMirror (fast_dqn.agent.replay_mirror).
        """
        from fast_dqn.agent.replay_mirror import ReplayMirror
        return ReplayMirror(replay, _backend_module().DeviceArrays)

    def q_values(self, states):
        """The main network's Q-values of `states`.

        Args:
            states: a stack of observations, (N, ...).

        Returns:
            The Q-values as numpy, (N, actions).
        """
        return _check_finite("a Q-value of the main network", self._compiled.main_q(states))

    def target_q_values(self, states):
        """The target network's Q-values of `states`.

        Args:
            states: a stack of observations, (N, ...).

        Returns:
            The Q-values as numpy, (N, actions).
        """
        return _check_finite("a Q-value of the target network",
                             self._compiled.target_q(states))

    def acting_q_values(self, states):
        """target_q_values as the samplers act with them: from a CPU copy with --act-on-cpu.

        Args:
            states: a stack of observations, (N, ...).

        Returns:
            The Q-values as numpy, (N, actions).
        """
        return _check_finite("a Q-value of the target network",
                             self._compiled.acting_q(states))

    def update_target(self):
        """Copy the main network's weights to the target network (only while nobody trains)."""
        self._compiled.update_target()

    def check_weights(self):
        """Raise TrainingDiverged, naming the first weight or optimizer slot that is not finite."""
        if self._compiled.all_finite():
            return
        # Diverged: the search for which one may be slow.
        named = [(f"the main network's {v.path}", v) for v in self.main.weights] \
            + [(f"the target network's {v.path}", v) for v in self.target.weights] \
            + [(f"the optimizer's {v.path}", v) for v in self.optimizer.variables]
        where = first_not_finite((name, keras.ops.convert_to_numpy(v.value))
                                 for name, v in named)
        raise _diverged(where or "a weight")

    def target_weights(self):
        """The target network's weights, for copies that act elsewhere.

        Returns:
            A list of numpy arrays, checked finite first (check_weights).
        """
        self.check_weights()
        return self.target.get_weights()

    def main_weights(self):
        """The main network's weights.

        Returns:
            A list of numpy arrays, checked finite first (check_weights).
        """
        self.check_weights()
        return self.main.get_weights()

    def set_main_weights(self, weights):
        """Set the main network's weights, refusing any that are not finite (TrainingDiverged).

        Args:
            weights: a list of numpy arrays, as main_weights gives them.
        """
        where = first_not_finite((f"weight {i} of the main network", w)
                                 for i, w in enumerate(weights))
        if where:
            raise _diverged(where)
        self.main.set_weights(weights)
        self._compiled.variables_changed()

    def minibatches_trained(self):
        """The optimizer's update count.

        Returns:
            The minibatches trained since the run began.
        """
        return self._compiled.iterations()

    def state_dict(self):
        """Both networks and the optimizer's slots: all a checkpoint needs.

        Returns:
            {"main", "target", "optimizer"}: lists of numpy arrays, checked finite first.
        """
        self.check_weights()
        return {"main": self.main.get_weights(), "target": self.target.get_weights(),
                "optimizer": [v.numpy() for v in self.optimizer.variables]}

    def check_state_dict(self, state, where="/learner"):
        """Raise, changing nothing, where load_state_dict would fail on `state`.

        It raises TrainingDiverged for a NaN or an infinity (a checkpoint written before its
        weights were checked may hold one), NetworkMismatch or BadCount for what they name.

        Args:
            state: a learner's state, as state_dict gives it.
            where: the state's path in the checkpoint, for the message.
        """
        check_state_finite(state)
        for name, variables in (("main", self.main.weights), ("target", self.target.weights),
                                ("optimizer", self.optimizer.variables)):
            _check_shapes(variables, state[name], f"{where}/{name}")
        for i, (variable, value) in enumerate(zip(self.optimizer.variables,
                                                  state["optimizer"])):
            # The optimizer's counts (its iterations, a loss scale's steps): a negative one
            # turns Adam's bias correction into a NaN at the first update.
            if "int" in str(variable.dtype) and not _count(value):
                raise BadCount(f"{where}/optimizer/{i} ({variable.path}) is "
                               f"{np.asarray(value).tolist()}, not a whole number of 0 or "
                               "more: it counts the updates made")

    def load_state_dict(self, state):
        """Load both networks and the optimizer's slots from `state`.

        Args:
            state: a learner's state, as state_dict gives it; check_state_dict refuses a misfit.
        """
        self.check_state_dict(state)
        self.main.set_weights(state["main"])
        self.target.set_weights(state["target"])
        for variable, value in zip(self.optimizer.variables, state["optimizer"]):
            variable.assign(value)
        self._compiled.variables_changed()
