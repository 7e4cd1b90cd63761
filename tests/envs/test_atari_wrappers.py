import gymnasium
import numpy as np
import pytest
from fake_ale import SPRITE, FakeAtariEnv

from fast_dqn.envs import atari_wrappers as w
from fast_dqn.envs.environment import wrap_atari
from fast_dqn.run.components import env_settings
from fast_dqn.run.settings.hyperparameters import Config


def test_max_and_skip_pools_last_two_frames_and_sums_rewards():
    env = w.MaxAndSkip(FakeAtariEnv(reward_fn=lambda f, a: f), skip=4)
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(2)
    # Frames 1..4 were played; pooling frames 3 and 4 keeps frame 3's odd-frame sprite.
    assert reward == 1 + 2 + 3 + 4
    assert obs[SPRITE].min() == 250
    background = obs[100, 100]
    assert background == max(FakeAtariEnv.screen_value(3), FakeAtariEnv.screen_value(4))
    assert env.unwrapped.actions == [2, 2, 2, 2]


def test_max_and_skip_stops_at_game_over_and_pools_what_its_buffers_hold():
    env = w.MaxAndSkip(FakeAtariEnv(game_over_frame=6, reward_fn=lambda f, a: 1), skip=4)
    env.reset(seed=0)
    env.step(0)  # frames 1..4
    obs, reward, terminated, _, _ = env.step(0)  # frames 5, 6: the game ends
    assert terminated and reward == 2 and len(env.unwrapped.actions) == 6
    # As ale-py's vector env: only a step's last two frames fill the buffers, so a step cut
    # short shows the previous step's pooled frames 3 and 4.
    assert obs[100, 100] == max(FakeAtariEnv.screen_value(3), FakeAtariEnv.screen_value(4))


# No-op counts of ale-py 0.12.1's AtariVectorEnv for games seeded 1..8 (noop_max 30), read
# from its episode_frame_number after reset: FIRE plus U - 1 no-ops is U frames.
VECTOR_ENV_COUNTS = [12, 13, 16, 29, 6, 26, 2, 26]


def test_the_generator_is_std_mt19937():
    # The C++ standard fixes this: the 10000th output of a default-constructed std::mt19937
    # (seed 5489) is 4123659995.
    assert int(w.seeded_mt19937(5489).random_raw(10_000)[-1]) == 4123659995


def test_no_op_counts_follow_the_vector_envs_generator():
    draws = [w.vector_env_uniform(w.seeded_mt19937(seed), 30) for seed in range(1, 9)]
    assert draws == VECTOR_ENV_COUNTS


@pytest.mark.parametrize("noop_max", [0, 5, 30])
def test_game_start_plays_fire_then_no_ops(noop_max):
    counts = set()
    for seed in range(40):
        fake = FakeAtariEnv()  # has FIRE (action 1)
        w.GameStart(fake, noop_max=noop_max).reset(seed=seed)
        assert fake.actions[0] == 1 and set(fake.actions[1:]) <= {0}
        counts.add(len(fake.actions))
    assert min(counts) >= 1 and max(counts) <= max(noop_max - 1, 1)
    if noop_max > 2:
        assert len(counts) > 1  # really random


def test_game_start_without_fire_plays_only_no_ops():
    fake = FakeAtariEnv(action_meanings=("NOOP", "UP", "DOWN"))
    w.GameStart(fake, noop_max=30).reset(seed=1)
    assert fake.actions == [0] * VECTOR_ENV_COUNTS[0]


def test_game_start_is_reproducible_and_a_seed_restarts_its_draws():
    fake = FakeAtariEnv(action_meanings=("NOOP", "UP"))
    env = w.GameStart(fake, noop_max=30)
    lengths = []
    for seed in (1, None, None, 1, None, None):
        before = len(fake.actions)
        env.reset(seed=seed)
        lengths.append(len(fake.actions) - before)
    assert lengths[:3] == lengths[3:] and lengths[0] == VECTOR_ENV_COUNTS[0]


def test_episodic_life_ends_the_learner_episode_but_not_the_game():
    fake = FakeAtariEnv(lives=2, life_loss_frames=(3, 6))
    env = w.EpisodicLife(fake)
    env.reset(seed=0)
    dones = [env.step(2)[2] for _ in range(3)]
    assert dones == [False, False, True]
    obs, info = env.reset()  # a lost life: the game goes on, nothing is played, not even FIRE
    assert fake.num_resets == 1 and len(fake.actions) == 3 and info["lives"] == 1
    assert obs[100, 100] == FakeAtariEnv.screen_value(3)
    assert [env.step(2)[2] for _ in range(2)] == [False, False]  # frames 4, 5
    _, _, terminated, _, _ = env.step(2)  # frame 6: the last life goes, the game is over
    assert terminated
    env.reset()
    assert fake.num_resets == 2 and fake.frame == 0


