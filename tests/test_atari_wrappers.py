import cv2
import gymnasium
import numpy as np
import pytest

from fake_ale import SPRITE, FakeAtariEnv
from fast_dqn import atari_wrappers as w
from fast_dqn.environment import wrap_atari
from fast_dqn.hyperparameters import Config


def test_max_and_skip_pools_last_two_frames_and_sums_rewards():
    env = w.MaxAndSkip(FakeAtariEnv(reward_fn=lambda f, a: f), skip=4)
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(2)
    # Frames 1..4 were played; pooling frames 3 and 4 keeps frame 3's odd-frame sprite.
    assert reward == 1 + 2 + 3 + 4
    assert obs[SPRITE].min() == 250
    background = obs[100, 100, 0]
    assert background == max(FakeAtariEnv.screen_value(3), FakeAtariEnv.screen_value(4))
    assert env.unwrapped.actions == [2, 2, 2, 2]


def test_max_and_skip_stops_at_game_over():
    env = w.MaxAndSkip(FakeAtariEnv(game_over_frame=2, reward_fn=lambda f, a: 1), skip=4)
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(0)
    assert terminated and reward == 2 and len(env.unwrapped.actions) == 2


@pytest.mark.parametrize("noop_max", [0, 5, 30])
def test_noop_reset_plays_between_0_and_noop_max_noops(noop_max):
    counts = set()
    for seed in range(40):
        fake = FakeAtariEnv()
        env = w.NoopReset(fake, noop_max=noop_max)
        env.reset(seed=seed)
        assert set(fake.actions) <= {0}
        counts.add(len(fake.actions))
    assert min(counts) >= 0 and max(counts) <= noop_max
    if noop_max:
        assert len(counts) > 1  # really random


def test_noop_reset_is_reproducible_with_a_seed():
    def noops(seed):
        fake = FakeAtariEnv()
        w.NoopReset(fake, noop_max=30).reset(seed=seed)
        return len(fake.actions)
    assert [noops(s) for s in range(10)] == [noops(s) for s in range(10)]


def test_fire_reset_presses_fire_when_the_game_has_it():
    fake = FakeAtariEnv(action_meanings=("NOOP", "UP", "FIRE"))
    w.FireReset(fake).reset(seed=0)
    assert fake.actions == [2]


def test_fire_reset_does_nothing_without_fire():
    fake = FakeAtariEnv(action_meanings=("NOOP", "UP", "DOWN"))
    w.FireReset(fake).reset(seed=0)
    assert fake.actions == []


def test_episodic_life_ends_the_learner_episode_but_not_the_game():
    fake = FakeAtariEnv(lives=2, life_loss_frames=(3, 6))
    env = w.EpisodicLife(fake)
    env.reset(seed=0)
    dones = [env.step(2)[2] for _ in range(3)]
    assert dones == [False, False, True]
    env.reset()  # a lost life: no real reset, one no-op step instead
    assert fake.num_resets == 1 and fake.actions[-1] == 0 and fake.frame == 4
    env.step(2)
    _, _, terminated, _, _ = env.step(2)  # frame 6: the last life goes, the game is over
    assert terminated
    env.reset()
    assert fake.num_resets == 2 and fake.frame == 0


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
            env.reset()  # the no-op step of a lost life is part of the game too
    assert set(clipped) == {1.0}
    assert infos[-1]["game_return"] == 5.0 * 4  # frames 1..4, including the no-op frame 3
    assert infos[-1]["game_length"] == 4
    assert not any(i["game_over"] for i in infos[:-1])


def test_clip_reward_keeps_the_sign():
    env = w.ClipReward(FakeAtariEnv())
    assert [env.reward(r) for r in (-7.5, 0.0, 0.2, 300)] == [-1.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("interp", ["linear", "area", "nearest", "cubic"])
def test_grayscale_resize_gives_84x84_luma(interp):
    env = w.GrayscaleResize(FakeAtariEnv(), interp=interp)
    rgb = np.zeros((210, 160, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 200, 100, 50
    out = env.observation(rgb)
    assert out.shape == (84, 84) and out.dtype == np.uint8
    assert np.all(np.abs(out.astype(int) - round(0.299 * 200 + 0.587 * 100 + 0.114 * 50)) <= 1)
    assert env.observation_space.shape == (84, 84)


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
    fake = FakeAtariEnv(lives=2, life_loss_frames=(12,), game_over_frame=100)
    env = wrap_atari(fake, config, training=True)
    obs, _ = env.reset(seed=0)
    # FIRE is an agent step like any other: repeated over frames 1..4.
    assert obs.shape == (4, 84, 84) and fake.actions == [1, 1, 1, 1]
    assert not obs[:3].any() and obs[3].any()
    _, _, terminated, _, info = env.step(2)  # frames 5..8
    assert not terminated
    _, _, terminated, _, info = env.step(2)  # frames 9..12: a life is lost at frame 12
    assert terminated and not info["game_over"]
    obs, _ = env.reset()
    # No real reset: a no-op agent step then FIRE, and a fresh zero-padded history.
    assert fake.num_resets == 1 and fake.actions[-8:] == [0] * 4 + [1] * 4
    assert not obs[:3].any() and obs[3].any()


def test_time_limit_truncates_in_agent_steps():
    config = Config(noop_max=0, max_episode_steps=3)
    env = wrap_atari(FakeAtariEnv(action_meanings=("NOOP", "UP")), config, training=True)
    env.reset(seed=0)
    flags = [env.step(1)[3] for _ in range(3)]
    assert flags == [False, False, True]
    assert len(env.unwrapped.actions) == 3 * config.action_repeat
