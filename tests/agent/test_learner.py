import keras
import numpy as np
import pytest
from backend_math import gradient, nature_lua_gradients, pong_like_batch
from keras import ops

from fast_dqn.agent.batch import Batch
from fast_dqn.agent.compile_options import CompileOptions
from fast_dqn.agent.learner import (
    DQNLearner,
    double_td_targets,
    dqn_loss,
    huber,
    make_optimizer,
    td_targets,
)
from fast_dqn.agent.q_network import nature_cnn


def one_step(states, actions, rewards, next_states, dones, discount=0.9):
    """A one-step Batch: every transition bootstraps with gamma = `discount`."""
    return Batch.of(states, actions, rewards, next_states, dones, discount)


def f32(values):
    return np.asarray(values, np.float32)


def test_td_targets_by_hand():
    rewards = f32([1.0, 0.0, -1.0])
    dones = f32([0.0, 1.0, 0.0])
    next_q = f32([[1.0, 2.0], [3.0, 4.0], [-1.0, -5.0]])
    got = ops.convert_to_numpy(td_targets(rewards, dones, next_q, 0.9))
    np.testing.assert_allclose(got, [1 + 0.9 * 2, 0.0, -1 + 0.9 * -1], rtol=1e-6)


def test_huber_is_quadratic_inside_and_linear_outside():
    got = ops.convert_to_numpy(huber(f32([0.5, -2.0, 1.0, 0.0, 3.5])))
    np.testing.assert_allclose(got, [0.125, 1.5, 0.5, 0.0, 3.0], rtol=1e-6)


@pytest.mark.parametrize("reduction,scale", [("sum", 1.0), ("mean", 1 / 3)])
def test_loss_uses_only_the_taken_actions(reduction, scale):
    q = f32([[1.0, 2.0], [0.0, 0.0], [3.0, -1.0]])
    actions = np.array([1, 0, 1], np.int32)
    targets = f32([2.5, 2.0, 0.0])
    loss = ops.convert_to_numpy(dqn_loss(q, actions, targets, reduction))
    # TD errors 0.5, 2, 1 -> Huber 0.125, 1.5, 0.5 -> summed, or averaged over the 3
    assert loss == pytest.approx((0.125 + 1.5 + 0.5) * scale, rel=1e-6)
    grad = gradient(lambda x: dqn_loss(x, actions, targets, reduction), q)
    # dL/dq = -clip(td, -1, 1) on the taken action (/ batch for the mean), zero elsewhere.
    np.testing.assert_allclose(grad, np.array([[0, -0.5], [-1, 0], [0, -1]]) * scale,
                               atol=1e-7)


def linear_net():
    inputs = keras.Input(shape=(2,), dtype="float32")
    outputs = keras.layers.Dense(2, use_bias=False, kernel_initializer="identity")(inputs)
    return keras.Model(inputs, outputs)


def test_one_train_step_by_hand():
    learner = DQNLearner(linear_net, keras.optimizers.SGD(learning_rate=0.1))
    s = np.array([[1.0, 2.0]], np.float32)
    s2 = np.array([[0.0, 3.0]], np.float32)
    loss, mean_q = learner.train(one_step(s, [0], [1.0], s2, [0.0]))
    # Q(s) = [1, 2]; target = 1 + 0.9 * max(0, 3) = 3.7; TD error 2.7 -> Huber 2.2, clipped
    # gradient -1 on Q(s, 0): kernel column 0 moves by +0.1 * s.
    assert loss == pytest.approx(2.2, rel=1e-6) and mean_q == pytest.approx(1.5)
    np.testing.assert_allclose(learner.main.get_weights()[0], [[1.1, 0.0], [0.2, 1.0]],
                               rtol=1e-6)
    np.testing.assert_allclose(learner.target.get_weights()[0], np.eye(2))  # not yet synced


def test_dones_stop_bootstrapping():
    learner = DQNLearner(linear_net, keras.optimizers.SGD(learning_rate=0.1))
    s = np.array([[1.0, 2.0]], np.float32)
    s2 = np.array([[100.0, 100.0]], np.float32)
    loss, _ = learner.train(one_step(s, [1], [3.0], s2, [1.0]))
    assert loss == pytest.approx(0.5)  # target 3 exactly; TD error 1


