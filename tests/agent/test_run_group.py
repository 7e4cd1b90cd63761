"""A run group (fast_dqn.agent.run_group): G runs' updates in one vmapped call against G
ordinary learners, each on its own replay; padded Q-heads masked; acting through each run's
own target network; one run's divergence kept to that run.

The math needs JAX. Under TensorFlow (the suite's default) only the refusal runs here, and
tests/end_to_end/test_keras_backends.py runs this file again in a JAX child."""

import keras
import numpy as np
import pytest

from fast_dqn.agent.batch import Batch
from fast_dqn.agent.compile_options import CompileOptions
from fast_dqn.agent.learner import DQNLearner, make_optimizer
from fast_dqn.agent.q_network import mlp
from fast_dqn.agent.replay_memory import ReplayMemory

ON_JAX = keras.backend.backend() == "jax"
jax_only = pytest.mark.skipif(not ON_JAX, reason="JAX's: run in a JAX child by "
                              "tests/end_to_end/test_keras_backends.py")

SHAPE = (4, 6, 5)       # a state: 4 frames of 6 x 5
ACTIONS = (4, 6, 3)     # three games' action counts: two of the runs are padded to 6


def replay_of(seed, actions, shards=2, capacity=600, steps=280, reward_scale=1.0):
    """A replay of random frames whose actions are the game's, wrapped around in both shards."""
    rng = np.random.default_rng(seed)
    replay = ReplayMemory(capacity, SHAPE[1:], SHAPE[0], seed=seed + 1, num_shards=shards)
    for shard in range(shards):
        for _ in range(steps + 37 * shard):
            replay.add(rng.integers(0, 256, SHAPE[1:], dtype=np.uint8), rng.integers(actions),
                       reward_scale * rng.choice([-1.0, 0.0, 0.5, 1.0]), rng.random() < 0.06,
                       rng.random() < 0.1, shard=shard)
    return replay


def learner(actions, seed, double=False, optimizer="rmsprop", dueling=False, bias=None,
            options=CompileOptions()):
    """A run's learner, built as its ordinary run builds it; `bias` sets its Q-head's bias
    (negative: every real Q-value below the padding's zeros, which an unmasked max picks)."""
    keras.utils.set_random_seed(seed)
    made = DQNLearner(lambda: mlp(SHAPE, actions, (32,), dueling=dueling),
                      make_optimizer(optimizer, 1e-3, rmsprop_init=1.0), options,
                      double=double)
    if bias is not None:
        weights = made.main_weights()
        weights[-1] = np.full_like(weights[-1], bias)
        made.set_main_weights(weights)
        made.update_target()
    return made


def group_of(members, **kw):
    from fast_dqn.agent.run_group import RunGroup
    return RunGroup(members, learner(max(m.main.output_shape[-1] for m in members), 99, **kw))


def assert_close_weights(got, want, before):
    """Each variable within 1% of its largest update: the fused calls' tolerance
    (tests/agent/test_fused_updates.py)."""
    for i, (g, w, b) in enumerate(zip(got, want, before)):
        size = np.max(np.abs(w - b))
        assert size > 0, f"variable {i} did not move"
        assert np.max(np.abs(g - w)) <= 0.01 * size, f"variable {i} off"


def runs(variant, bias=None):
    """Three runs' ordinary learners and their twins for the group, and their replays."""
    kw = dict(variant)
    members = [learner(a, seed, bias=bias, **kw) for seed, a in enumerate(ACTIONS)]
    alone = [learner(a, seed, bias=bias, **kw) for seed, a in enumerate(ACTIONS)]
    replays = [replay_of(10 + seed, a) for seed, a in enumerate(ACTIONS)]
    return members, alone, replays


