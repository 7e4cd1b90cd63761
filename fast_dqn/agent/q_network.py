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
    # uniform(+-1/sqrt(fan_in)), the initialisation of the Torch7 layers in the Nature code.
    return keras.initializers.VarianceScaling(scale=1.0 / 3.0, mode="fan_in",
                                              distribution="uniform")


def nature_cnn(input_shape, num_actions, dtype_policy=None):
    """conv 32x8x8/4, conv 64x4x4/2, conv 64x3x3/1, dense 512, dense |A|; ReLU between.

    dtype_policy "mixed_float16" computes in float16 with float32 weights (fast on GPUs with
    tensor cores); the Q-value layer stays float32 so the TD error is not rounded.
    """
    init = _torch_default_init
    kw = {"dtype": dtype_policy} if dtype_policy else {}
    inputs = keras.Input(shape=input_shape, dtype="uint8")
    x = ScaleFrames()(inputs)
    x = layers.Conv2D(32, 8, strides=4, activation="relu", kernel_initializer=init(), **kw)(x)
    x = layers.Conv2D(64, 4, strides=2, activation="relu", kernel_initializer=init(), **kw)(x)
    x = layers.Conv2D(64, 3, strides=1, activation="relu", kernel_initializer=init(), **kw)(x)
    x = layers.Flatten(**kw)(x)
    x = layers.Dense(512, activation="relu", kernel_initializer=init(), **kw)(x)
    outputs = layers.Dense(int(num_actions), kernel_initializer=init(), dtype="float32")(x)
    return keras.Model(inputs, outputs, name="nature_cnn")


def mlp(input_shape, num_actions, hidden=(256, 256), dtype_policy=None):
    """Flatten, ReLU hidden layers, linear Q-values: for classic-control observations."""
    kw = {"dtype": dtype_policy} if dtype_policy else {}
    inputs = keras.Input(shape=input_shape, dtype="float32")
    x = layers.Flatten(**kw)(inputs)
    for units in hidden:
        x = layers.Dense(units, activation="relu", **kw)(x)
    outputs = layers.Dense(int(num_actions), dtype="float32")(x)
    return keras.Model(inputs, outputs, name="mlp")
