"""The same frames everywhere, proven on real ROMs: the python backend (the wrappers every
evaluation uses too) and ale-py's vector env, driven with one seed and one action sequence,
return bit-identical states, rewards, terminals and game ends, through lost lives, game overs
and time-limit cuts."""

import numpy as np
import pytest

from fast_dqn.envs.environment import make_env
from fast_dqn.envs.samplers import PythonSamplers, VectorSamplers
from fast_dqn.run.components import env_settings
from fast_dqn.run.settings.hyperparameters import FastConfig
from fast_dqn.run.settings.presets import PRESETS

FIELDS = ("rewards", "terminated", "truncated", "game_over", "game_returns", "game_lengths")


def drive_both(config, num_samplers, steps, seed, action_seed=0):
    python = PythonSamplers([make_env(env_settings(config), seed=seed + i, training=True)
                             for i in range(num_samplers)])
    vector = VectorSamplers(env_settings(config), num_samplers, seed, num_threads=1)
    counts = {"life_losses": 0, "game_overs": 0, "cuts": 0}
    try:
        np.testing.assert_array_equal(python.reset(), vector.reset())
        rng = np.random.default_rng(action_seed)
        for t in range(steps):
            actions = rng.integers(0, python.num_actions, num_samplers)
            a, b = python.step(actions), vector.step(actions)
            for field in FIELDS:
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field),
                                              err_msg=f"{field} differ at step {t}")
            np.testing.assert_array_equal(a.observations, b.observations,
                                          err_msg=f"states differ at step {t}")
            counts["life_losses"] += int((a.terminated & ~a.game_over).sum())
            counts["game_overs"] += int((a.game_over & ~a.truncated).sum())
            counts["cuts"] += int(a.truncated.sum())
    finally:
        python.close()
        vector.close()
    return counts


@pytest.mark.slow  # real ROMs for thousands of frames: the slow tier
@pytest.mark.parametrize("game,limit,steps,seed", [("breakout", 220, 1200, 3),
                                                    ("pong", 850, 2000, 11)])
def test_python_and_vector_backends_see_the_same_frames(game, limit, steps, seed):
    config = FastConfig(game=game, max_episode_steps=limit)
    counts = drive_both(config, num_samplers=2, steps=steps, seed=seed)
    assert counts["cuts"] >= 1 and counts["game_overs"] >= 1
    if game == "breakout":  # Pong has no lives
        assert counts["life_losses"] >= 2


@pytest.mark.slow  # real ROMs for thousands of frames: the slow tier
def test_the_same_frames_with_sticky_actions_and_all_actions():
    config = FastConfig(game="breakout", sticky_actions=0.25, full_action_space=True,
                        max_episode_steps=300)
    counts = drive_both(config, num_samplers=2, steps=1000, seed=5)
    assert counts["game_overs"] + counts["cuts"] >= 1


@pytest.mark.slow  # real ROMs for a thousand steps: the slow tier
def test_the_same_frames_on_dopamines_protocol():
    config = FastConfig(**{**PRESETS["dopamine"], "max_episode_steps": 300}, game="breakout")
    counts = drive_both(config, num_samplers=2, steps=1000, seed=7)
    assert counts["game_overs"] + counts["cuts"] >= 1 and counts["life_losses"] == 0
