"""Evaluation: play full games with a fixed epsilon and report their unclipped scores.

The games of an evaluation depend only on the run's seed and the evaluation's step: game i starts
from its own emulator seed and draws its epsilon-greedy numbers from its own stream (`game_seeds`).
So an evaluation a stop interrupts is played again, identically, on resume, needing no checkpoint;
and W games played at once on ale-py's vector env (`AtOnce`) are the games one Python env plays in
turn (`OneAtATime`), in game order (tests/loops/test_evaluation.py plays both on a real ROM).
"""

import numpy as np

from fast_dqn.envs.environment import SEED_RANGE


class EvaluationInterrupted(Exception):
    """A stop was requested mid-evaluation; nothing of it is kept, and it is played again."""


def game_seeds(key, step, num_games):
    """The emulator seed and random stream of each game of the evaluation at agent step `step`.

    Args:
        key: the run's evaluation key, a tuple of ints ((seed, stream), say).
        step: the agent step the evaluation is of.
        num_games: how many games the evaluation plays.

    Returns:
        [(emulator seed, numpy Generator)], one pair per game, in game order.
    """
    games = []
    for i in range(num_games):
        sequence = np.random.SeedSequence([*key, step, i])
        env_seed, stream = sequence.spawn(2)
        games.append((int(env_seed.generate_state(1)[0]) % SEED_RANGE,
                      np.random.default_rng(stream)))
    return games


class OneAtATime:
    """The games of an evaluation, one after another on one Python env, each seeded by reset.

    Args:
        env: the gymnasium env, whose info says `game_over` and `game_return` at a game's end.
    """

    width = 1

    def __init__(self, env):
        self.env = env
        self.num_actions = env.action_space.n
        self.observation_shape = env.observation_space.shape
        self.obs = None

    def reset(self, seeds):
        """Start the first game.

        Args:
            seeds: the emulator seed of each slot's first game; only the first is used.
        """
        self.restart(0, seeds[0])

    def restart(self, slot, seed):
        """Start a new game on the env.

        Args:
            slot: the slot to play it in; always 0 here.
            seed: the game's emulator seed, an int.
        """
        self.obs, _ = self.env.reset(seed=seed)

    def observations(self):
        """The current observation, as a batch of one.

        Returns:
            An array of shape (1, *observation_shape).
        """
        return self.obs[None]

    def step(self, actions):
        """Play one agent step; a lost life goes on with the same game.

        Args:
            actions: an array of one action, for slot 0.

        Returns:
            [(slot, game return)] of the games that ended, the returns unclipped.
        """
        obs, _, terminated, truncated, info = self.env.step(int(actions[0]))
        self.obs = obs
        if not (terminated or truncated):
            return []
        if info["game_over"]:
            return [(0, info["game_return"])]  # the next game, if any, restarts the env
        self.obs, _ = self.env.reset()  # a lost life: the same game goes on
        return []

    def close(self):
        """Close the env."""
        self.env.close()


class AtOnce:
    """W games of an evaluation at once on ale-py's vector env, each slot reset with its seed.

    Args:
        samplers: a fast_dqn.envs.samplers.VectorSamplers of W games.
    """

    def __init__(self, samplers):
        self.samplers = samplers
        self.width = samplers.num_samplers
        self.num_actions = samplers.num_actions
        self.observation_shape = samplers.observation_space.shape
        self.obs = None

    def reset(self, seeds):
        """Start a game in every slot.

        Args:
            seeds: the emulator seed of each slot's first game, W of them.
        """
        self.obs = self.samplers.reset(seeds)

    def restart(self, slot, seed):
        """Start a new game in one slot; the others go on.

        Args:
            slot: the slot to restart, in [0, W).
            seed: the game's emulator seed, an int.
        """
        self.obs = self.samplers.restart(slot, seed)

    def observations(self):
        """The current observation of every slot.

        Returns:
            An array of shape (W, *observation_shape).
        """
        return self.obs

    def step(self, actions):
        """Play one agent step in every slot.

        Args:
            actions: an array of W actions, one per slot.

        Returns:
            [(slot, game return)] of the games that ended, the returns unclipped.
        """
        result = self.samplers.step(actions)
        self.obs = result.observations
        return [(int(slot), float(result.game_returns[slot]))
                for slot in np.flatnonzero(result.game_over)]

    def close(self):
        """Close the vector env."""
        self.samplers.close()


