"""K minibatches in one compiled call (DQNLearner.train_many, train_from_replay) against K
single calls on the same minibatches, and replay's gather on the device against numpy's.

On the process's Keras backend; tests/end_to_end/test_keras_backends.py runs this file
again on the other one."""

import keras
import numpy as np
import pytest
from helpers import POLICIES, filled_replay

from fast_dqn.agent.batch import Batch
from fast_dqn.agent.learner import DQNLearner, TrainingDiverged, make_optimizer
from fast_dqn.agent.q_network import mlp, nature_cnn


def learner_for(variant, input_shape=(4, 6, 5), num_actions=4):
    """A learner of one of the variants the fused call must match, seeded the same way."""
    keras.utils.set_random_seed(0)
    policy = POLICIES[variant.get("precision", "float32")]
    dueling = variant.get("dueling", False)
    if variant.get("network") == "cnn":
        build = lambda: nature_cnn(input_shape, num_actions, policy, dueling=dueling)  # noqa
    else:
        build = lambda: mlp(input_shape, num_actions, (32,), policy, dueling=dueling)  # noqa
    optimizer = make_optimizer(variant.get("optimizer", "rmsprop"),
                               variant.get("lr", 1e-3), rmsprop_init=0.0)
    return DQNLearner(build, optimizer, double=variant.get("double", False))


def largest_updates(before, after):
    return [np.max(np.abs(a - b)) for a, b in zip(after, before)]


def assert_same_weights(fused, single, before, tolerance=0.01):
    """Each variable within `tolerance` of its largest update: the TF-versus-JAX check's."""
    for i, (f, s, size) in enumerate(zip(fused, single, largest_updates(before, single))):
        assert size > 0, f"variable {i} did not move"
        err = np.max(np.abs(f - s))
        assert err <= tolerance * size, f"variable {i}: {err:.3g} off, update {size:.3g}"


VARIANTS = {
    "nature": {},
    "double": {"double": True},
    "dueling": {"dueling": True},
    "n-step": {"n_step": 3},
    "adam": {"optimizer": "adam"},
    "bfloat16": {"precision": "bfloat16"},
    "double-dueling-n-step-adam-bfloat16": {"double": True, "dueling": True, "n_step": 3,
                                           "optimizer": "adam", "precision": "bfloat16"},
}


# Two variants in the fast tier, every one in the whole suite (and on the other backend).
FAST_TIER = ("nature", "double-dueling-n-step-adam-bfloat16")


@pytest.mark.parametrize("name", [name if name in FAST_TIER else
                                  pytest.param(name, marks=pytest.mark.slow)
                                  for name in VARIANTS])
def test_k_fused_updates_equal_k_single_ones_on_the_same_minibatches(name):
    variant = VARIANTS[name]
    replay = filled_replay(variant.get("n_step", 1))
    k = 6
    shards, idx = replay.sample_indices_many(k, 16)
    batches = replay.gather_many(shards, idx)
    single, fused = learner_for(variant), learner_for(variant)
    before = single.main_weights()
    assert all(np.array_equal(a, b) for a, b in zip(before, fused.main_weights()))
    losses = [single.train(Batch(*(a[j] for a in batches)))[0] for j in range(k)]
    fused_losses, mean_qs = fused.train_many(batches)
    assert fused_losses.shape == mean_qs.shape == (k,)
    np.testing.assert_allclose(fused_losses, losses, rtol=2e-2, atol=1e-4)
    assert_same_weights(fused.main_weights(), single.main_weights(), before)
    assert fused.minibatches_trained() == single.minibatches_trained() == k
    # The target network is untouched by training on either path.
    assert all(np.array_equal(a, b) for a, b in zip(fused.target_weights(), before))
    mirror = learner_for(variant)
    from_replay = mirror.train_from_replay(mirror.mirror_replay(replay), shards, idx)
    np.testing.assert_allclose(from_replay[0], losses, rtol=2e-2, atol=1e-4)
    assert_same_weights(mirror.main_weights(), single.main_weights(), before)


