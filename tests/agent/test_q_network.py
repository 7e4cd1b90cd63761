"""The Q-networks: the Nature CNN's and the MLP's dueling heads (Wang et al. 2016)."""

import keras
import numpy as np
import pytest

from fast_dqn.agent.q_network import mlp, nature_cnn


def streams(net):
    return net.get_layer("value"), net.get_layer("advantages")


@pytest.mark.parametrize("build, states", [
    (lambda: nature_cnn((4, 84, 84), 5, dueling=True),
     np.random.default_rng(0).integers(0, 255, (6, 4, 84, 84), dtype=np.uint8)),
    (lambda: mlp((4,), 5, dueling=True),
     np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)),
])
def test_the_dueling_head_is_value_plus_mean_centred_advantages(build, states):
    keras.utils.set_random_seed(0)
    net = build()
    value, advantages = streams(net)
    probe = keras.Model(net.inputs[0], [value.output, advantages.output, net.output])
    v, a, q = (np.asarray(x) for x in probe(states))
    assert v.shape == (6, 1) and a.shape == (6, 5) and q.dtype == np.float32
    np.testing.assert_allclose(q, v + a - a.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    # Centred: Q's mean over actions is V, so a constant added to every advantage changes
    # nothing, and a constant added to V moves every Q-value by it.
    np.testing.assert_allclose(q.mean(axis=1, keepdims=True), v, rtol=1e-5, atol=1e-5)
    kernel, bias = advantages.get_weights()
    advantages.set_weights([kernel, bias + 3.0])
    np.testing.assert_allclose(np.asarray(net(states)), q, rtol=1e-5, atol=1e-5)
    kernel, bias = value.get_weights()
    value.set_weights([kernel, bias + 3.0])
    np.testing.assert_allclose(np.asarray(net(states)), q + 3.0, rtol=1e-5, atol=1e-5)


def test_the_dueling_cnn_has_two_512_unit_streams_on_the_nature_torso():
    plain, dueling = nature_cnn((4, 84, 84), 6), nature_cnn((4, 84, 84), 6, dueling=True)
    # The torso's conv and flatten are shared; the head's 3136 x 512 layer is doubled, and
    # the value stream ends in 1 unit.
    assert dueling.count_params() - plain.count_params() == (3136 * 512 + 512) + (512 + 1)
