"""Gradients taken by hand in a test, on whichever Keras backend this process runs, and the
Nature code's own rule and minibatches that tests/agent/test_learner.py and
tests/run/settings/test_dopamine_preset.py both check a learner against."""

import keras
import numpy as np
from keras import ops

from fast_dqn.agent.batch import Batch


def gradient(f, x):
    """df/dx at x (numpy) of a scalar function of one tensor."""
    if keras.backend.backend() == "jax":
        import jax
        return np.asarray(jax.grad(f)(np.asarray(x)))
    import tensorflow as tf
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return tape.gradient(y, x).numpy()


def weight_gradients(network, states, f):
    """d f(network(states)) / d each trainable weight, as numpy, in training mode."""
    if keras.backend.backend() == "jax":
        import jax
        non_trainable = [v.value for v in network.non_trainable_variables]

        def of(trainable):
            return f(network.stateless_call(trainable, non_trainable, states, training=True)[0])
        return [np.asarray(g) for g in
                jax.grad(of)([v.value for v in network.trainable_variables])]
    import tensorflow as tf
    with tf.GradientTape() as tape:
        y = f(network(states, training=True))
    return [g.numpy() for g in tape.gradient(y, network.trainable_variables)]


def nature_lua_gradients(learner, batch, discount=0.99):
    """dw as NeuralQLearner.lua computes it: the TD error of the taken action, clipped to
    [-1, 1], backpropagated through the main network and summed over the minibatch."""
    states, actions, rewards, next_states, dones, _ = batch
    next_max = learner.target_q_values(next_states).max(axis=1)
    targets = rewards + discount * (1.0 - dones) * next_max
    taken = learner.q_values(states)[np.arange(len(actions)), actions]
    clipped = np.clip(targets - taken, -1.0, 1.0).astype(np.float32)
    one_hot = np.eye(learner.main.output_shape[-1], dtype=np.float32)[actions]
    # Lua ascends with +delta; the descent gradient is its negative.
    return weight_gradients(learner.main, states,
                            lambda q: -ops.sum(q * (one_hot * clipped[:, None])))


def pong_like_batch(rng, n=32, num_actions=6):
    frames = rng.integers(0, 2, (n, 4, 84, 84), dtype=np.uint8) * 144  # binary screens
    next_frames = np.roll(frames, 1, axis=3)
    return Batch.of(frames, rng.integers(0, num_actions, n),
                    rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0], n), next_frames,
                    rng.random(n) < 0.1, 0.99)
