"""Gradients taken by hand in a test, on whichever Keras backend this process runs."""

import keras
import numpy as np


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
