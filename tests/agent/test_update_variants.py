"""Each compile choice (fast_dqn.agent.compile_options) against the default on the same
minibatches: the scan unrolled by 1, 2 or 4; the optimizer's step fused over all weights;
kernels free to be non-deterministic. For Nature, Double, dueling, 3-step, Adam, both
RMSProp starts and bfloat16, over two calls (the fused slots go flat and back between them),
through single steps, K-update calls and replay on the device.

JAX's choices: under TensorFlow (the suite's default) only the refusals run here, and
tests/end_to_end/test_keras_backends.py runs this file again in a JAX child."""

import keras
import numpy as np
import pytest
from helpers import POLICIES, filled_replay

from fast_dqn.agent.batch import Batch
from fast_dqn.agent.compile_options import CompileOptions
from fast_dqn.agent.learner import DQNLearner, make_optimizer
from fast_dqn.agent.q_network import mlp, nature_cnn

ON_JAX = keras.backend.backend() == "jax"
jax_only = pytest.mark.skipif(not ON_JAX, reason="JAX's: run in a JAX child by "
                              "tests/end_to_end/test_keras_backends.py")

VARIANTS = {
    "nature": {},
    "rmsprop-from-one": {"rmsprop_init": 1.0},
    "double": {"double": True},
    "dueling": {"dueling": True},
    "3-step": {"n_step": 3},
    "adam": {"optimizer": "adam"},
    "double-dueling-3-step-adam-bfloat16": {"double": True, "dueling": True, "n_step": 3,
                                           "optimizer": "adam", "precision": "bfloat16"},
}

CHOICES = {
    "unroll-1": CompileOptions(scan_unroll=1),
    "unroll-2": CompileOptions(scan_unroll=2),
    "unroll-4": CompileOptions(scan_unroll=4),   # K = 6: a remainder of 2
    "fused": CompileOptions(fused_optimizer=True),
    "fused-unroll-2": CompileOptions(fused_optimizer=True, scan_unroll=2),
    "not-deterministic": CompileOptions(deterministic=False),
}

# Relative to each weight's largest update, and to each optimizer slot's largest value: the
# choices reorder float32 rounding only (measured over every case here: at most 9.2e-5 of
# an update, 7.1e-5 of a slot), while a wrong step (rho and 1 - rho swapped, the centring
# dropped) is off by more than 1e-2.
WEIGHT_TOLERANCE, SLOT_TOLERANCE = 1e-3, 1e-3


def learner_for(variant, options, shape=(4, 6, 5), actions=4, network="mlp"):
    keras.utils.set_random_seed(0)
    policy, dueling = POLICIES[variant.get("precision", "float32")], variant.get("dueling")
    if network == "cnn":
        build = lambda: nature_cnn(shape, actions, policy, dueling=dueling)  # noqa: E731
    else:
        build = lambda: mlp(shape, actions, (32,), policy, dueling=bool(dueling))  # noqa: E731
    optimizer = make_optimizer(variant.get("optimizer", "rmsprop"), 1e-3,
                               rmsprop_init=variant.get("rmsprop_init", 0.0))
    return DQNLearner(build, optimizer, options, double=variant.get("double", False))


