"""Evaluation on a scripted env: whole games, a fixed epsilon, and a stop or failure that
rolls the evaluator back so the same games are played again."""

import numpy as np
import pytest
from fake_env import QValues, ScriptedEnv
from fake_samplers import NullMonitor

from fast_dqn.loops.evaluation import EvaluationInterrupted, Evaluator, evaluate


class Scores(NullMonitor):
    def __init__(self):
        super().__init__()
        self.evals = []

    def record_eval(self, step, returns):
        self.evals.append((step, list(returns)))


def test_it_plays_whole_games_and_reports_their_returns():
    env = ScriptedEnv(episode_length=3)
    # Two episodes per game (a lost life, then the game's end): 3 games are 18 steps.
    assert evaluate(env, QValues(), 3, 0.0, np.random.default_rng(0)) == [10.0, 20.0, 30.0]
    assert env.t == 18 and env.actions == [2] * 18


def test_epsilon_is_the_share_of_random_actions():
    env, q_values = ScriptedEnv(episode_length=50), QValues()
    evaluate(env, q_values, 20, 0.25, np.random.default_rng(1))
    actions = np.array(env.actions)
    # A random action is also the greedy one a third of the time: 0.25 * 2/3 differ.
    assert abs((actions != 2).mean() - 0.25 * 2 / 3) < 0.03
    assert q_values.calls == pytest.approx(0.75 * len(actions), rel=0.05)  # explore, no call


@pytest.mark.parametrize("failure", ["stop", "error"])
def test_an_interrupted_evaluation_rolls_back_and_plays_the_same_games_again(failure):
    monitor = Scores()
    polls = []  # armed after the first evaluation: the second is stopped at its 7th step

    def should_stop():
        if polls:
            polls.append(1)
        return failure == "stop" and len(polls) == 8

    evaluator = Evaluator(ScriptedEnv(episode_length=3), QValues(), 2, 0.5,
                          np.random.default_rng(2), monitor, should_stop)
    evaluator(10)

    def position():
        env = evaluator.env
        return (env.t, env.since_reset, env.episodes, env.games, list(env.actions),
                evaluator.rng.bit_generator.state)
    before = position()
    polls.append(1)
    if failure == "error":
        evaluator.q_values_fn = lambda states: 1 / 0
        with pytest.raises(ZeroDivisionError):
            evaluator(20)
        evaluator.q_values_fn = QValues()
    else:
        with pytest.raises(EvaluationInterrupted):
            evaluator(20)
    assert position() == before and monitor.evals == [(10, [10.0, 20.0])]
    evaluator(20)
    # Game numbers go on from the first evaluation's env: the rollback kept its position.
    assert monitor.evals[-1] == (20, [30.0, 40.0])
    fresh = Evaluator(ScriptedEnv(episode_length=3), QValues(), 2, 0.5,
                      np.random.default_rng(2), Scores())
    fresh(10)
    fresh(20)
    assert fresh.env.actions == evaluator.env.actions  # the very same games