def test_update_target_copies_the_main_weights():
    learner = DQNLearner(linear_net, keras.optimizers.SGD(learning_rate=0.1))
    s = np.array([[1.0, 2.0]], np.float32)
    learner.train(one_step(s, [0], [1.0], s, [0.0]))
    trained = learner.main.get_weights()[0]
    assert not np.allclose(trained, learner.target.get_weights()[0])
    learner.update_target()
    # main -> target: both now hold the trained weights (a reversed copy would hold eye(2)).
    np.testing.assert_array_equal(learner.target.get_weights()[0], trained)
    np.testing.assert_array_equal(learner.main.get_weights()[0], trained)
    np.testing.assert_array_equal(learner.q_values(s), learner.target_q_values(s))


def distinct_networks_learner():
    """A linear learner whose target network (2 * identity) differs from its main (identity)."""
    learner = DQNLearner(linear_net, keras.optimizers.SGD(learning_rate=0.1))
    state = learner.state_dict()
    state["target"] = [2 * np.eye(2, dtype=np.float32)]
    learner.load_state_dict(state)
    return learner


def test_the_td_target_uses_the_target_network_and_gradients_reach_main_only():
    learner = distinct_networks_learner()
    s = np.array([[1.0, 0.0]], np.float32)
    s2 = np.array([[0.0, 1.0]], np.float32)
    loss, _ = learner.train(one_step(s, [0], [0.0], s2, [0.0]))
    # max_a' Q_target(s2) = 2 (the main network would say 1): y = 0.9 * 2 = 1.8; Q(s, 0) = 1;
    # TD error 0.8 -> Huber 0.32, gradient -0.8 on Q(s, 0): kernel[0, 0] += 0.1 * 0.8.
    assert loss == pytest.approx(0.5 * 0.8 ** 2, rel=1e-5)
    np.testing.assert_allclose(learner.main.get_weights()[0], [[1.08, 0.0], [0.0, 1.0]],
                               rtol=1e-6)
    np.testing.assert_array_equal(learner.target.get_weights()[0], 2 * np.eye(2))


def test_a_terminal_transition_does_not_bootstrap_even_from_a_different_target():
    learner = distinct_networks_learner()
    s = np.array([[1.0, 0.0]], np.float32)
    s2 = np.array([[0.0, 50.0]], np.float32)
    loss, _ = learner.train(one_step(s, [0], [1.5], s2, [1.0]))
    assert loss == pytest.approx(0.5 * 0.5 ** 2, rel=1e-5)  # y = 1.5 exactly; Q = 1


def test_nature_cnn_shape_and_uint8_input():
    net = nature_cnn((4, 84, 84), 6)
    assert net.inputs[0].dtype == "uint8"
    assert net(np.zeros((3, 4, 84, 84), np.uint8)).shape == (3, 6)
    # The Nature architecture has 1,686,630 parameters for 6 actions (conv + 3136*512 dense).
    assert net.count_params() == (8 * 8 * 4 * 32 + 32) + (4 * 4 * 32 * 64 + 64) + (
        3 * 3 * 64 * 64 + 64) + (3136 * 512 + 512) + (512 * 6 + 6)


@pytest.mark.parametrize("name,cls", [("rmsprop", keras.optimizers.RMSprop),
                                      ("adam", keras.optimizers.Adam)])
def test_optimizers(name, cls):
    opt = make_optimizer(name, 2.5e-4)
    assert isinstance(opt, cls) and float(opt.learning_rate) == pytest.approx(2.5e-4)
    if name == "rmsprop":
        assert opt.centered and opt.rho == 0.95 and opt.epsilon == 0.01


def random_batch(n=8, num_actions=3):
    rng = np.random.default_rng(0)
    return Batch.of(rng.integers(0, 255, (n, 4, 84, 84), dtype=np.uint8),
                    rng.integers(0, num_actions, n), rng.normal(size=n).astype(np.float32),
                    rng.integers(0, 255, (n, 4, 84, 84), dtype=np.uint8), np.zeros(n), 0.99)


def loss_before_and_after(learner, batch, steps=30):
    first, _ = learner.train(batch)
    for _ in range(steps):
        last, _ = learner.train(batch)
    return first, last


