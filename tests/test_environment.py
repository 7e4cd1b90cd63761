"""The Atari env as fast_dqn.envs.environment builds it, on real ROMs: gymnasium's own checker,
seeded resets, and snapshots that continue the very same game."""

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from fast_dqn.envs.environment import make_env, restore_env, snapshot_env
from fast_dqn.run.hyperparameters import Config


@pytest.mark.parametrize("game", ["breakout", "pong"])
@pytest.mark.parametrize("training", [True, False])
def test_gymnasiums_checker_passes(game, training):
    env = make_env(Config(game=game), seed=1, training=training)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "determin" in m], messages


def play(env, actions):
    frames = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        frames.append((obs, reward, terminated, truncated))
        if terminated or truncated:
            obs, _ = env.reset()
            frames.append((obs, 0.0, False, False))
    return frames


def assert_same(a, b):
    assert len(a) == len(b)
    for (obs_a, *rest_a), (obs_b, *rest_b) in zip(a, b):
        np.testing.assert_array_equal(obs_a, obs_b)
        assert rest_a == rest_b


def test_a_seeded_reset_starts_the_same_game_with_sticky_actions_too():
    env = make_env(Config(game="breakout", sticky_actions=0.25), seed=1)
    actions = np.random.default_rng(0).integers(0, 4, 300)
    first, _ = env.reset(seed=123)
    a = play(env, actions)
    again, _ = env.reset(seed=123)
    np.testing.assert_array_equal(first, again)
    assert_same(a, play(env, actions))


@pytest.mark.parametrize("sticky_actions", [0.0, 0.25])
@pytest.mark.parametrize("seed", range(4))
def test_a_snapshot_continues_the_same_game(sticky_actions, seed):
    env = make_env(Config(game="breakout", sticky_actions=sticky_actions), seed=seed)
    env.reset()
    rng = np.random.default_rng(seed)
    play(env, rng.integers(0, 4, 150))
    blob = snapshot_env(env)
    actions = rng.integers(0, 4, 300)
    assert_same(play(env, actions), play(restore_env(blob), actions))


def test_a_snapshot_keeps_the_action_a_sticky_frame_repeats():
    """The ALE's saved state lacks its last applied action: restored naively, a sticky frame
    would repeat NOOP instead of RIGHT, and the paddle would end elsewhere."""
    import pickle

    from fast_dqn.envs.ale_game import AleGame
    for seed in range(8):
        game = AleGame("breakout", sticky_actions=0.25)
        game.reset(seed=seed)
        right = game.get_action_meanings().index("RIGHT")
        for _ in range(6):
            game.step(right)
        copy = pickle.loads(pickle.dumps(game))
        for _ in range(10):
            game.step(0)
            copy.step(0)
        np.testing.assert_array_equal(game.ale.getRAM(), copy.ale.getRAM(), f"seed {seed}")


def test_an_env_saved_before_the_new_preprocessing_is_recognised():
    from fast_dqn.envs.environment import OutdatedSnapshot
    from fast_dqn.envs.samplers import PythonSamplers
    # A pickle naming a wrapper that no longer exists, as checkpoints of before 2026-11-22 do.
    old = b"cfast_dqn.atari_wrappers\nNoopReset\n)\x81."
    with pytest.raises(OutdatedSnapshot):
        restore_env(old)
    samplers = PythonSamplers([make_env(Config(game="pong"), seed=0)])
    assert samplers.load_state_dict({"backend": "python", "envs": [old]}, step=0) is False
    samplers.reset()  # the original env is still there and plays


def test_an_env_saved_before_the_package_moved_continues_the_same_game():
    """Checkpoints of before 2026-11-22 name classes `fast_dqn.atari_wrappers.X`; the package
    now has them in fast_dqn.envs. Protocol 2 writes class paths as plain text, so such a
    pickle is made by renaming them back."""
    import pickle

    from fast_dqn.legacy_pickles import MOVED_MODULES
    env = make_env(Config(game="breakout"), seed=3)
    env.reset()
    play(env, np.random.default_rng(3).integers(0, 4, 100))
    blob = pickle.dumps(env, protocol=2)
    old = blob
    for old_path, new_path in MOVED_MODULES.items():
        old = old.replace(b"c" + new_path.encode() + b"\n", b"c" + old_path.encode() + b"\n")
    assert b"cfast_dqn.atari_wrappers\n" in old and b"fast_dqn.envs" not in old
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)
    actions = np.random.default_rng(4).integers(0, 4, 300)
    assert_same(play(env, actions), play(restore_env(old), actions))
