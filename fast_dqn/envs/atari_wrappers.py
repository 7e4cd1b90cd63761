"""Atari preprocessing: one gymnasium wrapper per concern, on fast_dqn.envs.ale_game.AleGame.

The stack, innermost first (built by `fast_dqn.envs.environment.wrap_atari`):

    AleGame (one frame per step, ALE grayscale) -> GameStart -> MaxAndSkip -> TimeLimit
        -> FullGameStats -> EpisodicLife -> ClipReward (training only) -> Resize
        -> FrameHistory

Each wrapper does what ale-py's AtariVectorEnv does in C++, so the python and vector sampler
backends, evaluation and `fast_dqn.tools.evaluate` see the same frames
(tests/envs/test_frame_identity.py checks it on real ROMs). The order matters: the start's
FIRE and no-ops are emulator frames, the time limit counts agent steps of a whole game, and
the game statistics must see whole games with unclipped rewards.

Every wrapper gives its state as data (`state_dict`, `load_state_dict`), never as pickled
classes (fast_dqn.envs.environment.env_state walks the stack).
"""

import collections

import cv2
import gymnasium
import numpy as np

from fast_dqn.state_schema import (
    ARRAYS,
    MT19937_RNG,
    NUMBER,
    OBSERVATION_AND_INFO,
    WHOLE,
    StateMismatch,
    optional,
)

INTERPOLATIONS = {
    "area": cv2.INTER_AREA,
    "linear": cv2.INTER_LINEAR,
    "nearest": cv2.INTER_NEAREST,
    "cubic": cv2.INTER_CUBIC,
}


def vector_env_uniform(bit_generator, high):
    """A draw from 0..high-1, exactly as ale-py's vector env draws its no-op counts.

    ale-py's C++ uses std::mt19937 seeded with the game's seed and libstdc++'s
    uniform_int_distribution, which maps one 32-bit output x to (x * n) >> 32 and rejects the
    few low products that would bias it (Lemire's method). numpy's MT19937 with its legacy
    seeding is the same generator, so the same seed gives the same counts.
    """
    n = high
    product = int(bit_generator.random_raw()) * n
    if (product & 0xFFFFFFFF) < n:
        threshold = (2**32 - n) % n
        while (product & 0xFFFFFFFF) < threshold:
            product = int(bit_generator.random_raw()) * n
    return product >> 32


def seeded_mt19937(seed):
    """numpy's MT19937 in the state std::mt19937(seed) starts in, for `vector_env_uniform`.

    RandomState seeds it with the reference init_genrand, as the C++ standard does.
    """
    _, key, position, *_ = np.random.RandomState(int(seed)).get_state()
    generator = np.random.MT19937(0)
    generator.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": position}}
    return generator


class GameStart(gymnasium.Wrapper):
    """Start each game as ale-py's vector env does: FIRE (in games that have it), then no-ops.

    Games like Breakout serve nothing until FIRE; the no-ops make every game from one policy a
    different game, since the ALE is deterministic. For every new game a count U is drawn from
    0..noop_max-1 (0 where noop_max is below 2); a game with FIRE plays FIRE then U-1 no-op
    emulator frames (FIRE alone when U is 0), one without plays U. A game that ends during
    them restarts. The draw follows the vector env's generator (vector_env_uniform), seeded by
    reset(seed=...), so both backends start the same games. A lost life presses nothing (see
    EpisodicLife). fire=False presses no FIRE (Dopamine's protocol: the agent must learn to
    serve).
    """

    def __init__(self, env, noop_max=30, noop_action=0, fire=True):
        super().__init__(env)
        self.noop_max = noop_max
        self.noop_action = noop_action
        meanings = env.unwrapped.get_action_meanings()
        self.fire_action = meanings.index("FIRE") if fire and "FIRE" in meanings else None
        self.generator = None

    def reset(self, **kwargs):
        if kwargs.get("seed") is not None or self.generator is None:
            # ale-py seeds an unseeded game from the OS; an unseeded first reset here starts
            # from seed 0 so that it is still repeatable.
            self.generator = seeded_mt19937(kwargs.get("seed") or 0)
        obs, info = self.env.reset(**kwargs)
        count = vector_env_uniform(self.generator, self.noop_max) if self.noop_max > 1 else 0
        actions = [self.noop_action] * count
        if self.fire_action is not None:
            actions = [self.fire_action] + actions[1:]
        for action in actions:
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info

    # What a checkpoint keeps of each layer (fast_dqn.state_schema): checked before loading.
    STATE = {"generator": optional(MT19937_RNG)}

    def state_dict(self):
        return {"generator": self.generator.state if self.generator else None}

    def load_state_dict(self, state):
        self.generator = None
        if state["generator"] is not None:
            self.generator = np.random.MT19937(0)
            self.generator.state = state["generator"]


