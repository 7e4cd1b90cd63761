"""W Atari games stepped together: the sampler backends of the fast loop.

Both backends take one action per sampler and return one `SamplerStep`. A finished episode is
reset at once: its observation is the next one's first state, zero-padded as replay rebuilds it.

- `VectorSamplers` (default): ale-py's AtariVectorEnv. The games step and preprocess in C++
  threads that run outside the GIL, so they really run in parallel, also with TensorFlow.
- `PythonSamplers`: the wrappers of fast_dqn.envs.atari_wrappers, one env per sampler,
  stepped one after another by the calling thread. Python threads would not help: ale-py's
  act() holds the GIL, so two threads stepping two games run no faster than one.

Neither backend starts a Python thread; the fast loop calls `step` (or, on the vector backend,
`send` then `recv`, with fast_dqn.loops.overlapped_backend acting for another group between
them) from its main thread.
"""

from dataclasses import dataclass

import gymnasium
import numpy as np

from fast_dqn.envs.environment import game_seed


@dataclass
class SamplerStep:
    observations: np.ndarray   # (W, k, 84, 84) uint8: each sampler's next state
    rewards: np.ndarray        # (W,) float32, clipped to their sign, for the learner
    terminated: np.ndarray     # (W,) bool: the learner's episode ended (a life lost counts)
    truncated: np.ndarray      # (W,) bool: cut by the time limit
    game_over: np.ndarray      # (W,) bool: a whole game ended this step
    game_returns: np.ndarray   # (W,) float: the unclipped score of each game that ended
    game_lengths: np.ndarray   # (W,) int: its length in agent steps


class PythonSamplers:
    """One wrapped env per sampler (see fast_dqn.envs.environment.make_atari_env).

    Args:
        envs: the wrapped envs, one per sampler, seeded by the caller.
    """

    def __init__(self, envs):
        self.envs = envs
        self.num_samplers = len(envs)
        self.num_actions = envs[0].action_space.n
        self.observation_space = envs[0].observation_space

    def reset(self):
        """New games in every env.

        Returns:
            Each sampler's first state, stacked: (W, k, 84, 84) uint8.
        """
        return np.stack([env.reset()[0] for env in self.envs])

    def step(self, actions):
        """One agent step of every game; games that end are reset at once.

        Args:
            actions: one action per sampler.

        Returns:
            A SamplerStep, one entry per sampler.
        """
        n = self.num_samplers
        obs = [None] * n
        rewards = np.zeros(n, np.float32)
        terminated, truncated, game_over = (np.zeros(n, bool) for _ in range(3))
        game_returns, game_lengths = np.zeros(n), np.zeros(n, np.int64)
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            obs[i], rewards[i], terminated[i], truncated[i], info = env.step(action)
            if terminated[i] or truncated[i]:
                if info["game_over"]:
                    game_over[i] = True
                    game_returns[i], game_lengths[i] = info["game_return"], info["game_length"]
                obs[i], _ = env.reset()
        return SamplerStep(np.stack(obs), rewards, terminated, truncated, game_over,
                           game_returns, game_lengths)

    def state_dict(self):
        """Every game's emulator and wrapper state, to continue it exactly.

        Returns:
            {"backend": "python", "envs": one env_state per sampler}.
        """
        from fast_dqn.envs.environment import env_state
        return {"backend": "python", "envs": [env_state(env) for env in self.envs]}

    def load_state_dict(self, state, step):
        """Continue every game exactly where the checkpoint left it.

        Args:
            state: the samplers' state, as state_dict gives it.
            step: the agent step the run resumes at (unused here: the games continue).

        Returns:
            Whether it could: False for a checkpoint of another backend or sampler count.
        """
        from fast_dqn.envs.environment import load_env_state
        if not self.check_state_dict(state):
            return False
        self.envs = [load_env_state(env, saved, f"/samplers/envs/{i}")
                     for i, (env, saved) in enumerate(zip(self.envs, state["envs"]))]
        return True

    def check_state_dict(self, state):
        """Whether load_state_dict would continue the saved games; False: it starts new ones.

        Args:
            state: the samplers' state, as state_dict gives it.

        Returns:
            True where it would continue them.

        Raises:
            StateMismatch, EnvStateMismatch: as check_env_state, changing nothing.
        """
        from fast_dqn.envs.environment import check_env_state
        if state.get("backend") != "python" or not isinstance(state.get("envs"), list) \
                or len(state["envs"]) != self.num_samplers:
            return False
        for i, (env, saved) in enumerate(zip(self.envs, state["envs"])):
            check_env_state(env, saved, f"/samplers/envs/{i}")
        return True

    def close(self):
        """Close every env."""
        for env in self.envs:
            env.close()


