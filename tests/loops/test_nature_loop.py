"""The Nature loop over scripted parts: when it trains, copies the target, evaluates and
checkpoints, what it stores, and that a stop and resume change none of it."""

import numpy as np
import pytest
from fake_env import K, QValues, ScriptedEnv
from fake_samplers import MemoryCheckpoints, NullMonitor, TickRecorder

from fast_dqn.agent.replay_memory import ReplayMemory
from fast_dqn.agent.schedules import LinearSchedule
from fast_dqn.loops.nature_loop import run_nature_loop
from fast_dqn.loops.settings import LoopSettings

SETTINGS = LoopSettings(timesteps=120, prepopulate=20, train_freq=4, target_update_freq=30,
                        batch_size=2, eval_freq=50, exploration=LinearSchedule(1.0, 0.0, 60))


class Learner:
    """Records the agent step of each call, read from the replay it is handed."""

    def __init__(self, replay):
        self.replay, self.q_values = replay, QValues()
        self.trained_at, self.updated_at = [], []

    def train(self, batch):
        self.trained_at.append(len(self.replay))
        return 0.5, 1.0

    def update_target(self):
        self.updated_at.append(len(self.replay))


class Evaluations:
    def __init__(self):
        self.steps = []

    def __call__(self, step):
        self.steps.append(step)


def run(settings=SETTINGS, env=None, learner_replay=None, checkpoints=None, resume=None,
        seed=0):
    env = env or ScriptedEnv()
    replay, learner = learner_replay or (None, None)
    if replay is None:
        replay = ReplayMemory(1000, (1,), K, frame_dtype=np.int64, seed=1)
        learner = Learner(replay)
    evaluations = Evaluations()
    step = run_nature_loop(settings, env, learner, replay, NullMonitor(),
                           np.random.default_rng(seed), evaluations, checkpoints, resume)
    return step, env, learner, replay, evaluations


def test_it_trains_after_each_fourth_step_past_warm_up_and_copies_every_c_steps():
    step, _, learner, replay, evaluations = run()
    assert step == 120 and len(replay) == 120
    assert learner.trained_at == list(range(24, 121, 4))  # past 20 stored steps: 24, 28, ...
    assert learner.updated_at == [30, 60, 90, 120]
    assert evaluations.steps == [50, 100, 120]  # every 50 steps, and at the end


def test_warm_up_acts_uniformly_and_then_greedy_actions_come_from_the_network():
    settings = LoopSettings(timesteps=400, prepopulate=200, train_freq=4, target_update_freq=100,
                            batch_size=2, eval_freq=0, exploration=LinearSchedule(0.0, 0.0, 1))
    _, env, learner, _, _ = run(settings)
    warm_up, after = np.array(env.actions[:200]), np.array(env.actions[200:])
    assert set(warm_up) == {0, 1, 2} and learner.q_values.calls == 200  # only after warm-up
    assert (after == learner.q_values.best).all()


