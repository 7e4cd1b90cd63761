"""A scripted env for the Nature loop's and the evaluator's tests: no ROM, no TensorFlow.

The frame at step t of the env's life is [t]; the observation stacks the last K frames.
Episodes last `episode_length` steps, every second one ends the game, with return 10 * game
number. It pickles, as snapshot_env needs.
"""

import gymnasium
import numpy as np

K = 4


class ScriptedEnv(gymnasium.Env):
    def __init__(self, episode_length=5, num_actions=3):
        self.observation_space = gymnasium.spaces.Box(0, 2**31, (K, 1), np.int64)
        self.action_space = gymnasium.spaces.Discrete(num_actions)
        self.episode_length = episode_length
        self.t = self.since_reset = self.episodes = self.games = 0
        self.actions = []
        self.closed = False

    def _obs(self):
        return np.array([[max(self.t - age, 0)] for age in range(K - 1, -1, -1)], np.int64)

    def reset(self, *, seed=None, options=None):
        self.since_reset = 0
        return self._obs(), {}

    def step(self, action):
        self.actions.append(int(action))
        self.t += 1
        self.since_reset += 1
        terminated = self.since_reset == self.episode_length
        info = {"game_over": False}
        if terminated:
            self.episodes += 1
            if self.episodes % 2 == 0:
                self.games += 1
                info = {"game_over": True, "game_length": 2 * self.episode_length,
                        "game_return": 10.0 * self.games}
        return self._obs(), 1.0, terminated, False, info

    def close(self):
        self.closed = True


class QValues:
    """A Q-function that prefers `best` in every state, and counts its calls."""

    def __init__(self, best=2, num_actions=3):
        self.best, self.num_actions, self.calls = best, num_actions, 0

    def __call__(self, states):
        self.calls += 1
        q = np.zeros((len(states), self.num_actions), np.float32)
        q[:, self.best] = 1.0
        return q
