"""The learner's compiled functions on TensorFlow: `tf.function`s over the Keras models.

The Keras variables are the state: the train step updates the main network's in place.
TF ops are thread-safe, so the samplers may act through the target network while the
trainer thread trains; the loops decide when `update_target` may run (only while nobody
trains).
"""

import tensorflow as tf


class CompiledSteps:
    def __init__(self, main, target, optimizer, train_step, xla):
        """train_step(main, target, states, actions, rewards, next_states, dones,
        discounts) -> (loss, the loss to differentiate, mean Q), calling the two networks;
        it is backend-neutral, and here it runs under a GradientTape."""
        self.main, self.target, self.optimizer = main, target, optimizer
        self._step = train_step
        spec = tf.TensorSpec((None, *main.input_shape[1:]), main.inputs[0].dtype)
        vector = tf.TensorSpec((None,), tf.float32)
        batch = (spec, tf.TensorSpec((None,), tf.int32), vector, spec, vector, vector)
        self.train = tf.function(self._train, input_signature=batch, jit_compile=xla)
        self._main_q = tf.function(lambda s: main(s, training=False), input_signature=(spec,))
        self._target_q = tf.function(lambda s: target(s, training=False),
                                     input_signature=(spec,))
        self._sync = tf.function(self._copy_main_to_target)

    def _train(self, *batch):
        with tf.GradientTape() as tape:
            loss, scaled_loss, mean_q = self._step(self.main, self.target, *batch)
        grads = tape.gradient(scaled_loss, self.main.trainable_variables)
        self.optimizer.apply(grads, self.main.trainable_variables)
        return loss, mean_q

    def _copy_main_to_target(self):
        for t, m in zip(self.target.weights, self.main.weights):
            t.assign(m)

    def main_q(self, states):
        return self._main_q(states).numpy()

    def target_q(self, states):
        return self._target_q(states).numpy()

    def update_target(self):
        self._sync()


def predictor(network):
    """network(states) compiled once for acting; it reads the network's current weights."""
    spec = tf.TensorSpec((None, *network.input_shape[1:]), network.inputs[0].dtype)
    call = tf.function(lambda s: network(s, training=False), input_signature=(spec,),
                       autograph=False)
    return lambda states: call(states).numpy()
