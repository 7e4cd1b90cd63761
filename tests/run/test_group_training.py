"""Run groups end to end (fast_dqn.run.group_training, fast_dqn.loops.fast_loop_group), in
process on CartPole and on real Pong and Breakout ROMs: each run of a group trains, acts and
logs as its ordinary run; a stopped group resumes exactly, as a group or one run alone; one
diverged or damaged run leaves, and the others go on.

The training needs JAX: under TensorFlow only the refusals run here, and
tests/end_to_end/test_keras_backends.py runs this file again in a JAX child."""

import csv
import dataclasses
import os
import re
import shutil

import keras
import numpy as np
import pytest
from helpers import TINY_CARTPOLE, TINY_PONG_FAST

from fast_dqn.errors import ConfigError
from fast_dqn.run.group_training import check_group, train_fast_group
from fast_dqn.run.settings.hyperparameters import FastConfig
from fast_dqn.run.settings.validation import resolve
from fast_dqn.run.storage.checkpoint import CheckpointStore
from fast_dqn.run.training import train_fast

ON_JAX = keras.backend.backend() == "jax"
jax_only = pytest.mark.skipif(not ON_JAX, reason="JAX's: run in a JAX child by "
                              "tests/end_to_end/test_keras_backends.py")

SEEDS = (1, 2, 3)
BUDGET = 2000


def cartpole(root, tag, seed, **overrides):
    """A CartPole run of 2,000 steps: 10 target periods, evaluations and checkpoints at
    1,000, replay saved (an exact resume needs it)."""
    settings = dict(TINY_CARTPOLE, logdir=str(root / f"{tag}-{seed}"), seed=seed,
                    timesteps=BUDGET, evaluate=1000, eval_episodes=2, checkpoint_freq=1000,
                    save_replay=True)
    return FastConfig(**{**settings, **overrides}, workers=4, env_backend="python")


def rows(run_dir, name, columns):
    """A log's rows without its wall-clock column."""
    with open(os.path.join(run_dir, name)) as f:
        return [row[:columns] for row in csv.reader(f)]


def final_weights(run_dir):
    store = CheckpointStore(str(run_dir))
    return store.latest().load_state()["learner"]["main"]


def assert_same_run(alone, grouped, exact=False):
    """The same games (episodes.csv less its hours), evaluations and final weights; `exact`:
    bit for bit, else within the rounding of a vmapped program."""
    assert rows(alone, "episodes.csv", 6) == rows(grouped, "episodes.csv", 6)
    assert len(rows(alone, "episodes.csv", 6)) > 100
    assert rows(alone, "eval.csv", 4) == rows(grouped, "eval.csv", 4)
    for a, b in zip(final_weights(alone), final_weights(grouped)):
        if exact:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """Each seed's ordinary run, trained once for the module's comparisons."""
    if not ON_JAX:
        pytest.skip("JAX's")
    root = tmp_path_factory.mktemp("alone")
    for seed in SEEDS:
        assert train_fast(cartpole(root, "alone", seed)) == BUDGET
    return root


@jax_only
@pytest.mark.parametrize("replay_device", ["host", "device"])
def test_each_run_of_a_group_equals_its_ordinary_run(alone, tmp_path, replay_device):
    """Replay gathered on the host, or mirrored and gathered in the compiled call."""
    assert train_fast_group([cartpole(tmp_path, "group", s, replay_device=replay_device)
                             for s in SEEDS]) == BUDGET
    for seed in SEEDS:
        assert_same_run(alone / f"alone-{seed}", tmp_path / f"group-{seed}")
        assert os.path.isdir(tmp_path / f"group-{seed}" / "best")


@jax_only
def test_a_seeded_group_repeats_itself_bit_for_bit(tmp_path):
    for tag in ("first", "second"):
        train_fast_group([cartpole(tmp_path, tag, s, timesteps=1200) for s in SEEDS[:2]])
    for seed in SEEDS[:2]:
        assert rows(tmp_path / f"first-{seed}", "episodes.csv", 6) == \
            rows(tmp_path / f"second-{seed}", "episodes.csv", 6)
        for a, b in zip(final_weights(tmp_path / f"first-{seed}"),
                        final_weights(tmp_path / f"second-{seed}")):
            np.testing.assert_array_equal(a, b)


def stop_after(reads):
    """A stop asked at the `reads`-th read: the group reads it once a round, mid-period."""
    count = [0]

    def stop():
        count[0] += 1
        return count[0] > reads
    return stop


