"""A period of the fast loop (fast_dqn.loops.period): its sync point, its minibatches and the
rewind on a stop."""

import dataclasses

import numpy as np
from fake_samplers import K
from helpers import TINY_FAKE

from fast_dqn.agent.replay_memory import ReplayMemory
from fast_dqn.loops.fast_loop_state import FastLoopState
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.loops.period import Period, next_sync_point
from fast_dqn.run.components import loop_settings
from fast_dqn.run.settings.hyperparameters import FastConfig

BASE = FastConfig(**TINY_FAKE, updates_per_call=16)


def test_a_period_hands_out_up_to_its_sync_point_and_a_stop_rewinds_to_its_start():
    config = dataclasses.replace(BASE, workers=4)
    settings = loop_settings(config)
    replay = ReplayMemory(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                          num_shards=config.workers, seed=3)
    for step in range(0, 200, 4):
        replay.add_batch(np.full((1, 2), step), np.zeros(1), np.zeros(1), np.zeros(1, bool),
                         np.zeros(1, bool), shard=0)
    state = FastLoopState.fresh(settings)
    state.step = state.trained_through = config.prepopulate
    period = Period(state, settings, config.workers, 960, replay)
    end = next_sync_point(state.step, config.target_update_freq, config.workers, 960)
    assert period.sync_point == end
    period.hand_out()
    assert period.minibatches == minibatches_due(state.step, end, config.prepopulate,
                                                 config.train_freq) > 3
    assert state.trained_through == end and period.unplayed() == period.minibatches
    assert not period.ended_by(state.step, state.step + 4)
    assert period.ended_by(end - 4, end)
    period.mark_start()
    drawn = [replay.sample(config.batch_size)[0].tolist() for _ in range(3)]
    owed = period.minibatches
    period.rewind(2)
    assert period.minibatches == owed - 2
    assert replay.sample(config.batch_size)[0].tolist() == drawn[2]


def test_after_a_refill_the_trainer_repays_only_what_the_steps_played_allow():
    # Stopped at 340 with every minibatch trained (60), resumed without replay: the refill
    # runs to 440 and deferred the 15 of steps 341 to 400 that the stop had handed out. The
    # hand-out at 400 defers those of 401 to 440 too and repays 25 with the 40 due after. At
    # every step the trainer may bring the run's total up to the Nature loop's, not past it.
    config = dataclasses.replace(BASE, workers=4, target_update_freq=200, timesteps=2000)
    settings = loop_settings(config)
    replay = ReplayMemory(100, (2,), K, frame_dtype=np.int64, num_shards=4, seed=3)
    replay.add_batch(np.zeros((50, 2)), np.zeros(50), np.zeros(50), np.zeros(50, bool),
                     np.zeros(50, bool), shard=0)
    state = FastLoopState.fresh(settings)
    state.step = state.trained_through = 400
    state.schedule.refill(340, config.prepopulate, owed=15)
    period = Period(state, settings, 4, 2000, replay)
    period.hand_out()
    trained = minibatches_due(0, 340, config.prepopulate, config.train_freq)
    assert (trained, state.owed, state.schedule.deferred) == (60, 65, 0)
    for step in [400, 420, 440, 500, 600]:
        state.step = step
        allowed = state.owed - period.unplayed()
        assert trained + allowed == minibatches_due(0, step, config.prepopulate,
                                                    config.train_freq), step
