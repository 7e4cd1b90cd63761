"""A trained Q-network as a file that leaves the tool: Keras's own .keras format, made of
Keras's built-in layers only, in float32, so that `keras.saving.load_model(path)` loads it on
any Keras 3 backend without fast-dqn installed.

Training's network has two layers of ours: ScaleFrames (uint8 stacks to float32, channels
last) and, with --dueling, DuelingCombine. The copy replaces the first by Rescaling and
Permute, and folds the second into one Dense layer over both streams' hidden units:

    Q_j = V + A_j - mean_k A_k
        = (w_v . h_v + b_v) + (W_a[j] - mean_k W_a[k]) . h_a + (b_a[j] - mean_k b_a[k])

which is one linear map of concat(h_v, h_a). The copy computes the same Q-values up to
float32 rounding (tests/agent/test_export.py compares them).
"""

import keras
import numpy as np
from keras import layers

from fast_dqn.agent.q_network import DuelingCombine, ScaleFrames


def _float32_clone(layer):
    return layer.__class__.from_config({**layer.get_config(), "dtype": "float32"})


def portable_copy(model, name=None):
    """A float32 copy of `model`, with its weights, made of Keras's built-in layers only.

    Args:
        model: a Q-network as fast_dqn.agent.q_network builds it (nature_cnn or mlp), in any
            compute type, dueling or not.
        name: the copy's name; None keeps the model's.

    Returns:
        The copy, a keras.Model that computes the same Q-values up to float32 rounding.
    """
    inputs = keras.Input(shape=model.inputs[0].shape[1:], dtype=model.inputs[0].dtype)
    x, copies = inputs, []
    streams = ("value_hidden", "value", "advantages_hidden", "advantages")
    dueling = any(isinstance(layer, DuelingCombine) for layer in model.layers)
    if dueling:
        v_hidden, value, a_hidden, advantages = (model.get_layer(n) for n in streams)
    for layer in model.layers:
        if isinstance(layer, (layers.InputLayer, DuelingCombine)) or (
                dueling and layer.name in streams):
            continue
        if isinstance(layer, ScaleFrames):
            x = layers.Rescaling(1.0 / 255.0)(x)
            x = layers.Permute((2, 3, 1))(x)  # (k, H, W) -> (H, W, k), as ScaleFrames
            continue
        copy = _float32_clone(layer)
        x = copy(x)
        copies.append((copy, layer.get_weights()))
    if dueling:
        streams = []
        for hidden in (v_hidden, a_hidden):
            copy = _float32_clone(hidden)
            streams.append(copy(x))
            copies.append((copy, hidden.get_weights()))
        head = layers.Dense(advantages.units, name="q_values")
        x = head(layers.Concatenate()(streams))
        copies.append((head, _folded_dueling(value.get_weights(), advantages.get_weights())))
    copy_model = keras.Model(inputs, x, name=name or model.name)
    for layer, weights in copies:
        layer.set_weights([np.asarray(w, dtype=np.float32) for w in weights])
    return copy_model


def _folded_dueling(value_weights, advantage_weights):
    """The kernel and bias of one Dense over concat(h_v, h_a) that computes V + A - mean(A)."""
    (w_v, b_v), (w_a, b_a) = value_weights, advantage_weights
    num_actions = w_a.shape[1]
    kernel = np.concatenate([np.repeat(w_v, num_actions, axis=1),
                             w_a - w_a.mean(axis=1, keepdims=True)], axis=0)
    bias = b_v + b_a - b_a.mean()
    return [kernel, bias]