@jax_only
def test_a_group_stopped_mid_period_resumes_exactly_as_a_group_or_one_run_alone(alone,
                                                                              tmp_path):
    configs = [cartpole(tmp_path, "stopped", s) for s in SEEDS]
    step = train_fast_group(configs, stop=stop_after(330))
    assert 0 < step < BUDGET and step % 200, "not stopped mid-period"
    resumes = [CheckpointStore(c.logdir).latest() for c in configs]
    assert {r.step for r in resumes} == {step}
    # Runs 1 and 2 go on as a group, run 3 alone as an ordinary run.
    assert train_fast_group(configs[:2], resumes=resumes[:2]) == BUDGET
    assert train_fast(configs[2], resume=resumes[2]) == BUDGET
    for seed in SEEDS:
        assert_same_run(alone / f"alone-{seed}", tmp_path / f"stopped-{seed}")


@jax_only
def test_a_diverged_run_leaves_the_group_and_the_others_go_on(alone, tmp_path, monkeypatch):
    """Run 2's losses turn NaN from its 28th call (of about 38; near step 1,500): it leaves,
    keeping its last good checkpoint; runs 1 and 3 train on exactly as alone."""
    from fast_dqn.agent.run_group import RunGroup
    calls = [0]

    def poisoned(original):
        def train(self, *args):
            losses, mean_qs = original(self, *args)
            calls[0] += 1
            if calls[0] >= 28:
                losses = losses.copy()
                losses[1] = np.nan
            return losses, mean_qs
        return train
    for name in ("train_many", "train_from_replay"):  # replay on the host, or mirrored
        monkeypatch.setattr(RunGroup, name, poisoned(getattr(RunGroup, name)))
    failed = {}
    assert train_fast_group([cartpole(tmp_path, "group", s) for s in SEEDS],
                            on_failed=failed.__setitem__) == BUDGET
    assert calls[0] > 28 and list(failed) == [1] and "diverged" in str(failed[1])
    for seed in (1, 3):
        assert_same_run(alone / f"alone-{seed}", tmp_path / f"group-{seed}")
    kept = CheckpointStore(str(tmp_path / "group-2")).steps()
    assert kept and kept[-1] < BUDGET


@jax_only
def test_a_run_whose_acting_q_values_are_not_finite_leaves_the_group(alone, tmp_path,
                                                                     monkeypatch):
    """Run 2's target network answers NaN from the 300th round: it leaves, as its ordinary
    run would end, and runs 1 and 3 act and train on exactly as alone."""
    from fast_dqn.agent.run_group import RunGroup
    original, calls = RunGroup.target_q_values, [0]

    def poisoned(self, states, strict=True):
        values = original(self, states, strict)
        calls[0] += 1
        if calls[0] >= 300 and len(values[1]):
            values[1] = np.full_like(values[1], np.nan)
        return values
    monkeypatch.setattr(RunGroup, "target_q_values", poisoned)
    failed = {}
    assert train_fast_group([cartpole(tmp_path, "group", s) for s in SEEDS],
                            on_failed=failed.__setitem__) == BUDGET
    assert list(failed) == [1] and "target network" in str(failed[1])
    for seed in (1, 3):
        assert_same_run(alone / f"alone-{seed}", tmp_path / f"group-{seed}")


@jax_only
def test_a_group_whose_every_run_diverges_ends_without_a_step(tmp_path, monkeypatch):
    from fast_dqn.agent.run_group import RunGroup
    original = RunGroup.train_many

    def poisoned(self, batches):
        losses, mean_qs = original(self, batches)
        return np.full_like(losses, np.nan), mean_qs
    monkeypatch.setattr(RunGroup, "train_many", poisoned)
    failed = {}
    assert train_fast_group([cartpole(tmp_path, "group", s) for s in SEEDS[:2]],
                            on_failed=failed.__setitem__) is None
    assert sorted(failed) == [0, 1]


@jax_only
def test_a_run_whose_checkpoint_is_damaged_is_named_and_left_out(alone, tmp_path):
    configs = [cartpole(tmp_path, "stopped", s) for s in SEEDS]
    train_fast_group(configs, stop=stop_after(330))
    resumes = [CheckpointStore(c.logdir).latest() for c in configs]
    # Run 2's checkpoint is another run's: its identity names another game.
    shutil.rmtree(resumes[1].path)
    shutil.copytree(cartpole_other_game_checkpoint(tmp_path), resumes[1].path)
    refused = {}
    assert train_fast_group(configs, resumes=resumes, on_refused=refused.__setitem__) == BUDGET
    assert list(refused) == [1] and isinstance(refused[1], ConfigError)
    for seed in (1, 3):
        assert_same_run(alone / f"alone-{seed}", tmp_path / f"stopped-{seed}")