def test_stored_transitions_are_what_the_env_showed():
    _, env, _, replay, _ = run()
    states, actions, rewards, next_states, dones, _ = replay.sample(64)
    # Episodes of 5 steps start at frames 0, 5, 10, ...: the step from each fifth state ends
    # one, and every other next state is the state moved on by one frame.
    frames, next_frames = states[:, -1, 0], next_states[:, -1, 0]
    np.testing.assert_array_equal(dones, frames % 5 == 4)
    assert (next_frames[dones == 0] == frames[dones == 0] + 1).all()
    # Older frames of the stack from before the episode began are zeros.
    older = frames[:, None] - [3, 2, 1]
    np.testing.assert_array_equal(states[:, :-1, 0],
                                  np.where(older >= (frames // 5 * 5)[:, None], older, 0))
    np.testing.assert_array_equal(actions, [env.actions[f] for f in frames])
    assert (rewards == 1.0).all()


@pytest.mark.parametrize("stop_at", [3, 57, 118])
@pytest.mark.faults
def test_a_stop_checkpoints_and_the_resumed_loop_does_exactly_the_rest(stop_at):
    import pickle

    from helpers import through_checkpoint
    whole = run()
    env = ScriptedEnv()
    replay = ReplayMemory(1000, (1,), K, frame_dtype=np.int64, seed=1)
    learner = Learner(replay)
    checkpoints = MemoryCheckpoints(stop_at)
    rng = np.random.default_rng(0)
    evaluations = Evaluations()
    step = run_nature_loop(SETTINGS, env, learner, replay, NullMonitor(), rng, evaluations,
                           checkpoints)
    saved_step, state, final = checkpoints.saved[-1]
    assert saved_step == step == stop_at - 1 and not final
    # The checkpoint keeps this scripted env as gymnasium envs of --env are kept: pickled.
    env = pickle.loads(pickle.dumps(env))
    run_nature_loop(SETTINGS, env, learner, replay, NullMonitor(), rng, evaluations,
                    MemoryCheckpoints(), resume=through_checkpoint(state))
    assert learner.trained_at == whole[2].trained_at
    assert learner.updated_at == whole[2].updated_at
    assert evaluations.steps == whole[4].steps
    assert env.actions[-5:] == whole[1].actions[-5:] and env.t == 120


def test_only_a_run_that_ends_with_its_last_evaluation_is_marked_finished():
    from fast_dqn.loops.evaluation import EvaluationInterrupted
    checkpoints = MemoryCheckpoints()
    run(checkpoints=checkpoints)
    assert [s[0] for s in checkpoints.saved] == [120] and checkpoints.finished == [True]

    class StoppedAtTheEnd(Evaluations):
        """Ctrl-C during the run's last evaluation: the evaluator rolls back and raises."""
        def __call__(self, step):
            if step == 120:
                checkpoints.stop_at = 0
                raise EvaluationInterrupted()
            super().__call__(step)

    checkpoints = MemoryCheckpoints()
    replay = ReplayMemory(1000, (1,), K, frame_dtype=np.int64, seed=1)
    run_nature_loop(SETTINGS, ScriptedEnv(), Learner(replay), replay, NullMonitor(),
                    np.random.default_rng(0), StoppedAtTheEnd(), checkpoints)
    step, state, final = checkpoints.saved[-1]
    assert step == 120 and final and state["eval_pending"] and checkpoints.finished[-1] is False


def test_the_console_goes_on_while_the_last_step_trains_its_deferred_minibatches():
    """A resume without replay whose refill reaches the last step trains every owed minibatch
    there: the console is ticked between them, not left at the refill for minutes."""
    from helpers import through_checkpoint

    replay = ReplayMemory(1000, (1,), K, frame_dtype=np.int64, seed=1)
    learner, checkpoints = Learner(replay), MemoryCheckpoints(100)
    env, rng = ScriptedEnv(), np.random.default_rng(0)
    run_nature_loop(SETTINGS, env, learner, replay, NullMonitor(), rng, Evaluations(),
                    checkpoints)
    step, state, _ = checkpoints.saved[-1]
    state = through_checkpoint(state)
    # As a resume without replay leaves it: 10 owed, refilling up to the run's last step.
    state["schedule"].update(refill_until=120, deferred=10)
    monitor = TickRecorder()
    run_nature_loop(SETTINGS, env, learner, replay, monitor, rng, Evaluations(),
                    MemoryCheckpoints(), resume=state)
    last = [trained for at, trained in monitor.ticks if at == 120]
    from fast_dqn.loops.minibatch_schedule import minibatches_due
    owed_and_due = 10 + minibatches_due(step, 120, SETTINGS.prepopulate, SETTINGS.train_freq)
    assert monitor.losses == owed_and_due
    assert list(range(1, owed_and_due + 1)) == sorted(set(last))  # a tick after each one
