import dataclasses
import threading
import time

import numpy as np
import pytest
from fake_samplers import FakeLearner, FakeSamplers, K, NullMonitor, TickRecorder
from helpers import TINY_FAKE

from fast_dqn.agent.replay_memory import ReplayMemory
from fast_dqn.agent.train_calls import TrainCalls
from fast_dqn.loops.background_trainer import BackgroundTrainer, one_by_one
from fast_dqn.loops.experience import LocalBackend
from fast_dqn.loops.fast_loop import FastLoop
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.loops.period import next_sync_point
from fast_dqn.run.components import loop_settings
from fast_dqn.run.settings.hyperparameters import FastConfig

# 24 minibatches a period: calls of 16 and 8 (a resolved config's K on a CPU is 16).
BASE = FastConfig(**TINY_FAKE, updates_per_call=16)


def run(config, samplers=None, learner=None, prefetch=True):
    samplers = samplers or FakeSamplers(config.workers)
    learner = learner or FakeLearner()
    replay = ReplayMemory(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                          num_shards=config.workers)
    monitor = NullMonitor()
    trainer = None
    if config.concurrent:
        calls = TrainCalls(learner, replay, config.batch_size, on_device=False)
        trainer = BackgroundTrainer(calls.train, calls.draw,
                                    on_loss=lambda r: monitor.record_train(*r),
                                    prefetch=prefetch, per_call=config.updates_per_call)
    try:
        backend = LocalBackend(samplers, batched=config.synchronize)
        backend.start(np.random.default_rng(0))
        steps = FastLoop(loop_settings(config), backend, learner, replay, trainer,
                         monitor).run()
    finally:
        if trainer:
            trainer.close()
    return steps, samplers, learner, replay, monitor


def test_next_sync_point():
    assert next_sync_point(0, 100, 8, 10_000) == 104    # the first round at or past 100
    assert next_sync_point(104, 100, 8, 10_000) == 200
    assert next_sync_point(0, 96, 8, 10_000) == 96
    assert next_sync_point(9_990, 100, 8, 10_000) == 10_000


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_one_batched_target_call_per_synchronized_round(workers):
    # Greedy after warm-up, so every sampler needs the network every round.
    config = dataclasses.replace(BASE, workers=workers, concurrent=False, eps_start=0.0,
                                 eps_end=0.0)
    _, samplers, learner, *_ = run(config)
    # Warm-up steps explore, so rounds before its end skip the network and the round that
    # straddles it sends only its post-warm-up samplers.
    greedy = [sum(r * workers + j >= config.prepopulate for j in range(workers))
              for r in range(samplers.rounds)]
    assert learner.q_calls == [g for g in greedy if g]
    assert learner.q_calls.count(workers) >= len(learner.q_calls) - 1


def test_exploring_samplers_skip_the_network():
    config = dataclasses.replace(BASE, workers=4, concurrent=False)
    _, samplers, learner, *_ = run(config)
    assert len(learner.q_calls) <= samplers.rounds and max(learner.q_calls) <= 4
    # epsilon ends at 0.1: most late rounds query with most samplers, early ones hardly.
    assert sum(learner.q_calls) < 4 * samplers.rounds - config.prepopulate


def test_unsynchronized_samplers_query_alone():
    config = dataclasses.replace(BASE, workers=4, synchronize=False, concurrent=False,
                                 eps_start=0.0, eps_end=0.0)
    _, samplers, learner, *_ = run(config)
    assert set(learner.q_calls) == {1}
    assert len(learner.q_calls) == 4 * samplers.rounds - config.prepopulate


