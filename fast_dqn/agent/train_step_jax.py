"""The learner's compiled functions on JAX: `jax.jit` over Keras's stateless calls.

JAX arrays are immutable: a train step takes the main network's and the optimizer's values
and returns new ones, which are then assigned to the Keras variables, so the variables stay
the state (weights, checkpoints and `update_target` read them) as under TensorFlow.

Threads. The trainer thread alone runs `train` and so assigns the main network's and the
optimizer's variables. The samplers act through the target network, whose variables only
`update_target` assigns, and the loops call that only while nobody trains (a sync point).
A reader takes each variable's current array, which no later step changes, and no buffer is
ever donated to XLA: after `update_target` the target's arrays are the main network's, which
the next train step still reads while a sampler may be acting with them.
"""

import jax
import keras
import numpy as np


def _values(variables):
    return [v.value for v in variables]


def _assign(variables, values):
    for variable, value in zip(variables, values):
        variable.assign(value)


class CompiledSteps:
    def __init__(self, main, target, optimizer, train_step, xla):
        """train_step as in fast_dqn.agent.train_step_tf; xla has nothing to switch here:
        everything JAX compiles goes through XLA."""
        self.main, self.target, self.optimizer = main, target, optimizer

        def loss_of(trainable, non_trainable, target_values, optimizer_values, batch):
            # The optimizer's variables are mapped too: a loss-scaling optimizer reads its
            # current scale from them in scale_loss.
            mapping = (list(zip(main.trainable_variables, trainable))
                       + list(zip(main.non_trainable_variables, non_trainable))
                       + list(zip(target.variables, target_values))
                       + list(zip(optimizer.variables, optimizer_values)))
            with keras.StatelessScope(state_mapping=mapping):
                loss, scaled_loss, mean_q = train_step(main, target, *batch)
            return scaled_loss, (loss, mean_q)

        def step(trainable, non_trainable, target_values, optimizer_values, batch):
            grads, (loss, mean_q) = jax.grad(loss_of, has_aux=True)(
                trainable, non_trainable, target_values, optimizer_values, batch)
            trainable, optimizer_values = optimizer.stateless_apply(optimizer_values, grads,
                                                                    trainable)
            return trainable, optimizer_values, loss, mean_q

        self._step = jax.jit(step)
        # One compiled forward pass serves both networks: they share the architecture, and
        # the values passed in decide whose Q-values come out.
        self._q = jax.jit(_stateless_q(main))

    def train(self, *batch):
        main, optimizer = self.main, self.optimizer
        trainable, optimizer_values, loss, mean_q = self._step(
            _values(main.trainable_variables), _values(main.non_trainable_variables),
            _values(self.target.variables), _values(optimizer.variables), batch)
        # The networks' non-trainable variables are left as they were: none of ours changes
        # in training (no batch normalization).
        _assign(main.trainable_variables, trainable)
        _assign(optimizer.variables, optimizer_values)
        return loss, mean_q

    def main_q(self, states):
        return _q_of(self._q, self.main, states)

    def target_q(self, states):
        return _q_of(self._q, self.target, states)

    def update_target(self):
        _assign(self.target.variables, _values(self.main.variables))


def _stateless_q(network):
    def q(trainable, non_trainable, states):
        return network.stateless_call(trainable, non_trainable, states, training=False)[0]
    return q


def _padded(states):
    """The rows padded with zeros to the next power of two. jit compiles once per shape, and
    an acting batch (the greedy rows of W games) may have any size from 1 to W: so at most
    log2(W) + 1 compiles, in a run's first rounds, instead of W."""
    rows = len(states)
    size = 1 << max(rows - 1, 0).bit_length()
    if size == rows:
        return states
    return np.concatenate([states, np.zeros((size - rows, *states.shape[1:]), states.dtype)])


def _q_of(call, network, states):
    states = np.asarray(states)
    q = call(_values(network.trainable_variables), _values(network.non_trainable_variables),
             _padded(states))
    return jax.device_get(q)[:len(states)]


def predictor(network):
    """network(states) compiled once for acting; it reads the network's current weights."""
    call = jax.jit(_stateless_q(network))
    return lambda states: _q_of(call, network, states)