def cartpole_other_game_checkpoint(tmp_path):
    """A checkpoint of an Acrobot run: a checkpoint that does not belong to a CartPole run."""
    config = dataclasses.replace(cartpole(tmp_path, "acrobot", 9), env="Acrobot-v1",
                                 timesteps=400, checkpoint_freq=400, evaluate=0)
    train_fast(config)
    return CheckpointStore(config.logdir).latest().path


def test_a_group_whose_replays_do_not_fit_the_accelerator_is_refused(tmp_path,
                                                                     monkeypatch):
    from fast_dqn.agent import backend_setup
    from fast_dqn.agent.replay_memory import estimate_bytes
    from fast_dqn.run.group_training import check_group_fits
    configs = [resolve(cartpole(tmp_path, "g", s, replay_device="device")) for s in SEEDS]
    one = estimate_bytes(configs[0].replay_capacity, (84, 84), "uint8")
    monkeypatch.setattr(backend_setup, "accelerator_memory", lambda: ("GPU:0", 2.6 * one))
    check_group_fits(configs[:2])
    with pytest.raises(ConfigError, match="group 2 runs or fewer") as refusal:
        check_group_fits(configs)
    assert refusal.value.setting == "replay_device"


def test_a_group_shares_one_protocol_and_one_mode(tmp_path):
    configs = [resolve(cartpole(tmp_path, "g", s)) for s in SEEDS[:2]]
    check_group(configs)  # games, seeds and directories may differ
    with pytest.raises(ConfigError, match="share one protocol") as refusal:
        check_group([configs[0], resolve(cartpole(tmp_path, "g", 2, lr=5e-4))])
    assert refusal.value.setting == "lr"
    lockstep = [resolve(cartpole(tmp_path, "g", s, concurrent=False)) for s in SEEDS[:2]]
    with pytest.raises(ConfigError, match="lockstep"):
        check_group(lockstep)


@jax_only
@pytest.mark.slow  # two real ROMs, each run twice
def test_a_group_of_two_games_with_padded_actions_equals_their_ordinary_runs(tmp_path):
    """Pong (6 actions) and Breakout (4, padded to 6) in one group, on real ROMs."""
    def config(game, tag):
        return FastConfig(**dict(TINY_PONG_FAST, game=game, seed=0, evaluate=1200,
                                 logdir=str(tmp_path / f"{tag}-{game}")))
    for game in ("pong", "breakout"):
        train_fast(config(game, "alone"))
    train_fast_group([config(game, "group") for game in ("pong", "breakout")])
    for game in ("pong", "breakout"):
        a, b = tmp_path / f"alone-{game}", tmp_path / f"group-{game}"
        assert rows(a, "episodes.csv", 6) == rows(b, "episodes.csv", 6)
        assert rows(a, "eval.csv", 4) == rows(b, "eval.csv", 4)
        # The CNN's vmapped convolutions round otherwise, and 300 updates compound it
        # (tests/agent/test_run_group.py holds one call to the fused calls' tolerance):
        # every weight within 1% of the network's largest (0.2% was measured); what the
        # networks do is held exactly above: the same games and evaluations.
        alone_weights, grouped = final_weights(a), final_weights(b)
        scale = max(np.max(np.abs(x)) for x in alone_weights)
        for i, (x, y) in enumerate(zip(alone_weights, grouped)):
            assert x.shape == y.shape  # Breakout's head unpadded in its own checkpoint
            assert np.max(np.abs(x - y)) <= 1e-2 * scale, f"variable {i}"


@pytest.mark.parametrize("mode,typed", [({"concurrent": False}, "lockstep (--no-concurrent)"),
                                        ({"sampler_groups": 2}, "--sampler-groups 2"),
                                        ({"act_on_cpu": True}, "--act-on-cpu")])
def test_a_group_refuses_a_mode_it_does_not_train_in(mode, typed):
    from fast_dqn.run.group_training import check_group_mode
    config = dataclasses.replace(FastConfig(sampler_groups=1), **mode)
    with pytest.raises(ConfigError, match=re.escape(f"default mode, not with {typed};")):
        check_group_mode(config)
    check_group_mode(FastConfig(sampler_groups=1))
