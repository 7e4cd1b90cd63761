"""Scripted samplers and learner for the fast loop's tests: no ROM, no TensorFlow.

Sampler j's frame at its own step t is [j, t]; its learner episodes last 3 + j steps, and
every second episode ends the game (so some ends are lost lives, some game overs).
"""

import gymnasium
import numpy as np

from fast_dqn.agent.batch import Batch
from fast_dqn.envs.samplers import SamplerStep

K = 4


class FakeSamplers:
    def __init__(self, num_samplers, num_actions=3, fail_at_round=None):
        self.num_samplers = num_samplers
        self.num_actions = num_actions
        self.observation_space = gymnasium.spaces.Box(0, 2**31, (K, 2), np.int64)
        self.fail_at_round = fail_at_round
        self.rounds = 0
        self.t = np.zeros(num_samplers, np.int64)          # steps taken by each sampler
        self.since_start = np.zeros(num_samplers, np.int64)
        self.episodes = np.zeros(num_samplers, np.int64)
        self.history = [[] for _ in range(num_samplers)]  # newest frame of each state, in order
        self.actions = [[] for _ in range(num_samplers)]

    def _obs(self):
        obs = np.zeros((self.num_samplers, K, 2), np.int64)
        for j in range(self.num_samplers):
            for c in range(K):
                age = K - 1 - c
                if age <= self.since_start[j]:
                    obs[j, c] = [j, self.t[j] - age]
        return obs

    def reset(self):
        obs = self._obs()
        for j in range(self.num_samplers):
            self.history[j].append(tuple(obs[j, -1]))
        return obs

    def step(self, actions):
        self.rounds += 1
        if self.rounds == self.fail_at_round:
            raise RuntimeError("injected sampler fault")
        W = self.num_samplers
        terminated = np.zeros(W, bool)
        game_over = np.zeros(W, bool)
        for j in range(W):
            self.actions[j].append(int(actions[j]))
            self.t[j] += 1
            self.since_start[j] += 1
            if self.since_start[j] == 3 + j:
                terminated[j] = True
                self.episodes[j] += 1
                game_over[j] = self.episodes[j] % 2 == 0
                self.since_start[j] = 0
        obs = self._obs()
        for j in range(W):
            self.history[j].append(tuple(obs[j, -1]))
        return SamplerStep(obs, np.ones(W, np.float32), terminated, np.zeros(W, bool),
                           game_over, np.where(game_over, 10.0 + np.arange(W), 0.0),
                           np.where(game_over, 2 * (3 + np.arange(W)), 0))

    def close(self):
        pass


class FakeLearner:
    def __init__(self, num_actions=3, fail_on_train=None):
        self.num_actions = num_actions
        self.q_calls = []         # batch size of every target-network call
        self.trained = 0
        self.target_updates = 0
        self.fail_on_train = fail_on_train

    def target_q_values(self, states):
        self.q_calls.append(len(states))
        return np.tile(np.arange(self.num_actions, dtype=np.float32), (len(states), 1))

    acting_q_values = target_q_values

    def train(self, batch):
        assert len(batch.discounts) == len(batch.actions)  # a Batch, as replay draws it
        self.trained += 1
        if self.trained == self.fail_on_train:
            raise FloatingPointError("injected trainer fault")
        return 0.5, 1.0

    def train_many(self, batches):
        """K minibatches in one call, as DQNLearner.train_many takes them."""
        assert batches.states.shape[:2] == batches.actions.shape == batches.discounts.shape
        results = [self.train(Batch(*(a[j] for a in batches))) for j in range(len(batches.actions))]
        return tuple(np.array(r) for r in zip(*results))

    def update_target(self):
        self.target_updates += 1

    def target_weights(self):
        return []


class NullMonitor:
    def __init__(self):
        self.games = []
        self.losses = 0

    def record_game(self, step, length, game_return, epsilon):
        self.games.append((step, length, game_return))

    def record_train(self, loss, mean_q=None):
        self.losses += 1

    def record_eval(self, step, returns):
        pass

    def tick(self, step, epsilon):
        pass

    def follow(self, schedule):
        pass

    def message(self, line):
        pass

    def sync_point(self, step):
        pass


class TickRecorder(NullMonitor):
    """A NullMonitor that records each tick as (step, minibatches trained by then)."""

    def __init__(self):
        super().__init__()
        self.ticks = []

    def tick(self, step, epsilon):
        self.ticks.append((step, self.losses))


class MemoryCheckpoints:
    """A Checkpointer that keeps the loop states in memory; stop_requested() turns true at
    its call `stop_at` and stays true."""

    def __init__(self, stop_at=None):
        self.saved, self.calls, self.stop_at = [], 0, stop_at
        self.finished = []  # the `finished` of each save, in order

    def stop_requested(self):
        self.calls += 1
        return self.stop_at is not None and self.calls >= self.stop_at

    def due(self, step):
        return False

    def save(self, step, loop_state, final=False, finished=False):
        self.saved.append((step, loop_state, final))
        self.finished.append(finished)