def test_nature_learner_reduces_loss_on_a_fixed_batch():
    keras.utils.set_random_seed(0)
    learner = DQNLearner(lambda: nature_cnn((4, 84, 84), 3), make_optimizer("adam", 1e-3))
    first, last = loss_before_and_after(learner, random_batch())
    assert last < 0.5 * first


@pytest.mark.slow  # float16 emulated on most CPUs: 20 s of the fast tier's 2 min on xeon-amx
@pytest.mark.backends
def test_mixed_precision_learner_trains_and_keeps_float32_q_values():
    learner = DQNLearner(lambda: nature_cnn((4, 84, 84), 3, "mixed_float16"),
                         make_optimizer("adam", 1e-3, loss_scaling=True))
    conv = next(layer for layer in learner.main.layers
                if isinstance(layer, keras.layers.Conv2D))
    assert conv.compute_dtype == "float16" and conv.variable_dtype == "float32"
    batch = random_batch()
    first, last = loss_before_and_after(learner, batch)
    assert np.isfinite(last) and last < 0.5 * first
    assert learner.q_values(batch[0]).dtype == np.float32


def nature_rmsprop_step(grads, g, g2, lr=2.5e-4):
    """One update of the Lua code: g = 0.95 g + 0.05 dw; g2 = 0.95 g2 + 0.05 dw^2;
    w -= lr * dw / sqrt(g2 - g^2 + 0.01)."""
    deltas = []
    for i, dw in enumerate(grads):
        g[i] = 0.95 * g[i] + 0.05 * dw
        g2[i] = 0.95 * g2[i] + 0.05 * dw * dw
        deltas.append(-lr * dw / np.sqrt(g2[i] - g[i] ** 2 + 0.01))
    return deltas


@pytest.mark.parametrize("repeat_one_batch", [False, True])
def test_the_default_optimizer_takes_the_nature_codes_update_per_layer(repeat_one_batch):
    """Fresh batches, and one batch again and again: then the running mean of dw nears dw
    itself, so g2 - g^2 is far from g2 and an uncentered RMSProp would be far off too."""
    from fast_dqn.run.components import build_learner
    from fast_dqn.run.settings.hyperparameters import Config
    from fast_dqn.run.settings.validation import resolve
    keras.utils.set_random_seed(0)
    learner = build_learner(resolve(Config()), (4, 84, 84), 6)
    optimizer = learner.optimizer
    assert (optimizer.centered, optimizer.rho, optimizer.epsilon) == (True, 0.95, 0.01)
    assert float(optimizer.learning_rate) == pytest.approx(2.5e-4)
    rng = np.random.default_rng(0)
    g = [np.zeros_like(w) for w in learner.main.get_weights()]
    g2 = [np.zeros_like(w) for w in learner.main.get_weights()]
    same = pong_like_batch(rng)
    for _ in range(25 if repeat_one_batch else 4):
        batch = same if repeat_one_batch else pong_like_batch(rng)
        expected = nature_rmsprop_step(nature_lua_gradients(learner, batch), g, g2)
        before = learner.main.get_weights()
        learner.train(batch)
        for layer, (b, a, e) in enumerate(zip(before, learner.main.get_weights(), expected)):
            applied = a - b
            ratio = np.linalg.norm(applied) / np.linalg.norm(e)
            assert 0.98 <= ratio <= 1.02, f"layer {layer}: update {ratio:.3f} x Nature's"
            cosine = np.sum(applied * e) / (np.linalg.norm(applied) * np.linalg.norm(e))
            assert cosine > 0.999, f"layer {layer}: update direction off ({cosine:.4f})"


# --- Double DQN, n-step bootstrap discounts, bfloat16 (issue: Pong in 90 minutes)

def test_double_td_targets_by_hand():
    rewards = f32([1.0, 0.0, -1.0])
    dones = f32([0.0, 1.0, 0.0])
    next_main = f32([[5.0, 1.0], [0.0, 9.0], [-1.0, 2.0]])    # picks a' = 0, 1, 1
    next_target = f32([[1.0, 2.0], [3.0, 4.0], [-1.0, -5.0]])  # values them
    got = ops.convert_to_numpy(double_td_targets(rewards, dones, next_main, next_target, 0.9))
    # Not the target's max (2, 4, -1): the target's value of main's choice.
    np.testing.assert_allclose(got, [1 + 0.9 * 1.0, 0.0, -1 + 0.9 * -5.0], rtol=1e-6)


