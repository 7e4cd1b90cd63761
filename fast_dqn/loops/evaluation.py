"""Evaluation: play full games with a fixed epsilon and report their unclipped scores.

The games of an evaluation are fixed by the run's seed and the evaluation's step, and by
nothing carried over from earlier evaluations: game i starts from its own emulator seed and
draws its epsilon-greedy numbers from its own random stream (`game_seeds`). So:

- an evaluation a stop interrupts is played again, identically, on resume, and nothing of it
  needs checkpointing;
- W games played at once on ale-py's vector env (`AtOnce`) are exactly the games one Python
  env plays one after another (`OneAtATime`): the frames are the same
  (tests/envs/test_frame_identity.py), each game's draws are its own, and the returns come back in
  game order (tests/loops/test_evaluation.py plays both on a real ROM).

The protocol is unchanged: full games (all lives), unclipped scores, the run's epsilon and
no-op (or sticky) starts, and its time limit.
"""

import numpy as np

from fast_dqn.envs.environment import SEED_RANGE


class EvaluationInterrupted(Exception):
    """A stop was requested mid-evaluation; nothing of it is kept, and it is played again."""


def game_seeds(key, step, num_games):
    """[(emulator seed, Generator)] of the games of the evaluation at agent step `step`.

    key: the run's evaluation key ((seed, stream), say); every game of every evaluation gets
    its own SeedSequence, so no two share a stream and none depends on another's length.
    """
    games = []
    for i in range(num_games):
        sequence = np.random.SeedSequence([*key, step, i])
        env_seed, stream = sequence.spawn(2)
        games.append((int(env_seed.generate_state(1)[0]) % SEED_RANGE,
                      np.random.default_rng(stream)))
    return games


class OneAtATime:
    """The games one after another on one Python env: an Atari env of the run's preprocessing,
    a --env gymnasium env, or a test's fake. Seeded through reset(seed=...)."""

    width = 1

    def __init__(self, env):
        self.env = env
        self.num_actions = env.action_space.n
        self.observation_shape = env.observation_space.shape
        self.obs = None

    def reset(self, seeds):
        self.restart(0, seeds[0])

    def restart(self, slot, seed):
        self.obs, _ = self.env.reset(seed=seed)

    def observations(self):
        return self.obs[None]

    def step(self, actions):
        """[(slot, game return)] of the games that ended."""
        obs, _, terminated, truncated, info = self.env.step(int(actions[0]))
        self.obs = obs
        if not (terminated or truncated):
            return []
        if info["game_over"]:
            return [(0, info["game_return"])]  # the next game, if any, restarts the env
        self.obs, _ = self.env.reset()  # a lost life: the same game goes on
        return []

    def close(self):
        self.env.close()


class AtOnce:
    """W games at once on ale-py's vector env (fast_dqn.envs.samplers.VectorSamplers), each
    started with its own seed by a partial reset of its slot."""

    def __init__(self, samplers):
        self.samplers = samplers
        self.width = samplers.num_samplers
        self.num_actions = samplers.num_actions
        self.observation_shape = samplers.observation_space.shape
        self.obs = None

    def reset(self, seeds):
        self.obs = self.samplers.reset(seeds)

    def restart(self, slot, seed):
        self.obs = self.samplers.restart(slot, seed)

    def observations(self):
        return self.obs

    def step(self, actions):
        result = self.samplers.step(actions)
        self.obs = result.observations
        return [(int(slot), float(result.game_returns[slot]))
                for slot in np.flatnonzero(result.game_over)]

    def close(self):
        self.samplers.close()


def _choose_actions(games, q_values_fn, seeds, playing, epsilon, actions):
    """Fill `actions` for the slots that play a game: two draws from each game's own stream,
    explore or not, and one network call for all the greedy ones."""
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
    """The returns of the games `seeds` ([(emulator seed, Generator)]), in their order.

    games: OneAtATime or AtOnce, whose slots each play one game at a time; a slot whose game
    ends takes the next game not yet started. Each step draws two numbers from each playing
    game's own stream, explore or not (as fast_dqn.agent.policy does), and sends the states of
    the games that act greedily through the network in one call.
    should_stop() is polled every step; true raises EvaluationInterrupted.
    on_game(k): told as the evaluation is at game k of len(seeds) (k - 1 of them played),
    and k = len(seeds) + 1 when all are.
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
    """The periodic evaluation of a training run: `num_games` games at each call, fixed by
    `key` and the step (see the top), played on `games`."""

    def __init__(self, games, q_values_fn, num_games, epsilon, key, monitor, should_stop=None,
                 on_result=None, on_game=None):
        """on_result(step, returns): told each finished evaluation, after the monitor;
        on_game(k, num_games): told as game k begins (k = num_games + 1: the evaluation is
        over, played or not)."""
        self.games = games
        self.q_values_fn = q_values_fn
        self.num_games = num_games
        self.epsilon = epsilon
        self.key = key
        self.monitor = monitor
        self.should_stop = should_stop
        self.on_result, self.on_game = on_result, on_game

    def __call__(self, step):
        """Evaluate and log at `step`; EvaluationInterrupted on a stop request."""
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
        self.games.close()
