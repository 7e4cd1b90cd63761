"""The Atari env as fast_dqn.envs.environment builds it, on real ROMs: gymnasium's own checker,
seeded resets, and saved states, kept as data, that continue the very same game."""

import json
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from fast_dqn.envs.environment import EnvStateMismatch, env_state, load_env_state, make_env
from fast_dqn.run.components import env_settings
from fast_dqn.run.settings.hyperparameters import Config
from fast_dqn.run.storage.state_tree import from_data, to_data


@pytest.mark.parametrize("game", ["breakout", "pong"])
@pytest.mark.parametrize("training", [True, False])
def test_gymnasiums_checker_passes(game, training):
    env = make_env(env_settings(Config(game=game)), seed=1, training=training)
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
    env = make_env(env_settings(Config(game="breakout", sticky_actions=0.25)), seed=1)
    actions = np.random.default_rng(0).integers(0, 4, 300)
    first, _ = env.reset(seed=123)
    a = play(env, actions)
    again, _ = env.reset(seed=123)
    np.testing.assert_array_equal(first, again)
    assert_same(a, play(env, actions))


def saved_as_data(env):
    """env_state through the checkpoint's own encoding, as a resume would read it."""
    document, arrays = to_data(env_state(env))
    return from_data(json.loads(json.dumps(document)), arrays)


def assert_same_state(a, b):
    """Every layer's saved state alike, down to the emulator's bytes and each RNG (a
    gymnasium env's pickle aside: two pickles of one state may differ in their bytes)."""
    (document_a, arrays_a), (document_b, arrays_b) = to_data(env_state(a)), to_data(env_state(b))
    assert json.dumps(document_a) == json.dumps(document_b)
    assert arrays_a.keys() == arrays_b.keys()
    for name in set(arrays_a) - {"/foreign"}:
        np.testing.assert_array_equal(arrays_a[name], arrays_b[name], name)


@pytest.mark.parametrize("sticky_actions", [0.0, 0.25])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.faults
def test_a_saved_state_continues_the_same_game(sticky_actions, seed):
    config = Config(game="breakout", sticky_actions=sticky_actions)
    env = make_env(env_settings(config), seed=seed)
    env.reset()
    rng = np.random.default_rng(seed)
    play(env, rng.integers(0, 4, 150))
    saved = saved_as_data(env)
    assert saved["foreign"] is None  # every layer, the emulator's included, kept as data
    # Loaded into an env of another seed, mid-game itself: nothing of its own may remain.
    other = make_env(env_settings(config), seed=seed + 100)
    other.reset()
    play(other, rng.integers(0, 4, 77))
    assert load_env_state(other, saved) is other
    assert_same_state(env, other)
    actions = rng.integers(0, 4, 300)
    assert_same(play(env, actions), play(other, actions))
    assert_same_state(env, other)


@pytest.mark.faults
def test_a_saved_state_continues_a_gymnasium_env():
    """--env: gymnasium's CartPole has no state API; it is kept pickled beneath our layers."""
    config = Config(env="CartPole-v1", history_length=2)
    env = make_env(env_settings(config), seed=5)
    env.reset()
    play(env, np.random.default_rng(5).integers(0, 2, 30))
    other = make_env(env_settings(config), seed=6)
    assert load_env_state(other, saved_as_data(env)) is other
    actions = np.random.default_rng(6).integers(0, 2, 200)
    assert_same(play(env, actions), play(other, actions))
    assert_same_state(env, other)
    np.testing.assert_array_equal(env.unwrapped.state, other.unwrapped.state)


@pytest.mark.faults
def test_a_saved_state_of_another_wrapper_stack_is_refused_untouched():
    training = make_env(env_settings(Config(game="pong")), seed=0, training=True)
    training.reset()
    evaluation = make_env(env_settings(Config(game="pong")), seed=0, training=False)
    with pytest.raises(EnvStateMismatch, match="ClipReward"):
        load_env_state(evaluation, saved_as_data(training))
    assert evaluation.state_dict()["pending_seed"] == 0  # still its own, never reset


@pytest.mark.faults
def test_a_saved_game_keeps_the_action_a_sticky_frame_repeats():
    """The ALE's saved state lacks its last applied action: restored naively, a sticky frame
    would repeat NOOP instead of RIGHT, and the paddle would end elsewhere."""
    from fast_dqn.envs.ale_game import AleGame
    for seed in range(8):
        game = AleGame("breakout", sticky_actions=0.25)
        game.reset(seed=seed)
        right = game.get_action_meanings().index("RIGHT")
        for _ in range(6):
            game.step(right)
        copy = AleGame("breakout", sticky_actions=0.25)
        copy.load_state_dict(game.state_dict())
        for _ in range(10):
            game.step(0)
            copy.step(0)
        np.testing.assert_array_equal(game.ale.getRAM(), copy.ale.getRAM(), f"seed {seed}")


@pytest.mark.faults
def test_every_layer_with_a_state_says_what_its_checkpoint_holds():
    """load_env_state checks each layer's saved state against its STATE before loading any:
    a layer that saves state without declaring it would fail at the check, not in a game."""
    import inspect

    from fast_dqn.envs import ale_game, atari_wrappers, environment
    classes = [c for module in (ale_game, atari_wrappers, environment)
               for _, c in inspect.getmembers(module, inspect.isclass)
               if c.__module__ == module.__name__ and hasattr(c, "state_dict")]
    assert {c.__name__ for c in classes} >= {"AleGame", "GameStart", "MaxAndSkip", "TimeLimit",
                                             "FullGameStats", "EpisodicLife", "FrameHistory",
                                             "SeedOnFirstReset", "ClipReward", "Resize"}
    assert [c.__name__ for c in classes if not isinstance(getattr(c, "STATE", None), dict)] \
        == []