def learner_with(main, target, double):
    learner = DQNLearner(linear_net, keras.optimizers.SGD(learning_rate=0.1), double=double)
    state = learner.state_dict()
    state["main"], state["target"] = [np.float32(main)], [np.float32(target)]
    learner.load_state_dict(state)
    return learner


@pytest.mark.parametrize("double", [False, True])
def test_double_dqn_lets_main_pick_and_target_value(double):
    """s' = (1, 0.5): main (identity) prefers action 0, target ([[1, 0], [0, 4]]) values the
    actions 1 and 2, so its max is action 1. Double: y = 0.9 * 1; Nature: y = 0.9 * 2."""
    learner = learner_with(np.eye(2), [[1.0, 0.0], [0.0, 4.0]], double)
    s, s2 = np.array([[1.0, 0.0]], np.float32), np.array([[1.0, 0.5]], np.float32)
    loss, _ = learner.train(one_step(s, [0], [0.0], s2, [0.0]))
    y = 0.9 * (1.0 if double else 2.0)
    assert loss == pytest.approx(0.5 * (y - 1.0) ** 2, rel=1e-5)   # Q(s, 0) = 1
    # Gradients reach main through Q(s, a) only, not through its pick of a'.
    np.testing.assert_allclose(learner.main.get_weights()[0],
                               [[1 + 0.1 * (y - 1.0), 0.0], [0.0, 1.0]], rtol=1e-6)


def test_each_transition_bootstraps_with_its_own_discount():
    """An n-step transition of m steps bootstraps with gamma^m, which replay hands over."""
    learner = learner_with(np.eye(2), 2 * np.eye(2), double=False)
    s = np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
    s2 = np.array([[0.0, 1.0], [0.0, 1.0]], np.float32)
    q_before = learner.q_values(s)[:, 0]
    loss, _ = learner.train(Batch.of(s, [0, 0], [0.5, 0.5], s2, [0.0, 0.0], [0.25, 0.81]))
    y = np.array([0.5 + 0.25 * 2, 0.5 + 0.81 * 2])                  # max Q_target(s') = 2
    assert loss == pytest.approx(
        float(np.sum(ops.convert_to_numpy(huber(f32(y - q_before))))), rel=1e-5)
    # One discount for the whole batch (a one-step return's gamma) reaches every transition.
    learner = learner_with(np.eye(2), 2 * np.eye(2), double=False)
    loss, _ = learner.train(one_step(s[:1], [0], [0.5], s2[:1], [0.0], discount=0.9))
    assert loss == pytest.approx(1.3 - 0.5, rel=1e-5)  # TD error 0.5 + 0.9 * 2 - 1 = 1.3: linear


@pytest.mark.slow  # emulated bfloat16 on CPUs without it: seconds
@pytest.mark.backends
def test_bfloat16_learner_computes_in_bfloat16_and_keeps_float32_q_values():
    learner = DQNLearner(lambda: nature_cnn((4, 84, 84), 3, "mixed_bfloat16", dueling=True),
                         make_optimizer("adam", 1e-3), double=True)
    conv = next(layer for layer in learner.main.layers
                if isinstance(layer, keras.layers.Conv2D))
    assert conv.compute_dtype == "bfloat16" and conv.variable_dtype == "float32"
    assert learner.main.output.dtype == "float32"
    batch = random_batch()
    first, last = loss_before_and_after(learner, batch)
    assert np.isfinite(last) and last < 0.5 * first
    assert learner.q_values(batch[0]).dtype == np.float32