def train_on_device(group, replays, k):
    """K minibatches of each run's own replay, drawn from its RNG, trained in one call.

    Returns:
        (the drawn (shards, idx) of each run, (G, K) losses, (G, K) mean Qs).
    """
    mirrors = group.mirror_replays(replays)
    for mirror in mirrors:
        mirror.sync()
    drawn = [replay.sample_indices_many(k, 16) for replay in replays]
    losses, mean_qs = group.train_from_replay(mirrors, np.stack([d[0] for d in drawn]),
                                              np.stack([d[1] for d in drawn]))
    return drawn, losses, mean_qs


VARIANTS = {"nature": {}, "double": {"double": True}, "adam": {"optimizer": "adam"},
            # The fused optimizer step, mapped over the runs (its other choices are XLA's).
            "fused": {"options": CompileOptions(fused_optimizer=True)}}


@jax_only
@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("path", ["device", "host"])
def test_g_updates_in_one_call_equal_g_separate_updates(name, path):
    """Each run trains on its own replay's minibatches, drawn from its own RNG, and ends
    where its ordinary learner ends. A negative Q-head bias puts every real Q-value below
    the padding's zeros: a max or argmax that saw the padding would pick it."""
    members, alone, replays = runs(VARIANTS[name], bias=-3.0)
    before = [m.main_weights() for m in members]
    group = group_of(members, **VARIANTS[name])
    if path == "device":
        drawn, losses, mean_qs = train_on_device(group, replays, 5)
    else:
        drawn = [replay.sample_indices_many(5, 16) for replay in replays]
        gathered = [replay.gather_many(*d) for replay, d in zip(replays, drawn)]
        losses, mean_qs = group.train_many(Batch(*(np.stack(field) for field in
                                                   zip(*gathered))))
    assert losses.shape == mean_qs.shape == (3, 5)
    assert group.diverged(losses, mean_qs) == []
    assert group.minibatches_trained() == [5, 5, 5]
    group.write_back()
    for r, (member, single, replay) in enumerate(zip(members, alone, replays)):
        want, want_q = single.train_from_replay(single.mirror_replay(replay), *drawn[r])
        np.testing.assert_allclose(losses[r], want, rtol=2e-2, atol=1e-4)
        np.testing.assert_allclose(mean_qs[r], want_q, rtol=2e-2, atol=1e-4)
        assert_close_weights(member.main_weights(), single.main_weights(), before[r])
        # The target is untouched by training, and each run keeps its own.
        assert all(np.array_equal(a, b) for a, b in zip(member.target_weights(),
                                                        single.target_weights()))
        assert member.minibatches_trained() == 5


@jax_only
def test_the_padding_stays_zero_and_out_of_every_value():
    """Trained, the padded columns' weights and optimizer slots are still zero, and a padded
    run's Q-values over its real actions are its ordinary learner's."""
    members, alone, replays = runs({"optimizer": "adam"})
    group = group_of(members, optimizer="adam")
    drawn, _, _ = train_on_device(group, replays, 4)
    padded = group.states
    for r, actions in enumerate(ACTIONS):
        kernel, bias = (np.asarray(w[r]) for w in padded.trainable[-2:])
        assert np.all(kernel[:, actions:] == 0) and np.all(bias[actions:] == 0)
        assert np.any(kernel[:, :actions] != 0)
        for slot in padded.optimizer:
            slot = np.asarray(slot[r])
            if slot.ndim and slot.shape[-1] == max(ACTIONS):
                assert np.all(slot[..., actions:] == 0)
    states = [replay_of(50 + r, 1).gather_many(*replay_of(50 + r, 1).sample_indices_many(1, 7))
              .states[0] for r in range(3)]
    group.write_back()
    for r, (member, single) in enumerate(zip(members, alone)):
        single.train_from_replay(single.mirror_replay(replays[r]), *drawn[r])
        got = group.q_values(states)[r]
        assert got.shape == (7, ACTIONS[r])
        np.testing.assert_allclose(got, single.q_values(states[r]), rtol=1e-4, atol=1e-5)


