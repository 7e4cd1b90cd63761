"""Q-networks in Keras: the Nature DQN CNN for Atari, an MLP for vector observations."""

import keras
from keras import layers, ops


class ScaleFrames(layers.Layer):
    """uint8 (k, H, W) stacks -> float32 (H, W, k) in [0, 1], inside the graph.

    Feeding uint8 keeps host-to-device copies 4x smaller; channels-last is what TF's CPU
    convolutions support, while the replay and env keep frames channels-first.
    """

    def call(self, x):
        return ops.transpose(ops.cast(x, "float32") / 255.0, (0, 2, 3, 1))


def _torch_default_init():
    # uniform(+-1/sqrt(fan_in)), the Nature code's Torch7 default: VarianceScaling's uniform
    # limit is sqrt(3 * scale / fan_in), hence scale 1/3.
    return keras.initializers.VarianceScaling(scale=1.0 / 3.0, mode="fan_in",
                                              distribution="uniform")


class DuelingCombine(layers.Layer):
    """The dueling head's Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a'), as Wang et al. (2016).

    Centring the advantages by their mean makes V and A identifiable, and is what their Atari
    results use.
    """

    def call(self, value, advantages):
        return value + advantages - ops.mean(advantages, axis=1, keepdims=True)


def _q_head(x, num_actions, hidden, dueling, init, kw):
    """The layers after the torso; float32 outputs, so the TD error is never rounded to 8 bits."""
    if not dueling:
        x = layers.Dense(hidden, activation="relu", kernel_initializer=init(), **kw)(x)
        return layers.Dense(int(num_actions), kernel_initializer=init(), dtype="float32")(x)
    # Named, so that fast_dqn.agent.export finds each stream.
    v = layers.Dense(hidden, activation="relu", kernel_initializer=init(), name="value_hidden",
                     **kw)(x)
    v = layers.Dense(1, kernel_initializer=init(), dtype="float32", name="value")(v)
    a = layers.Dense(hidden, activation="relu", kernel_initializer=init(),
                     name="advantages_hidden", **kw)(x)
    a = layers.Dense(int(num_actions), kernel_initializer=init(), dtype="float32",
                     name="advantages")(a)
    return DuelingCombine(dtype="float32")(v, a)


# The Nature code's and Dopamine's versions of the one architecture: (padding, weight
# initialiser). Biases start at zero in both. 'same' makes the last conv 11x11x64 where 'valid'
# gives 7x7x64. Sources: docs/protocol.md#sources-of-the-constants-and-defaults
CNN_STYLES = {"nature": ("valid", _torch_default_init),
              "dopamine": ("same", keras.initializers.GlorotUniform)}


def nature_cnn(input_shape, num_actions, dtype_policy=None, dueling=False, style="nature"):
    """The Nature DQN network: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512, dense |A|; ReLU.

    Args:
        input_shape: the shape of one state, (k, H, W): k stacked uint8 frames of H x W
            pixels, channels first as the replay and the envs keep them.
        num_actions: |A|, how many Q-values it outputs.
        dtype_policy: "mixed_float16" or "mixed_bfloat16" computes in that type with float32
            weights (the Q-value layers stay float32); None computes in float32.
        dueling: whether the head is two 512-unit streams, value and mean-centred advantages.
        style: a key of CNN_STYLES: the Nature code's or Dopamine's padding and initialiser.

    Returns:
        A keras.Model from a batch of states to their float32 Q-values.
    """
    padding, init = CNN_STYLES[style]
    kw = {"dtype": dtype_policy} if dtype_policy else {}
    conv = {"activation": "relu", "padding": padding, **kw}
    inputs = keras.Input(shape=input_shape, dtype="uint8")
    x = ScaleFrames()(inputs)
    x = layers.Conv2D(32, 8, strides=4, kernel_initializer=init(), **conv)(x)
    x = layers.Conv2D(64, 4, strides=2, kernel_initializer=init(), **conv)(x)
    x = layers.Conv2D(64, 3, strides=1, kernel_initializer=init(), **conv)(x)
    x = layers.Flatten(**kw)(x)
    outputs = _q_head(x, num_actions, 512, dueling, init, kw)
    return keras.Model(inputs, outputs, name="nature_cnn")


def mlp(input_shape, num_actions, hidden=(256, 256), dtype_policy=None, dueling=False):
    """A Q-network for vector observations: flatten, ReLU hidden layers, linear Q-values.

    Args:
        input_shape: the shape of one observation.
        num_actions: |A|, how many Q-values it outputs.
        hidden: the units of each hidden layer; with dueling, the last one is doubled into
            the value and advantage streams.
        dtype_policy: as nature_cnn's: a mixed policy's name, or None for float32.
        dueling: whether the head is a value and a mean-centred advantage stream.

    Returns:
        A keras.Model from a batch of observations to their float32 Q-values.
    """
    kw = {"dtype": dtype_policy} if dtype_policy else {}
    inputs = keras.Input(shape=input_shape, dtype="float32")
    x = layers.Flatten(**kw)(inputs)
    for units in hidden[:-1]:
        x = layers.Dense(units, activation="relu", **kw)(x)
    outputs = _q_head(x, num_actions, hidden[-1], dueling, keras.initializers.GlorotUniform, kw)
    return keras.Model(inputs, outputs, name="mlp")