def test_q_values_of_any_number_of_rows_are_those_of_each_row():
    """Acting batches take every size from 1 to W (JAX pads them to a power of two)."""
    keras.utils.set_random_seed(0)
    learner = DQNLearner(lambda: nature_cnn((4, 84, 84), 3), make_optimizer("adam", 1e-3))
    states = random_batch(n=7)[0]
    every = learner.q_values(states)
    assert every.shape == (7, 3) and learner.target_q_values(states).shape == (7, 3)
    for rows in (1, 3, 5):
        np.testing.assert_allclose(learner.q_values(states[:rows]), every[:rows], rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("xla", [False, True])
@pytest.mark.backends
def test_loss_scaling_takes_the_unscaled_step(xla):
    """A loss-scaling optimizer multiplies the loss by its scale (2^15 at first) and divides
    the gradients by it: plain SGD's step of test_one_train_step_by_hand, exactly. Without
    the scaling the gradients would be 2^15 times too small, without the unscaling 2^15 times
    too large. With TensorFlow's XLA compilation too (JAX always compiles with XLA)."""
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(learning_rate=0.1))
    learner = DQNLearner(linear_net, optimizer, CompileOptions(xla=xla))
    s = np.array([[1.0, 2.0]], np.float32)
    s2 = np.array([[0.0, 3.0]], np.float32)
    loss, _ = learner.train(one_step(s, [0], [1.0], s2, [0.0]))
    assert loss == pytest.approx(2.2, rel=1e-6)  # reported unscaled
    np.testing.assert_allclose(learner.main.get_weights()[0], [[1.1, 0.0], [0.2, 1.0]],
                               rtol=1e-6)
    assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** 15  # finite grads: kept
    assert learner.minibatches_trained() == 1


# --- the learner's own word on a checkpoint's state (fast_dqn.run.training orders the calls)

def _swapped(weights):
    return [weights[1], weights[0], *weights[2:]]


@pytest.mark.parametrize("edit, error, expected", [
    (lambda s: s.update(target=_swapped(s["target"])), "NetworkMismatch",
     "/learner/target/0 holds shape (8,), not (4, 8) as this run's network needs"),
    (lambda s: s.update(main=s["main"][:-1]), "NetworkMismatch",
     "/learner/main holds 3 arrays, not the 4 of this run's network"),
    (lambda s: s.update(optimizer=s["optimizer"][:-1]), "NetworkMismatch",
     "/learner/optimizer holds 9 arrays, not the 10 of this run's network"),
    (lambda s: s["optimizer"].__setitem__(-1, np.zeros(3, np.float32)), "NetworkMismatch",
     "/learner/optimizer/9 holds shape (3,), not (2,) as this run's network needs"),
    (lambda s: s["main"][0].__setitem__((0, 0), np.nan), "TrainingDiverged",
     "weight 0 of the main network is not finite"),
    # Adam's bias correction of a negative count is a NaN at the next update.
    (lambda s: s["optimizer"].__setitem__(0, np.int64(-5)), "BadCount",
     "iteration) is -5, not a whole number of 0 or more: it counts the updates made"),
    (lambda s: s["optimizer"].__setitem__(0, np.float64(2.5)), "BadCount",
     "iteration) is 2.5, not a whole number"),
], ids=["weights swapped", "a weight missing", "a slot missing", "a slot of another shape",
        "a NaN", "a negative count", "a count that is not whole"])
def test_the_learner_refuses_a_saved_state_that_does_not_fit_it_and_changes_nothing(
        edit, error, expected):
    from fast_dqn.agent import learner as module
    from fast_dqn.state_schema import StateMismatch

    def mlp():
        inputs = keras.Input(shape=(4,), dtype="float32")
        hidden = keras.layers.Dense(8, activation="relu")(inputs)
        return keras.Model(inputs, keras.layers.Dense(2)(hidden), name="mlp")
    keras.utils.set_random_seed(0)
    learner = DQNLearner(mlp, make_optimizer("adam", 1e-3))
    saved = learner.state_dict()
    learner.check_state_dict(saved)  # its own state fits
    learner.train(one_step(np.ones((2, 4), np.float32), [0, 1], [1.0, 0.0],
                           np.zeros((2, 4), np.float32), [0.0, 1.0]))
    before = learner.state_dict()
    edit(saved)
    with pytest.raises(getattr(module, error)) as refused:
        learner.check_state_dict(saved)
    assert expected in str(refused.value)
    if error != "TrainingDiverged":  # a StateMismatch, and a ValueError as Keras's refusal was
        assert isinstance(refused.value, StateMismatch) and isinstance(refused.value, ValueError)
    with pytest.raises(getattr(module, error)):
        learner.load_state_dict(saved)  # checked first: nothing is loaded
    after = learner.state_dict()
    for key in ("main", "target", "optimizer"):
        for a, b in zip(before[key], after[key], strict=True):
            np.testing.assert_array_equal(a, b)
