import numpy as np
from fake_ale import FakeAtariEnv

from fast_dqn.envs.environment import SeedOnFirstReset, wrap_atari
from fast_dqn.envs.samplers import PythonSamplers, VectorSamplers
from fast_dqn.run.components import env_settings
from fast_dqn.run.settings.hyperparameters import FastConfig


def test_python_samplers_reset_finished_episodes_and_report_games():
    config = FastConfig(noop_max=0)
    envs = [SeedOnFirstReset(wrap_atari(FakeAtariEnv(lives=2, life_loss_frames=(9, 21),
                                                     reward_fn=lambda f, a: 3.0),
                                        env_settings(config), training=True), seed=i)
            for i in range(2)]
    samplers = PythonSamplers(envs)
    obs = samplers.reset()
    assert obs.shape == (2, 4, 84, 84) and samplers.num_actions == 4
    results = [samplers.step(np.array([2, 3])) for _ in range(6)]
    terminated = [r.terminated[0] for r in results]
    game_over = [r.game_over[0] for r in results]
    # Reset: FIRE on frame 1. Steps: 2-5; 6-9 (life lost; the game goes on); 10-13; 14-17;
    # 18-21 (game over); then 2-5 of the next game.
    assert terminated == [False, True, False, False, True, False]
    assert game_over == [False, False, False, False, True, False]
    assert results[1].rewards[0] == 1.0  # clipped for the learner
    assert results[4].game_returns[0] == 3.0 * 20  # frames 2..21 unclipped; FIRE is the start's
    assert results[4].game_lengths[0] == 5  # agent steps
    for r in (results[1], results[4]):
        assert not r.observations[0, :3].any() and r.observations[0, 3].any()


def test_vector_samplers_on_breakout_detect_lives_games_and_pad_stacks():
    config = FastConfig(game="breakout")
    samplers = VectorSamplers(env_settings(config), 2, seed=0, num_threads=1)
    obs = samplers.reset()
    assert obs.shape == (2, 4, 84, 84) and samplers.num_actions == 4
    rng = np.random.default_rng(0)
    life_ends, games, since_start = 0, 0, 0
    while games < 2:
        r = samplers.step(rng.integers(0, 4, 2))
        since_start = 0 if (r.terminated[0] or r.truncated[0]) else since_start + 1
        # The history is zero-padded at every learner-episode start, lost lives included.
        if since_start < 3:
            assert not r.observations[0, :3 - since_start].any()
        assert r.observations[0, 3].any()
        assert r.rewards[0] in (0.0, 1.0)
        if r.terminated[0] and not r.game_over[0]:
            life_ends += 1
        if r.game_over[0]:
            games += 1
            assert r.terminated[0] or r.truncated[0]
            assert r.game_returns[0] >= 0 and r.game_lengths[0] > 0
    assert life_ends == 4 * games  # Breakout: 5 lives, the last one ends the game
    samplers.close()


def test_vector_samplers_are_reproducible_with_a_seed():
    def trajectory():
        samplers = VectorSamplers(env_settings(FastConfig(game="pong")), 2, seed=7, num_threads=2)
        obs = [samplers.reset()]
        for a in range(50):
            obs.append(samplers.step(np.array([a % 6, (a * 5) % 6])).observations)
        samplers.close()
        return np.stack(obs)
    assert np.array_equal(trajectory(), trajectory())