def _choose_actions(games, q_values_fn, seeds, playing, epsilon, actions):
    """Fill `actions` for the playing slots: two draws per game, one call for the greedy."""
    greedy = []
    for slot, game in enumerate(playing):
        if game < 0:
            continue
        rng = seeds[game][1]
        explore = rng.random() < epsilon
        actions[slot] = int(rng.integers(0, games.num_actions))
        if not explore:
            greedy.append(slot)
    if greedy:
        actions[greedy] = np.argmax(q_values_fn(games.observations()[greedy]), axis=1)


def play(games, q_values_fn, seeds, epsilon, should_stop=None, on_game=None):
    """Play the games `seeds` to their ends and return their scores, in their order.

    A slot whose game ends takes the next game not yet started.

    Args:
        games: OneAtATime or AtOnce, whose slots each play one game at a time.
        q_values_fn: maps a batch of observations to their Q-values, (n, num_actions).
        seeds: [(emulator seed, numpy Generator)], one per game, as game_seeds gives them.
        epsilon: the probability of a uniform action, at every agent step.
        should_stop: a callable polled every agent step, or None; true raises EvaluationInterrupted.
        on_game: told k once k - 1 of the len(seeds) games are played (1 at the start); or None.

    Returns:
        The unclipped score of each game, in the order of `seeds`.
    """
    num_games, width = len(seeds), games.width
    on_game = on_game or (lambda game: None)
    returns = [None] * num_games
    first = min(width, num_games)
    # Slots beyond the games to play still need a seed; they play, unused.
    games.reset([seeds[min(slot, num_games - 1)][0] for slot in range(width)])
    playing = [slot if slot < first else -1 for slot in range(width)]  # game of each slot
    started, done = first, 0
    on_game(1)
    actions = np.zeros(width, np.int64)
    while done < num_games:
        if should_stop is not None and should_stop():
            raise EvaluationInterrupted
        _choose_actions(games, q_values_fn, seeds, playing, epsilon, actions)
        for slot, game_return in games.step(actions):
            game = playing[slot]
            if game < 0:
                continue  # a slot with no game left to play
            returns[game] = game_return
            done += 1
            on_game(done + 1)
            if started < num_games:
                games.restart(slot, seeds[started][0])
                playing[slot] = started
                started += 1
            else:
                playing[slot] = -1
    return returns


class Evaluator:
    """The periodic evaluation of a training run, called with the agent step to evaluate.

    Args:
        games: OneAtATime or AtOnce, on which the games are played.
        q_values_fn: maps a batch of observations to their Q-values, (n, num_actions).
        num_games: the games each evaluation plays.
        epsilon: the probability of a uniform action, at every agent step.
        key: the run's evaluation key, a tuple of ints (see game_seeds).
        monitor: the run's Monitor, told each finished evaluation's scores (record_eval).
        should_stop: a callable polled every agent step; true interrupts; or None.
        on_result: a callable told (step, scores) after the monitor; or None.
        on_game: told (k, num_games) as game k begins, k = num_games + 1 once over (played or not).
    """

    def __init__(self, games, q_values_fn, num_games, epsilon, key, monitor, should_stop=None,
                 on_result=None, on_game=None):
        self.games = games
        self.q_values_fn = q_values_fn
        self.num_games = num_games
        self.epsilon = epsilon
        self.key = key
        self.monitor = monitor
        self.should_stop = should_stop
        self.on_result, self.on_game = on_result, on_game

    def __call__(self, step):
        """Play and record the evaluation of `step`; a stop raises EvaluationInterrupted."""
        on_game = None
        if self.on_game is not None:
            def on_game(game):
                self.on_game(game, self.num_games)
        try:
            returns = play(self.games, self.q_values_fn,
                           game_seeds(self.key, step, self.num_games), self.epsilon,
                           self.should_stop, on_game)
        finally:
            if on_game is not None:
                on_game(self.num_games + 1)  # over, whatever happened
        self.monitor.record_eval(step, returns)
        if self.on_result is not None:
            self.on_result(step, returns)

    def close(self):
        """Close the games' env."""
        self.games.close()
