"""Evaluation: whole games, a fixed epsilon, games fixed by the run's seed and the step (so a
stopped evaluation is played again identically), and the same games whether they are played
one after another in Python or W at once on ale-py's vector env (a real ROM)."""

import dataclasses

import numpy as np
import pytest
from fake_env import QValues, ScriptedEnv
from fake_samplers import NullMonitor

from fast_dqn.loops.evaluation import (
    AtOnce,
    EvaluationInterrupted,
    Evaluator,
    OneAtATime,
    game_seeds,
    play,
)
from fast_dqn.run.components import env_settings


class Scores(NullMonitor):
    def __init__(self):
        super().__init__()
        self.evals = []

    def record_eval(self, step, returns):
        self.evals.append((step, list(returns)))


class SeededGames(ScriptedEnv):
    """A game fixed by its seed: it lasts 3 + seed % 5 steps, and scores seed % 97 plus the
    number of times action 2 was played."""

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.seed, self.score, self.left = seed, 0.0, 3 + seed % 5
        return super().reset()

    def step(self, action):
        obs, _, _, _, _ = super().step(action)
        self.score += action == 2
        self.left -= 1
        if self.left:
            return obs, 0.0, False, False, {"game_over": False}
        return obs, 0.0, True, False, {"game_over": True, "game_length": 0,
                                      "game_return": self.seed % 97 + self.score}


def test_it_plays_whole_games_and_reports_their_returns():
    env = ScriptedEnv(episode_length=3)
    # Two episodes per game (a lost life, then the game's end): 3 games are 18 steps.
    returns = play(OneAtATime(env), QValues(), game_seeds((0,), 0, 3), 0.0)
    assert returns == [10.0, 20.0, 30.0]
    assert env.t == 18 and env.actions == [2] * 18


def test_epsilon_is_the_share_of_random_actions():
    env, q_values = ScriptedEnv(episode_length=50), QValues()
    play(OneAtATime(env), q_values, game_seeds((1,), 0, 20), 0.25)
    actions = np.array(env.actions)
    # A random action is also the greedy one a third of the time: 0.25 * 2/3 differ.
    assert abs((actions != 2).mean() - 0.25 * 2 / 3) < 0.03
    assert q_values.calls == pytest.approx(0.75 * len(actions), rel=0.05)  # explore, no call


@pytest.mark.faults
def test_the_games_are_fixed_by_the_seed_and_the_step_and_a_stop_plays_them_again():
    def evaluator(monitor, should_stop=None):
        return Evaluator(OneAtATime(SeededGames()), QValues(), 4, 0.5, (7, 1), monitor,
                         should_stop)

    straight = Scores()
    evaluator(straight)(10)
    evaluator(straight)(20)
    first, second = straight.evals[0][1], straight.evals[1][1]
    assert first != second  # another step: other games
    polls, monitor = [], Scores()  # armed after the first evaluation: a stop at its 10th step

    def should_stop():
        if polls:
            polls.append(1)
        return len(polls) == 10

    stopped = evaluator(monitor, should_stop)
    stopped(10)
    polls.append(1)
    with pytest.raises(EvaluationInterrupted):
        stopped(20)                                   # stopped mid-way, nothing recorded
    assert monitor.evals == [(10, first)]
    stopped(20)                                       # on resume: the very same games
    assert monitor.evals == straight.evals


def test_each_game_draws_from_its_own_stream():
    one, another = game_seeds((3, 1), 500, 4), game_seeds((3, 1), 500, 4)
    assert [seed for seed, _ in one] == [seed for seed, _ in another]
    assert len({seed for seed, _ in one}) == 4
    assert [rng.random() for _, rng in one] == [rng.random() for _, rng in another]
    assert [seed for seed, _ in game_seeds((3, 1), 1000, 4)] != [seed for seed, _ in one]
    assert all(0 <= seed < 2**31 for seed, _ in game_seeds((2**40, 1), 2**40, 50))


def pixel_q_values(states):
    """A deterministic Q-function, row by row whatever the batch: the mean brightness of four
    bands of the newest frame."""
    newest = np.asarray(states, np.float64)[:, -1]
    bands = np.array_split(newest, 4, axis=1)
    return np.stack([band.mean(axis=(1, 2)) for band in bands], axis=1)


@pytest.mark.slow  # real ROMs, two ways
@pytest.mark.parametrize("game,sticky", [("breakout", 0.0), ("pong", 0.25)])
def test_w_games_at_once_are_the_games_played_one_after_another(game, sticky):
    from fast_dqn.envs.environment import make_env
    from fast_dqn.envs.samplers import VectorSamplers
    from fast_dqn.run.settings.hyperparameters import Config
    config = Config(game=game, max_episode_steps=200, sticky_actions=sticky)
    seeds = lambda: game_seeds((11, 1), 250_000, 7)  # noqa: E731
    one_at_a_time = play(OneAtATime(make_env(env_settings(config), seed=None, training=False)),
                         pixel_q_values, seeds(), 0.1)
    games = AtOnce(VectorSamplers(env_settings(config), 3, seed=0))
    try:
        at_once = play(games, pixel_q_values, seeds(), 0.1)
    finally:
        games.close()
    assert at_once == one_at_a_time
    assert len(set(one_at_a_time)) > 1  # games that differ, or the check would be weak


class CountedSteps:
    """Evaluation games whose steps are counted."""

    def __init__(self, games):
        self.games, self.steps = games, 0

    def __getattr__(self, name):
        return getattr(self.games, name)

    def step(self, actions):
        self.steps += 1
        return self.games.step(actions)


@pytest.mark.parametrize("eval_workers", [1, 2])
def test_evaluation_games_end_at_their_own_time_limit(eval_workers):
    """--eval-max-episode-steps caps each evaluation game (the 2015 paper's 5 minutes is
    4,500 agent steps), on the vector env and on the Python one, and training keeps its own;
    0 leaves the evaluation at training's limit."""
    from fast_dqn.run.components import build_evaluation_games
    from fast_dqn.run.settings.hyperparameters import Config
    config = Config(game="pong", max_episode_steps=60, eval_max_episode_steps=40,
                    eval_workers=eval_workers)
    assert env_settings(config, evaluation=True).max_episode_steps == 40
    assert env_settings(config).max_episode_steps == 60
    assert env_settings(Config(max_episode_steps=60), evaluation=True).max_episode_steps == 60
    for cap, limit in ((40, 40), (0, 60)):
        games = CountedSteps(build_evaluation_games(
            dataclasses.replace(config, eval_max_episode_steps=cap)))
        try:
            # A game of Pong lasts far longer than 60 agent steps: each lasts its time limit.
            returns = play(games, pixel_q_values, game_seeds((3, 1), 0, 2), 0.0)
        finally:
            games.close()
        assert len(returns) == 2 and games.steps == limit * 2 // eval_workers