@jax_only
def test_each_run_acts_through_its_own_target_network():
    """One batched call for the whole group; run r's rows go through run r's target only,
    which changes at update_target and not in training."""
    members, alone, replays = runs({})
    group = group_of(members)
    states = [replay.gather_many(*replay.sample_indices_many(1, n)).states[0]
              for replay, n in zip(replays, (5, 0, 3))]
    before = group.target_q_values(states)
    assert [q.shape for q in before] == [(5, 4), (0, 6), (3, 3)]
    for r, (q, single) in enumerate(zip(before, alone)):
        if len(states[r]):
            np.testing.assert_allclose(q, single.target_q_values(states[r]), rtol=1e-5,
                                       atol=1e-6)
    # Different runs, different networks: run 0's states through run 2's target differ.
    assert not np.allclose(alone[2].target_q_values(states[0])[:, :3], before[0][:, :3])
    drawn, _, _ = train_on_device(group, replays, 3)
    for got, want in zip(group.target_q_values(states), before):
        np.testing.assert_array_equal(got, want)
    group.update_target()
    for got, main in zip(group.target_q_values(states), group.q_values(states)):
        np.testing.assert_array_equal(got, main)
    assert not np.allclose(group.target_q_values(states)[0], before[0])


@jax_only
def test_one_runs_divergence_is_that_runs_alone():
    """Run 1's rewards are NaN: its losses and weights turn non-finite, and only it is
    named; the others train exactly as alone."""
    members, alone, replays = runs({})
    replays[1] = replay_of(11, ACTIONS[1], reward_scale=np.nan)
    group = group_of(members)
    drawn, losses, mean_qs = train_on_device(group, replays, 4)
    assert group.diverged(losses, mean_qs) == [1]
    group.write_back([0, 2])
    for r in (0, 2):
        want, _ = alone[r].train_from_replay(alone[r].mirror_replay(replays[r]), *drawn[r])
        np.testing.assert_allclose(losses[r], want, rtol=2e-2, atol=1e-4)
    from fast_dqn.agent.learner import TrainingDiverged
    with pytest.raises(TrainingDiverged, match="not finite"):
        group.write_back([1])


@jax_only
def test_write_back_then_read_members_is_the_same_state():
    members, _, replays = runs({})
    group = group_of(members)
    drawn, _, _ = train_on_device(group, replays, 2)
    trained = [np.asarray(a) for a in group.states.trainable]
    group.write_back()
    group.read_members()
    for a, b in zip(trained, group.states.trainable):
        np.testing.assert_array_equal(a, np.asarray(b))


@jax_only
def test_dueling_runs_of_different_action_counts_are_refused():
    from fast_dqn.agent.run_group import GroupMismatch
    with pytest.raises(GroupMismatch, match="dueling"):
        group_of([learner(4, 0, dueling=True), learner(6, 1, dueling=True)], dueling=True)
    # One action count: nothing is padded, and the group forms.
    assert group_of([learner(6, 0, dueling=True), learner(6, 1, dueling=True)],
                    dueling=True).runs == 2


@jax_only
def test_runs_of_another_network_are_refused():
    from fast_dqn.agent.run_group import GroupMismatch, RunGroup
    keras.utils.set_random_seed(0)
    wider = DQNLearner(lambda: mlp(SHAPE, 4, (64,)), make_optimizer("rmsprop", 1e-3))
    with pytest.raises(GroupMismatch, match="share one network"):
        RunGroup([learner(4, 0), wider], learner(4, 2))


@pytest.mark.skipif(ON_JAX, reason="the refusal is TensorFlow's")
def test_a_group_on_tensorflow_is_refused_naming_jax():
    from fast_dqn.agent.run_group import GroupNeedsJax, RunGroup
    with pytest.raises(GroupNeedsJax, match="KERAS_BACKEND=jax"):
        RunGroup([learner(4, 0), learner(4, 1)], learner(4, 2))