@pytest.mark.parametrize("double", [False, True])
def test_a_fused_call_bootstraps_from_the_target_network_when_main_has_moved(double):
    """A fused call values its next states through the target network in one pass before
    its updates. Above, main equals target when the call starts, so a pass through the
    main network would pass too; here main has trained first, as it has at any sync point
    but the first, and both paths must still agree."""
    replay = filled_replay()
    drawn = [replay.sample_indices_many(4, 16) for _ in range(2)]
    first, second = (replay.gather_many(*indices) for indices in drawn)
    single, fused, mirror = (learner_for({"double": double, "lr": 1e-2}) for _ in range(3))
    for learner in (single, fused, mirror):
        for j in range(4):
            learner.train(Batch(*(a[j] for a in first)))
    before = single.main_weights()
    assert not all(np.array_equal(a, b) for a, b in zip(before, single.target_weights()))
    losses = [single.train(Batch(*(a[j] for a in second)))[0] for j in range(4)]
    np.testing.assert_allclose(fused.train_many(second)[0], losses, rtol=2e-2, atol=1e-4)
    assert_same_weights(fused.main_weights(), single.main_weights(), before)
    np.testing.assert_allclose(mirror.train_from_replay(mirror.mirror_replay(replay),
                                                        *drawn[1])[0],
                               losses, rtol=2e-2, atol=1e-4)
    assert_same_weights(mirror.main_weights(), single.main_weights(), before)


@pytest.mark.slow  # the CNN: a few seconds of compiling
def test_the_nature_cnn_fused_matches_single_steps():
    replay = filled_replay(frame_shape=(84, 84), capacity=300, steps=120)
    shards, idx = replay.sample_indices_many(3, 8)
    batches = replay.gather_many(shards, idx)
    variant = {"network": "cnn", "lr": 2.5e-4}
    single, fused = (learner_for(variant, (4, 84, 84), 6) for _ in range(2))
    before = single.main_weights()
    for j in range(3):
        single.train(Batch(*(a[j] for a in batches)))
    fused.train_many(batches)
    assert_same_weights(fused.main_weights(), single.main_weights(), before)


def test_a_fused_call_trains_every_minibatch_in_order():
    """Order and count matter: the same K minibatches reversed, or one fewer, end elsewhere
    (so a call that skipped its last minibatch, or ran them backwards, fails the test above)."""
    replay = filled_replay()
    shards, idx = replay.sample_indices_many(5, 16)
    batches = replay.gather_many(shards, idx)
    forward, backward, shorter = (learner_for({}) for _ in range(3))
    before = forward.main_weights()
    forward.train_many(batches)
    backward.train_many(Batch(*(a[::-1] for a in batches)))
    shorter.train_many(Batch(*(a[:-1] for a in batches)))
    sizes = largest_updates(before, forward.main_weights())
    for other in (backward, shorter):
        errors = [np.max(np.abs(a - b)) for a, b in zip(other.main_weights(),
                                                           forward.main_weights())]
        assert any(e > 0.05 * s for e, s in zip(errors, sizes))
    assert shorter.minibatches_trained() == 4