def assert_close_states(got, want, start):
    """Weights within WEIGHT_TOLERANCE of their largest update; slots within SLOT_TOLERANCE."""
    for i, (g, w, s) in enumerate(zip(got.main_weights(), want.main_weights(), start)):
        size = np.max(np.abs(w - s))
        assert size > 0, f"weight {i} did not move"
        assert np.max(np.abs(g - w)) <= WEIGHT_TOLERANCE * size, f"weight {i}"
    slots_got, slots_want = got.state_dict()["optimizer"], want.state_dict()["optimizer"]
    for i, (g, w) in enumerate(zip(slots_got, slots_want)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert np.max(np.abs(g - w)) <= SLOT_TOLERANCE * max(np.max(np.abs(w)), 1e-30), \
            f"optimizer variable {i}"
    assert got.minibatches_trained() == want.minibatches_trained()


def calls(variant, k=6, count=2):
    replay = filled_replay(variant.get("n_step", 1))
    return replay, [replay.sample_indices_many(k, 16) for _ in range(count)]


def trained(learner, replay, drawn, how):
    """The learner after the drawn calls: in K-update calls, from replay on the device, or
    one minibatch at a time."""
    mirror = learner.mirror_replay(replay) if how == "device" else None
    for shards, idx in drawn:
        if how == "device":
            learner.train_from_replay(mirror, shards, idx)
            continue
        batches = replay.gather_many(shards, idx)
        if how == "calls":
            learner.train_many(batches)
        else:
            for j in range(len(idx)):
                learner.train(Batch(*(a[j] for a in batches)))
    return learner


FAST = {("nature", "fused"), ("nature", "unroll-1"), ("adam", "fused")}


@jax_only
@pytest.mark.parametrize("variant,choice", [
    (v, c) if (v, c) in FAST else pytest.param(v, c, marks=pytest.mark.slow)
    for v in VARIANTS for c in CHOICES
    if v == "nature" or c in ("unroll-1", "unroll-4", "fused", "not-deterministic")])
def test_each_compile_choice_trains_as_the_default_does(variant, choice):
    replay, drawn = calls(VARIANTS[variant])
    want = learner_for(VARIANTS[variant], CompileOptions())
    start = want.main_weights()
    trained(want, replay, drawn, "calls")
    got = trained(learner_for(VARIANTS[variant], CHOICES[choice]), replay, drawn, "calls")
    assert_close_states(got, want, start)


@jax_only
@pytest.mark.parametrize("how", ["steps", "device"])
def test_the_fused_step_matches_in_single_steps_and_from_replay_on_the_device(how):
    variant = VARIANTS["nature"]
    replay, drawn = calls(variant, k=3)
    want = learner_for(variant, CompileOptions())
    start = want.main_weights()
    trained(want, replay, drawn, "calls")
    got = trained(learner_for(variant, CompileOptions(fused_optimizer=True)), replay, drawn,
                  how)
    assert_close_states(got, want, start)


@jax_only
@pytest.mark.slow  # the Nature CNN: seconds of compiling
def test_the_fused_step_matches_on_the_nature_cnn():
    replay = filled_replay(frame_shape=(84, 84), capacity=300, steps=120)
    drawn = [replay.sample_indices_many(3, 8)]
    variant = {"optimizer": "rmsprop"}
    want = learner_for(variant, CompileOptions(), (4, 84, 84), 6, "cnn")
    start = want.main_weights()
    trained(want, replay, drawn, "calls")
    got = trained(learner_for(variant, CompileOptions(fused_optimizer=True, scan_unroll=1),
                              (4, 84, 84), 6, "cnn"), replay, drawn, "calls")
    assert_close_states(got, want, start)


@jax_only
def test_a_fused_step_is_refused_for_an_optimizer_it_does_not_do():
    for optimizer in (keras.optimizers.SGD(0.1), make_optimizer("rmsprop", 1e-3,
                                                                loss_scaling=True),
                      keras.optimizers.Adam(1e-3, amsgrad=True)):
        with pytest.raises(ValueError, match="fused optimizer step does"):
            DQNLearner(lambda: mlp((4, 6, 5), 4, (8,)), optimizer,
                       CompileOptions(fused_optimizer=True))


def test_each_backend_takes_the_choices_it_compiles():
    """JAX unrolls as asked; TensorFlow's loop has no unroll nor a fused step: refused."""
    for options in (CompileOptions(scan_unroll=2), CompileOptions(fused_optimizer=True),
                    CompileOptions(act_on_cpu=True)):
        def build():
            return DQNLearner(lambda: mlp((4, 6, 5), 4, (8,)), make_optimizer("adam", 1e-3),
                              options)
        if not ON_JAX:
            with pytest.raises(ValueError, match="under JAX only"):
                build()
            continue
        parts = build().compiled_steps.parts
        assert parts.unroll == (options.scan_unroll or True)
        assert (parts.fused is not None) == options.fused_optimizer
    if ON_JAX:  # the train calls compile free of XLA_FLAGS' deterministic kernels
        free = DQNLearner(lambda: mlp((4, 6, 5), 4, (8,)), make_optimizer("adam", 1e-3),
                          CompileOptions(deterministic=False)).compiled_steps
        assert free.jit_options == {"compiler_options": {"xla_gpu_deterministic_ops": False}}
        assert learner_for({}, CompileOptions()).compiled_steps.jit_options == {}


@jax_only
def test_acting_on_the_cpu_reads_the_target_as_it_is_at_each_sync_point():
    """The samplers' calls read a copy of the target network: the same Q-values, frozen
    while main trains, renewed by each copy of main to target and by a loaded state."""
    replay, drawn = calls(VARIANTS["nature"], k=4)
    states = replay.gather_many(*drawn[0]).states[0]
    default = learner_for({}, CompileOptions())
    learner = learner_for({}, CompileOptions(act_on_cpu=True))
    frozen = learner.acting_q_values(states)
    np.testing.assert_array_equal(frozen, default.target_q_values(states))
    trained(learner, replay, drawn, "calls")
    trained(default, replay, drawn, "calls")  # without the option: the target, on the device
    np.testing.assert_array_equal(default.acting_q_values(states),
                                  default.target_q_values(states))
    assert not np.allclose(default.acting_q_values(states), default.q_values(states))
    np.testing.assert_array_equal(learner.acting_q_values(states), frozen)
    learner.update_target()
    moved = learner.q_values(states)
    assert not np.allclose(moved, frozen)
    np.testing.assert_array_equal(learner.acting_q_values(states), moved)
    learner.load_state_dict(default.state_dict())
    np.testing.assert_array_equal(learner.acting_q_values(states), frozen)
    # Evaluation and every other reader go through the device's copy, never the CPU's.
    assert learner.compiled_steps._target_on_cpu is not None
    learner.update_target()
    learner.target_q_values(states)
    assert learner.compiled_steps._target_on_cpu is None


@jax_only
def test_one_fused_rmsprop_step_by_hand():
    """The Nature code's centered RMSProp, one step from zero slots, computed here in numpy:
    v = ρv + (1−ρ)g², m = ρm + (1−ρ)g, w −= lr·g / sqrt(v − m² + ε), ε inside the root."""
    from fast_dqn.agent.fused_optimizer import FusedLayout
    learner = learner_for({}, CompileOptions(fused_optimizer=True))
    optimizer = learner.optimizer
    layout = learner.compiled_steps.parts.fused
    assert isinstance(layout, FusedLayout)
    values = [np.asarray(v) for v in learner.state_dict()["optimizer"]]
    weights = np.concatenate([w.ravel() for w in learner.main_weights()])
    g = np.random.default_rng(0).normal(size=weights.shape).astype(np.float32)
    w, flat = layout.step(layout.flatten(values), g, weights)
    rho, eps, lr = 0.95, optimizer.epsilon, 1e-3
    v, m = (1 - rho) * g ** 2, (1 - rho) * g
    np.testing.assert_allclose(flat.slots[0], v, rtol=1e-6)
    np.testing.assert_allclose(flat.slots[1], m, rtol=1e-6)
    np.testing.assert_allclose(w, weights - lr * g / np.sqrt(v - m ** 2 + eps), rtol=1e-6,
                               atol=1e-9)
    assert int(flat.iterations) == 1