class VectorSamplers:
    """ale-py's AtariVectorEnv: the project's preprocessing, done in C++ threads.

    fast_dqn.envs.atari_wrappers follows it step for step (tests/envs/test_frame_identity.py).

    Args:
        settings: an EnvSettings, but for its interp: this env resizes with area (validate_fast).
        num_samplers: the games, one per sampler (W).
        seed: the first game's seed; game i's is seed + i, as PythonSamplers seeds its envs.
        num_threads: the C++ threads that step them; 0: one per game, at most one per CPU.
    """

    def __init__(self, settings, num_samplers, seed, num_threads=0):
        from ale_py.vector_env import AtariVectorEnv
        self.env = AtariVectorEnv(
            settings.game, num_samplers,
            num_threads=num_threads or min(num_samplers, _cpu_count()),
            autoreset_mode="SameStep",
            frameskip=settings.action_repeat, stack_num=settings.history_length,
            img_height=84, img_width=84, grayscale=True, maxpool=True,
            noop_max=settings.noop_max, use_fire_reset=settings.fire_start,
            episodic_life=False, life_loss_info=settings.episodic_life, reward_clipping=False,
            max_num_frames_per_episode=settings.max_episode_steps * settings.action_repeat,
            repeat_action_probability=settings.sticky_actions,
            full_action_space=settings.full_action_space)
        self.num_samplers = num_samplers
        self.num_actions = int(self.env.single_action_space.n)
        self.observation_space = gymnasium.spaces.Box(0, 255, (settings.history_length, 84, 84),
                                                      np.uint8)
        self.history_length = settings.history_length
        self.seed = game_seed(seed, num_samplers)
        self.returns = np.zeros(num_samplers)
        self.lengths = np.zeros(num_samplers, np.int64)
        self.frame_numbers = np.zeros(num_samplers, np.int64)
        self.since_start = np.zeros(num_samplers, np.int64)

    def reset(self, seeds=None):
        """New games in every slot.

        Args:
            seeds: one seed per slot; None: self.seed, self.seed + 1, ...

        Returns:
            Each sampler's first state, stacked: (W, k, 84, 84) uint8.
        """
        obs, info = self.env.reset(seed=self.seed if seeds is None
                                   else np.asarray(seeds, np.int64))
        self.returns[:] = 0
        self.lengths[:] = 0
        self.frame_numbers[:] = info["episode_frame_number"]
        self.since_start[:] = 0
        return self._pad(obs)

    def restart(self, slot, seed):
        """A new game seeded `seed` in slot `slot` alone, the others untouched (after a reset).

        Args:
            slot: the sampler whose game restarts.
            seed: the new game's seed.

        Returns:
            Every slot's observation, stacked: (W, k, 84, 84) uint8.
        """
        mask = np.zeros(self.num_samplers, bool)
        mask[slot] = True
        obs, info = self.env.reset(seed=np.array([seed], np.int64),
                                   options={"reset_mask": mask})
        self.returns[slot] = self.lengths[slot] = self.since_start[slot] = 0
        self.frame_numbers[slot] = np.asarray(info["episode_frame_number"])[slot]
        return self._pad(obs)

    def step(self, actions):
        """One agent step of every game; games that end are reset at once.

        Args:
            actions: one action per sampler.

        Returns:
            A SamplerStep, one entry per sampler.
        """
        self.send(actions)
        return self.recv()

    def send(self, actions):
        """Start one agent step of every game; the C++ threads play it while the caller goes on.

        Args:
            actions: one action per sampler.
        """
        self.env.send(np.asarray(actions, dtype=np.int32))

    def recv(self):
        """Wait for the step that `send` started.

        Returns:
            A SamplerStep, one entry per sampler.
        """
        obs, rewards, terminated, truncated, info = self.env.recv()
        rewards = np.asarray(rewards, dtype=np.float64)
        self.returns += rewards
        self.lengths += 1
        # With SameStep autoreset a finished game comes back already reset, so its episode
        # frame counter falls; after a lost life it keeps counting.
        frame_numbers = np.asarray(info["episode_frame_number"], np.int64)
        game_over = truncated | (terminated & (frame_numbers < self.frame_numbers))
        self.frame_numbers = frame_numbers
        game_returns = np.where(game_over, self.returns, 0.0)
        game_lengths = np.where(game_over, self.lengths, 0)
        self.returns[game_over] = 0
        self.lengths[game_over] = 0
        ended = terminated | truncated
        self.since_start = np.where(ended, 0, self.since_start + 1)
        return SamplerStep(self._pad(obs), np.sign(rewards).astype(np.float32),
                           np.asarray(terminated, bool), np.asarray(truncated, bool),
                           game_over, game_returns, game_lengths)

    def state_dict(self):
        """The backend's name alone: AtariVectorEnv cannot save its emulators.

        Returns:
            {"backend": "vector"}.
        """
        return {"backend": "vector"}

    def check_state_dict(self, state):
        """Whether load_state_dict would continue the saved games: never, nothing of them loads.

        Args:
            state: the samplers' state, as a checkpoint holds it.

        Returns:
            False.
        """
        return False  # nothing of the saved games is loaded

    def load_state_dict(self, state, step):
        """Start new games on resume: AtariVectorEnv cannot save emulators.

        Args:
            state: the samplers' state, as a checkpoint holds it (unused).
            step: the agent step resumed at; it shifts the seeds: the first games are not replayed.

        Returns:
            False: the saved games were not continued.
        """
        self.seed = game_seed(self.seed + step, self.num_samplers)
        return False

    def _pad(self, obs):
        """Zero the frames from before each sampler's episode start, like FrameHistory: ale-py
        keeps stacking frames across a lost life, but the learner's episode starts afresh."""
        k = self.history_length
        blank = np.arange(k - 1)[None, :] < (k - 1 - self.since_start)[:, None]
        if blank.any():
            obs = np.array(obs)
            obs[:, :k - 1][blank] = 0
        return obs

    def close(self):
        """Close the vector env and its threads."""
        self.env.close()


def _cpu_count():
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