def test_episodic_life_reset_without_a_lost_life_starts_a_new_game():
    fake = FakeAtariEnv(lives=2, life_loss_frames=(3,))
    env = w.EpisodicLife(fake)
    env.reset(seed=0)
    env.step(2)
    env.reset()
    assert fake.num_resets == 2


def test_full_game_stats_report_unclipped_whole_game_returns():
    fake = FakeAtariEnv(lives=2, life_loss_frames=(2, 4), reward_fn=lambda f, a: 5.0)
    env = w.ClipReward(w.EpisodicLife(w.FullGameStats(fake)))
    env.reset(seed=0)
    clipped, infos = [], []
    while True:
        _, reward, terminated, truncated, info = env.step(1)
        clipped.append(reward)
        infos.append(info)
        if info["game_over"]:
            break
        if terminated:
            env.reset()  # a lost life: the game goes on
    assert set(clipped) == {1.0}
    assert infos[-1]["game_return"] == 5.0 * 4  # frames 1..4
    assert infos[-1]["game_length"] == 4
    assert not any(i["game_over"] for i in infos[:-1])


def test_clip_reward_keeps_the_sign():
    env = w.ClipReward(FakeAtariEnv())
    assert [env.reward(r) for r in (-7.5, 0.0, 0.2, 300)] == [-1.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("interp", ["area", "linear", "nearest", "cubic"])
def test_resize_gives_84x84(interp):
    env = w.Resize(FakeAtariEnv(), interp=interp)
    out = env.observation(np.full((210, 160), 77, np.uint8))
    assert out.shape == (84, 84) and out.dtype == np.uint8 and np.all(out == 77)
    assert env.observation_space.shape == (84, 84)


def test_area_resize_averages_what_each_pixel_covers():
    screen = np.zeros((210, 160), np.uint8)
    screen[:, ::2] = 200  # one-pixel stripes: linear sampling would keep or lose them whole
    out = w.Resize(FakeAtariEnv()).observation(screen)
    # Each output pixel covers 1.9 columns, so about half of its area is a stripe.
    assert np.all(np.abs(out.astype(int) - 100) <= 6)
    linear = w.Resize(FakeAtariEnv(), interp="linear").observation(screen)
    assert np.abs(linear.astype(int) - 100).max() > 50


def test_frame_history_zero_pads_at_reset_and_shifts():
    class Counter(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(0, 255, (2, 2), np.uint8)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            self.t = 1
            return np.full((2, 2), self.t, np.uint8), {}

        def step(self, action):
            self.t += 1
            return np.full((2, 2), self.t, np.uint8), 0.0, False, False, {}

    env = w.FrameHistory(Counter(), k=4)
    obs, _ = env.reset()
    assert obs.shape == (4, 2, 2) and list(obs[:, 0, 0]) == [0, 0, 0, 1]
    env.step(0)
    obs, *_ = env.step(0)
    assert list(obs[:, 0, 0]) == [0, 1, 2, 3]
    obs, *_ = env.step(0)
    obs, *_ = env.step(0)
    assert list(obs[:, 0, 0]) == [2, 3, 4, 5]
    obs, _ = env.reset()
    assert list(obs[:, 0, 0]) == [0, 0, 0, 1]


def test_full_stack_on_fake_ale_resets_history_on_life_loss():
    config = Config(noop_max=0)
    fake = FakeAtariEnv(lives=2, life_loss_frames=(9,), game_over_frame=100)
    env = wrap_atari(fake, env_settings(config), training=True)
    obs, _ = env.reset(seed=0)
    # FIRE is one emulator frame, as in ale-py's vector env.
    assert obs.shape == (4, 84, 84) and fake.actions == [1]
    assert not obs[:3].any() and obs[3].any()
    _, _, terminated, _, info = env.step(2)  # frames 2..5
    assert not terminated
    _, _, terminated, _, info = env.step(2)  # frames 6..9: a life is lost at frame 9
    assert terminated and not info["game_over"]
    obs, _ = env.reset()
    # No real reset and nothing played, but a fresh zero-padded history.
    assert fake.num_resets == 1 and len(fake.actions) == 9
    assert not obs[:3].any() and obs[3].any()


def test_time_limit_truncates_in_agent_steps():
    config = Config(noop_max=0, max_episode_steps=3)
    env = wrap_atari(FakeAtariEnv(action_meanings=("NOOP", "UP")), env_settings(config),
                     training=True)
    env.reset(seed=0)
    flags = [env.step(1)[3] for _ in range(3)]
    assert flags == [False, False, True]
    assert len(env.unwrapped.actions) == 3 * config.action_repeat
