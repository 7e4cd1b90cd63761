"""The fast loop's two trainers (fast_dqn.loops.period_trainers): one interface, and lockstep's
order (a chunk written before its minibatches draw). That both train the Nature loop's
minibatches, in every mode and across stops, is proved by the loop's own tests
(tests/loops/test_fast_loop.py)."""

import dataclasses

import numpy as np
import pytest
from fake_samplers import FakeLearner, FakeSamplers, K, NullMonitor
from helpers import TINY_FAKE

from fast_dqn.agent.replay_memory import ReplayMemory
from fast_dqn.loops.experience import LocalBackend
from fast_dqn.loops.fast_loop import FastLoop
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.run.components import loop_settings
from fast_dqn.run.settings.hyperparameters import FastConfig

BASE = FastConfig(**TINY_FAKE, updates_per_call=16)


def test_the_two_trainers_answer_the_loop_alike():
    """Lockstep is a second trainer behind the concurrent one's interface, so the loop names
    no mode: each of the calls the loop makes is answered by both."""
    from fast_dqn.loops.period_trainers import ConcurrentTrainer, LockstepTrainer

    def calls(cls):
        return {name for name in vars(cls) if not name.startswith("_")}
    assert calls(ConcurrentTrainer) == calls(LockstepTrainer) == {
        "hand_out", "begin", "played", "check", "wait", "train_the_rest", "interrupt"}


@pytest.mark.parametrize("workers", [1, 4])
def test_lockstep_writes_each_chunk_before_it_trains_the_chunks_minibatches(workers):
    """As the Nature loop stores transition t before it trains step t's minibatch, lockstep
    writes a chunk into replay before the minibatches due at its steps draw from it: every
    draw sees every step played so far."""
    config = dataclasses.replace(BASE, workers=workers, concurrent=False)
    samplers = FakeSamplers(config.workers)

    class SeenAtEachDraw(ReplayMemory):
        seen = []

        def sample(self, batch_size):
            self.seen.append((int(self.sizes.sum()), samplers.rounds * workers))
            return super().sample(batch_size)

    replay = SeenAtEachDraw(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                            num_shards=config.workers)
    backend = LocalBackend(samplers, batched=config.synchronize)
    backend.start(np.random.default_rng(0))
    learner = FakeLearner()
    steps = FastLoop(loop_settings(config), backend, learner, replay, None,
                     NullMonitor()).run()
    assert steps == config.timesteps < config.replay_capacity
    assert len(replay.seen) == learner.trained == minibatches_due(
        0, config.timesteps, config.prepopulate, config.train_freq)
    assert all(stored == played for stored, played in replay.seen), replay.seen[:5]
