"""The learner's compiled functions on TensorFlow: `tf.function`s over the Keras models.

The Keras variables are the state, and they live on the device already: the train step
updates the main network's in place, and K minibatches go through one `tf.function` (a loop
in the graph). TF ops are thread-safe, so the samplers may act through the target network
while the trainer thread trains; the loops decide when `update_target` may run (only while
nobody trains). CompiledSteps, predictor, to_device and DeviceArrays are train_step_jax's
twins, whose docstrings serve both.

No function here goes through AutoGraph (`autograph=False`; the one loop is a
`tf.while_loop`): AutoGraph hands TensorFlow's C++ a map of this package's source file
names, and a name that is not UTF-8 (a checkout under such a path) cannot cross, so every
train step would fail there. Nothing here needs it: the train step's Python branches are on
settings, never on tensors.
"""

import tensorflow as tf

from fast_dqn.agent.replay_gather import FIELDS


def _function(python_function, **options):
    """tf.function without AutoGraph (see above)."""
    return tf.function(python_function, autograph=False, **options)


class CompiledSteps:
    """The learner's tf.functions on TensorFlow, over the Keras variables as its state.

    train_step runs under a GradientTape here. The CompileOptions' xla compiles the train calls
    with XLA (jit_compile); determinism is process-wide (backend_setup), and the scan's unroll,
    the fused optimizer step and acting on the CPU are JAX's only. train and train_many are
    tf.function attributes, not methods.
    """

    def __init__(self, main, target, optimizer, train_step, options):
        if options.scan_unroll or options.fused_optimizer or options.act_on_cpu:
            raise ValueError("--scan-unroll, --fused-optimizer and --act-on-cpu are JAX's "
                             "only: they compile under JAX only")
        xla = options.xla
        self.main, self.target, self.optimizer = main, target, optimizer
        self._step = train_step
        self._gather = self.replay_arrays = None  # what the replay calls gather, from where
        shape, dtype = main.input_shape[1:], main.inputs[0].dtype
        spec = tf.TensorSpec((None, *shape), dtype)
        vector = tf.TensorSpec((None,), tf.float32)
        batch = (spec, tf.TensorSpec((None,), tf.int32), vector, spec, vector, vector)
        self.train = _function(self._train, input_signature=batch, jit_compile=xla)
        many = tf.TensorSpec((None, None, *shape), dtype)
        vectors = tf.TensorSpec((None, None), tf.float32)
        batches = (many, tf.TensorSpec((None, None), tf.int32), vectors, many, vectors,
                   vectors)
        self.train_many = _function(self._train_many, input_signature=batches,
                                    jit_compile=xla)
        indices = (tf.TensorSpec((None, None), tf.int32),) * 2
        self._train_replay = _function(self._train_from_replay, input_signature=indices,
                                       jit_compile=xla)
        self._main_q = _function(lambda s: main(s, training=False), input_signature=(spec,))
        self._target_q = _function(lambda s: target(s, training=False),
                                   input_signature=(spec,))
        self._sync = _function(self._copy_main_to_target)
        self._all_finite = None  # traced at its first call, with every variable built

    def _train(self, *batch):
        with tf.GradientTape() as tape:
            loss, scaled_loss, mean_q = self._step(self.main, self.target, *batch)
        grads = tape.gradient(scaled_loss, self.main.trainable_variables)
        self.optimizer.apply(grads, self.main.trainable_variables)
        return loss, mean_q

    def _loop(self, count, batch_of):
        def body(i, losses, mean_qs):
            loss, mean_q = self._train(*batch_of(i))
            return (i + 1, losses.write(i, tf.cast(loss, tf.float32)),
                    mean_qs.write(i, tf.cast(mean_q, tf.float32)))

        _, losses, mean_qs = tf.while_loop(
            lambda i, *_: i < count, body,
            (tf.constant(0), tf.TensorArray(tf.float32, size=count),
             tf.TensorArray(tf.float32, size=count)))
        return losses.stack(), mean_qs.stack()

    def _train_many(self, *batches):
        return self._loop(tf.shape(batches[1])[0], lambda i: [b[i] for b in batches])

    def _train_from_replay(self, shards, idx):
        arrays = {name: self.replay_arrays[name] for name in FIELDS}
        return self._loop(tf.shape(idx)[0],
                          lambda i: self._gather.batch(arrays, shards[i], idx[i]))

    def train_from_replay(self, gather, arrays, shards, idx):
        """As train_step_jax's; `arrays` must be the first call's: one replay per learner."""
        # The graph, traced at the first call, reads the variables it captured then.
        if self.replay_arrays is None:
            self._gather, self.replay_arrays = gather, arrays
        elif self.replay_arrays is not arrays:
            raise ValueError("one learner trains from one replay on the device")
        return self._train_replay(shards, idx)

    def _copy_main_to_target(self):
        for t, m in zip(self.target.weights, self.main.weights):
            t.assign(m)

    def keras_variables(self):
        """Nothing to do: the Keras variables are the state."""

    def variables_changed(self):
        """Nothing to do: the calls read the variables themselves."""

    def main_q(self, states):
        return self._main_q(states).numpy()

    def target_q(self, states):
        return self._target_q(states).numpy()

    acting_q = target_q  # --act-on-cpu is JAX's alone

    def update_target(self):
        self._sync()

    def iterations(self):
        return int(self.optimizer.iterations.numpy())

    def all_finite(self):
        if self._all_finite is None:
            variables = [v.value for v in (self.main.weights + self.target.weights
                                           + list(self.optimizer.variables))
                         if tf.as_dtype(v.dtype).is_floating]

            def check():
                checks = [tf.reduce_all(tf.math.is_finite(v)) for v in variables]
                return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)
            self._all_finite = _function(check)
        return bool(self._all_finite().numpy())


def predictor(network):
    spec = tf.TensorSpec((None, *network.input_shape[1:]), network.inputs[0].dtype)
    call = _function(lambda s: network(s, training=False), input_signature=(spec,))
    return lambda states: call(states).numpy()


def to_device(array):
    return tf.convert_to_tensor(array)


class DeviceArrays:
    """As train_step_jax.DeviceArrays; here its arrays are tf.Variables."""

    def __init__(self, host_arrays):
        self.arrays = {name: tf.Variable(a, trainable=False) for name, a in host_arrays.items()}

    def write(self, shards, cols, values):
        where = tf.stack([tf.convert_to_tensor(shards), tf.convert_to_tensor(cols)], axis=1)
        for name, variable in self.arrays.items():
            variable.scatter_nd_update(where, values[name])