@pytest.mark.parametrize("concurrent", [True, False])
@pytest.mark.parametrize("synchronize", [True, False])
@pytest.mark.parametrize("workers", [1, 3, 4, 7])
def test_nature_ratios_hold_in_every_mode(concurrent, synchronize, workers):
    """Also where W does not divide the target period (3, 7 of 96): each period then ends at
    the first round past its multiple, the target is copied as often as the Nature loop's,
    and the minibatches are the Nature loop's to the last."""
    config = dataclasses.replace(BASE, workers=workers, concurrent=concurrent,
                                 synchronize=synchronize, updates_per_call=5)
    steps, samplers, learner, _, monitor = run(config)
    assert steps == -(-config.timesteps // workers) * workers
    assert learner.trained == minibatches_due(0, steps, config.prepopulate, config.train_freq)
    assert monitor.losses == learner.trained
    sync_rounds = [s for s in range(workers, steps + 1, workers)
                   if s // 96 > (s - workers) // 96 or s == steps]
    assert learner.target_updates == len(sync_rounds)


@pytest.mark.parametrize("concurrent", [True, False])
def test_every_step_lands_in_replay_once_in_sampler_order(concurrent):
    config = dataclasses.replace(BASE, workers=3, concurrent=concurrent, timesteps=600)
    steps, samplers, learner, replay, _ = run(config)
    for j in range(3):
        n = int(replay.sizes[j])
        assert n == steps // 3  # every step of sampler j, nothing else
        oldest = (replay.pointers[j] - n) % replay.shard_capacity
        order = (oldest + np.arange(n)) % replay.shard_capacity
        frames = [tuple(f) for f in replay.frames[j, order]]
        assert frames == samplers.history[j][:n]  # s_0 .. s_{n-1}, in time order
        assert replay.actions[j, order].tolist() == samplers.actions[j]
        # Learner episodes of sampler j last 3 + j steps.
        ends = np.flatnonzero(replay.terminals[j, order]) + 1
        assert ends.tolist() == list(range(3 + j, n + 1, 3 + j))


def test_replay_stacks_match_what_the_samplers_showed():
    config = dataclasses.replace(BASE, workers=2, concurrent=True, timesteps=400)
    samplers = FakeSamplers(2)
    seen = []
    original_step = samplers.step

    def recording_step(actions):
        seen.append(samplers._obs())
        return original_step(actions)
    samplers.step = recording_step
    _, _, _, replay, _ = run(config, samplers=samplers)
    for j in range(2):
        n = int(replay.sizes[j])
        for t in range(K - 1, n - 1):
            states, *_ = replay.gather(np.array([j]), np.array([t]))
            assert np.array_equal(states[0], seen[t][j])


def test_games_are_logged_with_global_steps_in_sampler_order():
    config = dataclasses.replace(BASE, workers=2, concurrent=False, timesteps=40)
    _, _, _, _, monitor = run(config)
    # Sampler 0 ends a game every 6 of its steps, sampler 1 every 8.
    expected = sorted([(2 * t - 1, 6, 10.0) for t in range(6, 21, 6)] +
                      [(2 * t, 8, 11.0) for t in range(8, 21, 8)])
    assert monitor.games == expected


def test_reproducible_with_threads():
    config = dataclasses.replace(BASE, workers=4, concurrent=True)
    a = run(config)[3]
    b = run(config)[3]
    assert np.array_equal(a.frames, b.frames) and np.array_equal(a.actions, b.actions)


@pytest.mark.parametrize("fault", ["sampler", "trainer"])
@pytest.mark.faults
def test_a_fault_ends_the_run_quickly_and_leaves_no_thread(fault):
    config = dataclasses.replace(BASE, workers=4, concurrent=True, timesteps=100_000,
                                 target_update_freq=400)
    samplers = FakeSamplers(4, fail_at_round=300 if fault == "sampler" else None)
    learner = FakeLearner(fail_on_train=5 if fault == "trainer" else None)
    error = RuntimeError if fault == "sampler" else FloatingPointError
    with pytest.raises(error, match="injected"):
        run(config, samplers=samplers, learner=learner)
    time.sleep(0.2)
    assert not any(t.name.startswith("fast-dqn") and t.is_alive() for t in threading.enumerate())


@pytest.mark.parametrize("flags", [(True, False, False), (False, True, False),
                                   (False, False, True)])
@pytest.mark.faults
def test_the_loop_state_survives_a_checkpoint_as_it_is(flags):
    from helpers import through_checkpoint

    from fast_dqn.loops.fast_loop_state import FastLoopState
    settings = loop_settings(BASE)
    state = FastLoopState.fresh(settings)
    state.step, state.trained_through, state.last_eval, state.owed = 480, 576, 400, 23
    state.sync_pending, state.eval_pending, state.boundary = flags
    state.schedule.refill(480, 100, owed=5)
    state.held.chunks.append((np.ones((1, 2, 2)), np.zeros((1, 2)), np.zeros((1, 2)),
                              np.zeros((1, 2), bool), np.zeros((1, 2), bool), np.arange(2)))
    saved = through_checkpoint(state.state_dict())
    again = FastLoopState.from_state_dict(saved, settings)
    assert again.state_dict().keys() == saved.keys()
    for key in ("step", "trained_through", "last_eval", "owed", "sync_pending",
                "eval_pending", "boundary", "schedule"):
        assert again.state_dict()[key] == state.state_dict()[key], key
    assert len(again.held.chunks) == 1
    np.testing.assert_array_equal(again.held.chunks[0][0], state.held.chunks[0][0])


@pytest.mark.parametrize("concurrent", [True, False])
@pytest.mark.parametrize("stop_at", [2, 9, 15, 40])
@pytest.mark.faults
def test_a_stop_anywhere_and_a_resume_from_its_state_give_the_uninterrupted_run(concurrent,
                                                                               stop_at):
    """Stopped at the stop_at-th check (mid-period, or at a sync point), checkpointed, and
    continued from the loop state read back as a checkpoint would, with the same parts: the
    same replay, the same minibatches drawn, the same target copies."""
    from fake_samplers import MemoryCheckpoints
    from helpers import through_checkpoint

    from fast_dqn.loops.fast_loop_state import FastLoopState
    config = dataclasses.replace(BASE, workers=4, concurrent=concurrent)
    settings = loop_settings(config)

    def parts():
        learner = FakeLearner()
        replay = ReplayMemory(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                              num_shards=config.workers, seed=3)
        backend = LocalBackend(FakeSamplers(config.workers), batched=True)
        backend.start(np.random.default_rng(0))
        trainer = None
        if concurrent:
            calls = TrainCalls(learner, replay, config.batch_size, on_device=False)
            trainer = BackgroundTrainer(calls.train, calls.draw, on_loss=lambda r: None,
                                        prefetch=False, per_call=config.updates_per_call)
        return learner, replay, backend, trainer

    def finish(learner, replay, trainer):
        if trainer:
            trainer.close()
        return (learner.trained, learner.target_updates, len(replay),
                replay.rng.bit_generator.state, replay.sample(8)[0].tolist())

    learner, replay, backend, trainer = parts()
    FastLoop(settings, backend, learner, replay, trainer, NullMonitor()).run()
    whole = finish(learner, replay, trainer)

    learner, replay, backend, trainer = parts()
    checkpoints = MemoryCheckpoints(stop_at)
    step = FastLoop(settings, backend, learner, replay, trainer, NullMonitor(),
                    checkpoints=checkpoints).run()
    assert 0 < step < 960 and checkpoints.saved[-1][0] == step
    state = FastLoopState.from_state_dict(through_checkpoint(checkpoints.saved[-1][1]),
                                          settings)
    FastLoop(settings, backend, learner, replay, trainer, NullMonitor(),
             checkpoints=MemoryCheckpoints()).run(state)
    assert finish(learner, replay, trainer) == whole


@pytest.mark.parametrize("stopped_in_last_evaluation", [False, True])
def test_only_a_run_that_ends_with_its_last_evaluation_is_marked_finished(
        stopped_in_last_evaluation):
    from fake_samplers import MemoryCheckpoints

    from fast_dqn.loops.evaluation import EvaluationInterrupted
    config = dataclasses.replace(BASE, workers=4, evaluate=480)
    settings = loop_settings(config)
    checkpoints, evaluated = MemoryCheckpoints(), []

    def evaluator(step):
        if step == 960 and stopped_in_last_evaluation:
            checkpoints.stop_at = 0  # Ctrl-C during it: rolled back, then the stop
            raise EvaluationInterrupted()
        evaluated.append(step)

    learner = FakeLearner()
    replay = ReplayMemory(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                          num_shards=config.workers)
    backend = LocalBackend(FakeSamplers(config.workers), batched=True)
    backend.start(np.random.default_rng(0))
    trainer = BackgroundTrainer(*one_by_one(learner.train,
                                            lambda: replay.sample(config.batch_size)))
    try:
        FastLoop(settings, backend, learner, replay, trainer, NullMonitor(), evaluator,
                 checkpoints).run()
    finally:
        trainer.close()
    step, state, final = checkpoints.saved[-1]
    assert step == 960 and final and state["eval_pending"] is stopped_in_last_evaluation
    assert checkpoints.finished == [not stopped_in_last_evaluation]


def test_lockstep_keeps_the_console_going_while_the_last_step_trains_what_is_owed():
    """As the Nature loop does: a refill that reaches the last step leaves every owed
    minibatch to train there, and the console is ticked between them."""
    from fake_samplers import MemoryCheckpoints
    from helpers import through_checkpoint

    from fast_dqn.loops.fast_loop_state import FastLoopState

    config = dataclasses.replace(BASE, workers=4, concurrent=False)
    settings = loop_settings(config)
    learner = FakeLearner()
    replay = ReplayMemory(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                          num_shards=config.workers, seed=3)
    backend = LocalBackend(FakeSamplers(config.workers), batched=True)
    backend.start(np.random.default_rng(0))
    checkpoints = MemoryCheckpoints(30)
    step = FastLoop(settings, backend, learner, replay, None, NullMonitor(),
                    checkpoints=checkpoints).run()
    state = FastLoopState.from_state_dict(through_checkpoint(checkpoints.saved[-1][1]),
                                          settings)
    state.schedule.refill(step, prepopulate=960 - step, owed=10)  # refilling to the end
    monitor = TickRecorder()
    FastLoop(settings, backend, learner, replay, None, monitor,
             checkpoints=MemoryCheckpoints()).run(state)
    at_the_end = sorted({trained for at, trained in monitor.ticks if at == 960})
    assert monitor.losses > 10 and at_the_end == list(range(1, monitor.losses + 1))


def test_the_console_goes_on_while_a_sync_point_waits_and_hears_of_each_period_end():
    """The samplers play a period in a burst, then wait for the trainer: the console ticks
    while they wait (its clock and ETA go on), and learns where each period ends, which is
    what its steps/s is measured between."""

    class SlowLearner(FakeLearner):
        def train(self, batch):
            time.sleep(0.01)
            return super().train(batch)

    class Recorder(TickRecorder):
        def __init__(self):
            super().__init__()
            self.sync_points = []

        def sync_point(self, step):
            self.sync_points.append(step)

    config = dataclasses.replace(BASE, workers=4)
    learner, monitor = SlowLearner(), Recorder()
    replay = ReplayMemory(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                          num_shards=config.workers)
    trainer = BackgroundTrainer(*one_by_one(learner.train,
                                            lambda: replay.sample(config.batch_size)),
                                on_loss=lambda r: monitor.record_train(*r))
    try:
        backend = LocalBackend(FakeSamplers(config.workers), batched=True)
        backend.start(np.random.default_rng(0))
        FastLoop(loop_settings(config), backend, learner, replay, trainer,
                 monitor).run()
    finally:
        trainer.close()
    ends, step = [], 0
    while step < config.timesteps:
        step = next_sync_point(step, config.target_update_freq, config.workers,
                               config.timesteps)
        ends.append(step)
    assert monitor.sync_points == ends
    # At a period end past warm-up, ticks of that step while minibatches still train.
    waited = {at for at, trained in monitor.ticks if at in ends[2:-1]
              and len({t for s, t in monitor.ticks if s == at}) > 1}
    assert waited, "no tick while a sync point waited for the trainer"


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_seeded_run_draws_the_same_minibatches_whatever_the_call_size(prefetch):
    """The indices come from replay's RNG in the same order with K = 1 and K = 64 (and with
    a K that cuts every period unevenly), so a seeded run trains the same minibatches."""
    drawn = {}
    for k in (1, 64, 7):
        config = dataclasses.replace(BASE, workers=4, concurrent=True, updates_per_call=k)
        calls = []

        class Recording(ReplayMemory):
            def sample_indices(self, batch_size):
                shards, idx = super().sample_indices(batch_size)
                calls.append((shards.tolist(), idx.tolist()))
                return shards, idx

        replay = Recording(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                           num_shards=config.workers)
        learner = FakeLearner()
        train_calls = TrainCalls(learner, replay, config.batch_size, on_device=False)
        trainer = BackgroundTrainer(train_calls.train, train_calls.draw, prefetch=prefetch,
                                    per_call=k)
        try:
            backend = LocalBackend(FakeSamplers(config.workers), batched=True)
            backend.start(np.random.default_rng(0))
            FastLoop(loop_settings(config), backend, learner, replay, trainer,
                     NullMonitor()).run()
        finally:
            trainer.close()
        drawn[k] = calls
        assert len(calls) == learner.trained == minibatches_due(
            0, config.timesteps, config.prepopulate, config.train_freq)
    assert drawn[1] == drawn[64] == drawn[7]


@pytest.mark.parametrize("concurrent", [True, False])
def test_main_is_copied_to_target_only_once_the_period_is_trained(concurrent):
    """Step 6 follows step 4: each copy carries every minibatch the Nature loop trains up
    to that sync point, however far the trainer trails the samplers."""

    class CopyRecorder(FakeLearner):
        def __init__(self):
            super().__init__()
            self.trained_at_copy = []

        def train(self, batch):
            time.sleep(0.002)  # a trainer that trails the samplers
            return super().train(batch)

        def update_target(self):
            super().update_target()
            self.trained_at_copy.append(self.trained)

    config = dataclasses.replace(BASE, workers=4, concurrent=concurrent)
    _, _, learner, *_ = run(config, learner=CopyRecorder())
    ends, step = [], 0
    while step < config.timesteps:
        step = next_sync_point(step, config.target_update_freq, config.workers,
                               config.timesteps)
        ends.append(step)
    assert learner.trained_at_copy == [
        minibatches_due(0, end, config.prepopulate, config.train_freq) for end in ends]