class MaxAndSkip(gymnasium.Wrapper):
    """Repeat the action `skip` emulator frames, sum the rewards, max-pool the last two screens.

    Atari sprites flicker: some objects are drawn only on odd or even frames, and the
    pixel-wise max of the last two frames shows both. As in ale-py's vector env, the two
    screens are kept in buffers that only the last two frames of a step overwrite, and a reset
    leaves a blank one beside its screen: a step cut short by a game over pools what the
    buffers hold.
    """

    def __init__(self, env, skip=4):
        super().__init__(env)
        self.skip = skip
        self.buffers = None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.buffers = [np.zeros_like(obs), obs]
        return obs, info

    def step(self, action):
        total_reward = 0.0
        for frames_left in range(self.skip, 0, -1):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total_reward += reward
            if frames_left <= 2:
                self.buffers[2 - frames_left] = obs
            if terminated or truncated:
                break
        return np.maximum(*self.buffers), total_reward, terminated, truncated, info

    STATE = {"buffers": optional(ARRAYS)}

    def check_saved(self, state, path):
        buffers, shape = state["buffers"], self.env.observation_space.shape
        if buffers is not None and (len(buffers) != 2 or any(b.shape != shape
                                                             for b in buffers)):
            raise StateMismatch(f"{path}/buffers holds {len(buffers)} screens, not 2 of "
                                f"shape {shape}")

    def state_dict(self):
        return {"buffers": None if self.buffers is None else list(self.buffers)}

    def load_state_dict(self, state):
        self.buffers = None if state["buffers"] is None else list(state["buffers"])


class TimeLimit(gymnasium.Wrapper):
    """Truncate a game after `max_episode_steps` agent steps (it sits above MaxAndSkip).

    Ours, not gymnasium's, so that its count is part of the env's state as data.
    """

    def __init__(self, env, max_episode_steps):
        super().__init__(env)
        self.max_episode_steps = max_episode_steps
        self.elapsed = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.elapsed += 1
        return obs, reward, terminated, truncated or self.elapsed >= self.max_episode_steps, info

    def reset(self, **kwargs):
        self.elapsed = 0
        return self.env.reset(**kwargs)

    STATE = {"elapsed": WHOLE}

    def state_dict(self):
        return {"elapsed": self.elapsed}

    def load_state_dict(self, state):
        self.elapsed = state["elapsed"]


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

    STATE = {"game_return": NUMBER, "game_length": WHOLE}

    def state_dict(self):
        return {"game_return": self.game_return, "game_length": self.game_length}

    def load_state_dict(self, state):
        self.game_return, self.game_length = state["game_return"], state["game_length"]


class EpisodicLife(gymnasium.Wrapper):
    """Signal `terminated` on every life loss, but only really reset the game at game over.

    Nature DQN treats a lost life as terminal for the learner, which speeds up learning in games
    with lives. As in ale-py's vector env (its life_loss_info), the game goes on untouched: a
    reset right after a lost life returns the current screen and plays nothing, not even FIRE.
    Any other reset starts a new game.
    """

    def __init__(self, env):
        super().__init__(env)
        self.lives = 0
        self.after_life_loss = None  # (obs, info) of a step that lost a life but not the game

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = info.get("lives", 0)
        lost_life = lives < self.lives
        self.lives = lives
        self.after_life_loss = (None if terminated or truncated or not lost_life
                                else (obs, info))
        return obs, reward, terminated or lost_life, truncated, info

    def reset(self, **kwargs):
        if self.after_life_loss is not None and kwargs.get("seed") is None:
            obs, info = self.after_life_loss
        else:
            obs, info = self.env.reset(**kwargs)
        self.after_life_loss = None
        self.lives = info.get("lives", 0)
        return obs, info

    STATE = {"lives": WHOLE, "after_life_loss": optional(OBSERVATION_AND_INFO)}

    def state_dict(self):
        return {"lives": self.lives, "after_life_loss": self.after_life_loss}

    def load_state_dict(self, state):
        self.lives = state["lives"]
        self.after_life_loss = state["after_life_loss"]
        if self.after_life_loss is not None:
            self.after_life_loss = tuple(self.after_life_loss)


class Stateless:
    """A wrapper whose output depends on its input alone: nothing to save."""

    STATE = {}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class ClipReward(Stateless, gymnasium.RewardWrapper):
    """Clip rewards to their sign (-1, 0, +1), so one learning rate fits every game's scores."""

    def reward(self, reward):
        return float(np.sign(reward))


class Resize(Stateless, gymnasium.ObservationWrapper):
    """210x160 grayscale screen -> 84x84 uint8, with opencv.

    Area interpolation by default, as ale-py's vector env resizes (it links opencv too, and
    the two give the same bytes); it averages the pixels each output pixel covers, so thin
    objects are not lost between samples. The screen is squashed, not cropped, as in Nature.
    """

    def __init__(self, env, size=84, interp="area"):
        super().__init__(env)
        self.size = size
        self.interp = INTERPOLATIONS[interp]
        self.observation_space = gymnasium.spaces.Box(0, 255, (size, size), np.uint8)

    def observation(self, obs):
        return cv2.resize(obs, (self.size, self.size), interpolation=self.interp)


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

    def state_dict(self):
        return {"frames": list(self.frames)}

    STATE = {"frames": ARRAYS}

    def check_saved(self, state, path):
        # Frames of another shape or count would stack into observations the network
        # cannot take, far from the checkpoint that held them.
        shape = self.observation_space.shape[1:]
        frames = state["frames"]
        if len(frames) not in (0, self.k) or any(f.shape != shape for f in frames):
            raise StateMismatch(f"{path}/frames holds {len(frames)} of shapes "
                                f"{sorted({f.shape for f in frames})}, not {self.k} of {shape}")

    def load_state_dict(self, state):
        self.frames = collections.deque(state["frames"], maxlen=self.k)
