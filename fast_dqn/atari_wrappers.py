"""Nature DQN preprocessing: one gymnasium wrapper per concern.

The stack, innermost first (see `fast_dqn.environment.make_atari_env`):

    ALE (frameskip=1, RGB) -> NoopReset -> MaxAndSkip -> TimeLimit -> FullGameStats
        -> EpisodicLife -> FireReset -> ClipReward (training only) -> GrayscaleResize
        -> FrameHistory

The order matters: no-ops are emulator frames, the time limit counts agent steps, the game
statistics must see whole games with unclipped rewards, and FIRE must follow every life loss.
"""

import collections

import cv2
import gymnasium
import numpy as np

INTERPOLATIONS = {
    "linear": cv2.INTER_LINEAR,
    "area": cv2.INTER_AREA,
    "nearest": cv2.INTER_NEAREST,
    "cubic": cv2.INTER_CUBIC,
}


class NoopReset(gymnasium.Wrapper):
    """Start each game with a random 0..noop_max no-op frames.

    The ALE is deterministic, so without this every game from a given policy would be the same
    game. Draws from the env's own seeded generator, so `reset(seed=...)` makes it repeatable.
    """

    def __init__(self, env, noop_max=30, noop_action=0):
        super().__init__(env)
        self.noop_max = noop_max
        self.noop_action = noop_action

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for _ in range(int(self.np_random.integers(0, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class MaxAndSkip(gymnasium.Wrapper):
    """Repeat the action `skip` frames, sum the rewards, and max-pool the last two screens.

    Atari sprites flicker: some objects are drawn only on odd or even frames. The pixel-wise max
    of the last two frames shows both. The original fast-dqn used ALE's frameskip and lost this.
    """

    def __init__(self, env, skip=4):
        super().__init__(env)
        self.skip = skip

    def step(self, action):
        total_reward = 0.0
        last, previous = None, None
        for _ in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            previous, last = last, obs
            total_reward += reward
            if terminated or truncated:
                break
        pooled = last if previous is None else np.maximum(previous, last)
        return pooled, total_reward, terminated, truncated, info


class FullGameStats(gymnasium.Wrapper):
    """Accumulate the unclipped return and agent-step length of each whole game.

    Sits below EpisodicLife, so a life loss is not the end of a game here. At the real end it
    sets info["game_return"] and info["game_length"]; every step carries info["game_over"].
    Logs and evaluation report these, never per-life or clipped returns.
    """

    def __init__(self, env):
        super().__init__(env)
        self.game_return = 0.0
        self.game_length = 0

    def reset(self, **kwargs):
        self.game_return = 0.0
        self.game_length = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_return += reward
        self.game_length += 1
        info["game_over"] = terminated or truncated
        if info["game_over"]:
            info["game_return"] = self.game_return
            info["game_length"] = self.game_length
        return obs, reward, terminated, truncated, info


class EpisodicLife(gymnasium.Wrapper):
    """Signal `terminated` on every life loss, but only really reset the game at game over.

    Nature DQN treats a lost life as terminal for the learner, which speeds up learning in games
    with lives. A reset after a lost life just plays one no-op frame-group to leave the death
    screen; the emulator keeps its state.
    """

    def __init__(self, env, noop_action=0):
        super().__init__(env)
        self.noop_action = noop_action
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = info.get("lives", 0)
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = info.get("lives", 0)
        return obs, info


class FireReset(gymnasium.Wrapper):
    """Press FIRE at the start of every episode in games that need it to launch play.

    Breakout, for one, serves no ball until FIRE; a random agent would waste steps finding out.
    Games without FIRE in their action set pass straight through.
    """

    def __init__(self, env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        self.fire_action = meanings.index("FIRE") if "FIRE" in meanings else None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        if self.fire_action is None:
            return obs, info
        obs, _, terminated, truncated, info = self.env.step(self.fire_action)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        return obs, info


class ClipReward(gymnasium.RewardWrapper):
    """Clip rewards to their sign (-1, 0, +1), so one learning rate fits every game's score scale.

    Training only: evaluation and logs use the unclipped game score.
    """

    def reward(self, reward):
        return float(np.sign(reward))


class GrayscaleResize(gymnasium.ObservationWrapper):
    """RGB screen -> 84x84 uint8 luminance, with opencv.

    cv2's RGB2GRAY uses the ITU-R 601 luma weights, as the Nature preprocessing did. The resize
    squashes 210x160 straight to 84x84 (no crop), as in the paper.
    """

    def __init__(self, env, size=84, interp="linear"):
        super().__init__(env)
        self.size = size
        self.interp = INTERPOLATIONS[interp]
        self.observation_space = gymnasium.spaces.Box(0, 255, (size, size), np.uint8)

    def observation(self, obs):
        gray = cv2.cvtColor(obs, cv2.COLOR_RGB2GRAY) if obs.ndim == 3 else obs
        return cv2.resize(gray, (self.size, self.size), interpolation=self.interp)


class FrameHistory(gymnasium.Wrapper):
    """Stack the last k frames, oldest first, as a (k, H, W) uint8 state.

    At an episode start the missing older frames are zeros, which is exactly what the replay
    memory rebuilds for the same steps, so acting and learning see the same states.
    """

    def __init__(self, env, k=4):
        super().__init__(env)
        self.k = k
        space = env.observation_space
        self.observation_space = gymnasium.spaces.Box(0, 255, (k, *space.shape), space.dtype)
        self.frames = collections.deque(maxlen=k)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        zeros = np.zeros_like(obs)
        for _ in range(self.k - 1):
            self.frames.append(zeros)
        self.frames.append(obs)
        return self._state(), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs)
        return self._state(), reward, terminated, truncated, info

    def _state(self):
        return np.stack(self.frames)