def test_the_state_on_the_device_is_what_every_reader_sees():
    """After fused calls, the weights, the optimizer's slots, Q-values and a checkpoint's
    state all show the trained state; a loaded state is what the next call trains from."""
    replay = filled_replay()
    shards, idx = replay.sample_indices_many(4, 16)
    batches = replay.gather_many(shards, idx)
    learner = learner_for({})
    states = batches.states[0]
    q_before = learner.q_values(states)
    learner.train_many(batches)
    saved = learner.state_dict()
    assert not np.allclose(learner.q_values(states), q_before)
    np.testing.assert_allclose(learner.target_q_values(states), q_before, rtol=1e-6)
    learner.update_target()
    np.testing.assert_allclose(learner.target_q_values(states), learner.q_values(states),
                               rtol=1e-6)
    twin = learner_for({})
    twin.load_state_dict(saved)
    assert twin.minibatches_trained() == 4
    twin.train_many(batches)
    learner.load_state_dict(saved)
    learner.train_many(batches)
    for a, b in zip(twin.state_dict()["optimizer"], learner.state_dict()["optimizer"]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(twin.main_weights(), learner.main_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_call_that_diverges_is_refused_before_anything_reads_it():
    replay = filled_replay()
    shards, idx = replay.sample_indices_many(3, 16)
    batches = replay.gather_many(shards, idx)
    rewards = np.array(batches.rewards)
    rewards[1, 0] = np.nan  # the second minibatch: the third's loss is NaN too
    learner = learner_for({})
    with pytest.raises(TrainingDiverged, match="the loss is not finite"):
        learner.train_many(batches._replace(rewards=rewards))


@pytest.mark.parametrize("n_step", [1, 3])
def test_the_device_gather_equals_the_host_gather(n_step):
    """States, next states and actions byte for byte; returns and discounts within 1e-6;
    over episode starts (blanked frames), terminals, cuts and both shards' wrap-around."""
    replay = filled_replay(n_step, capacity=300, steps=200)
    assert (replay.sizes == replay.shard_capacity).all()  # both shards wrapped
    mirror = learner_for({}).mirror_replay(replay)
    arrays = {name: keras.ops.convert_to_tensor(a) for name, a in mirror.device.arrays.items()}
    shards, idx = replay.sample_indices_many(8, 64)
    host = replay.gather_many(shards, idx)
    assert host.dones.any() and (host.states == 0).any()  # terminals and blanked frames drawn
    for j in range(len(idx)):
        device = mirror.gather.batch(arrays, keras.ops.convert_to_tensor(shards[j], "int32"),
                                     keras.ops.convert_to_tensor(idx[j], "int32"))
        device = Batch(*(keras.ops.convert_to_numpy(a) for a in device))
        for name in ("states", "next_states", "actions"):
            assert np.array_equal(getattr(device, name), getattr(host, name)[j]), name
        assert device.states.dtype == host.states.dtype == np.uint8
        for name in ("rewards", "dones", "discounts"):
            np.testing.assert_allclose(getattr(device, name), getattr(host, name)[j],
                                       atol=1e-6, rtol=0, err_msg=name)


def test_the_mirror_copies_exactly_what_changed():
    replay = filled_replay(capacity=300, steps=100)
    mirror = learner_for({}).mirror_replay(replay)
    rng = np.random.default_rng(5)
    assert mirror.sync() == 0
    replay.add_batch(rng.integers(0, 256, (170, 6, 5), dtype=np.uint8), np.ones(170),
                     np.ones(170), np.zeros(170, bool), np.zeros(170, bool), shard=1)
    replay.cut_episodes([0])
    assert mirror.sync() == 150 + 1  # the shard's whole ring, and the cut record
    for name, array in replay.arrays().items():
        assert np.array_equal(keras.ops.convert_to_numpy(mirror.device.arrays[name]), array)
    replay.load_state_dict(replay.state_dict())  # a checkpoint's arrays loaded in place
    assert mirror.sync() == replay.capacity


def poison(learner, where):
    """A NaN in one of the learner's values, as a diverged update would leave it: in the
    main network's first kernel, or in the optimizer's first slot (its mean square)."""
    variable = learner.main.weights[0] if where == "main" else next(
        v for v in learner.optimizer.variables if "float" in str(v.dtype))
    value = keras.ops.convert_to_numpy(variable.value).copy()
    value.flat[0] = np.nan
    variable.assign(value)
    learner._compiled.variables_changed()  # on JAX, the state on the device is replaced


@pytest.mark.parametrize("where", ["main", "optimizer"])
def test_weights_that_diverged_behind_finite_losses_never_leave_the_learner(where):
    """The losses and Q-values of the call are finite, the state it left is not: nothing
    that hands the state on (a checkpoint, best/, an export, a copy that acts) gets it."""
    replay = filled_replay()
    learner = learner_for({})
    learner.train_many(replay.gather_many(*replay.sample_indices_many(2, 16)))
    learner.state_dict(), learner.main_weights(), learner.target_weights()  # finite: taken
    poison(learner, where)
    for hand_on in (learner.state_dict, learner.main_weights, learner.target_weights):
        with pytest.raises(TrainingDiverged, match="is not finite: training diverged"):
            hand_on()


def test_an_update_of_infinite_step_is_caught_before_its_state_is_saved():
    """A real update that leaves inf and NaN in the weights while its own loss is finite
    (the loss is of the weights before the update)."""
    learner = learner_for({"lr": float("inf")})
    replay = filled_replay()
    losses, _ = learner.train_many(replay.gather_many(*replay.sample_indices_many(1, 16)))
    assert np.all(np.isfinite(losses))
    with pytest.raises(TrainingDiverged, match="the main network's .* is not finite"):
        learner.state_dict()


def test_a_state_with_a_nan_is_refused_and_nothing_is_loaded():
    learner, twin = learner_for({}), learner_for({})
    replay = filled_replay()
    twin.train_many(replay.gather_many(*replay.sample_indices_many(2, 16)))
    state = twin.state_dict()
    before = learner.state_dict()
    state["target"][1] = state["target"][1].copy()
    state["target"][1].flat[-1] = np.inf
    with pytest.raises(TrainingDiverged, match="weight 1 of the target network is not finite"):
        learner.load_state_dict(state)
    for a, b in zip(state_arrays(before), state_arrays(learner.state_dict())):
        np.testing.assert_array_equal(a, b)
    weights = [w.copy() for w in twin.main_weights()]
    weights[0].flat[0] = np.nan
    with pytest.raises(TrainingDiverged, match="weight 0 of the main network"):
        learner.set_main_weights(weights)
    np.testing.assert_array_equal(learner.main_weights()[0], before["main"][0])


def state_arrays(state):
    return state["main"] + state["target"] + state["optimizer"]
