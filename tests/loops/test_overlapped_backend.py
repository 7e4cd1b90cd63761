"""The samplers in two groups that take turns (fast_dqn.loops.overlapped_backend), under the
real fast loop with scripted games: every step lands in replay once, in each game's order;
the Nature ratios hold; no step is acted through a target network that a sync point replaces
before the step is played; the groups really overlap; a seeded run repeats itself."""

import dataclasses

import numpy as np
import pytest
from fake_samplers import FakeLearner, FakeSamplers, K, NullMonitor
from helpers import TINY_FAKE

from fast_dqn.agent.replay_memory import ReplayMemory
from fast_dqn.agent.train_calls import TrainCalls
from fast_dqn.loops.background_trainer import BackgroundTrainer
from fast_dqn.loops.fast_loop import FastLoop
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.loops.overlapped_backend import OverlappedBackend
from fast_dqn.run.components import loop_settings
from fast_dqn.run.settings.hyperparameters import FastConfig

BASE = FastConfig(**TINY_FAKE, updates_per_call=16)  # target period 96


class FakeGroup(FakeSamplers):
    """FakeSamplers stepped as the vector env is: `send` starts a step, `recv` ends it. Each
    call is logged with the target network's version at that moment."""

    def __init__(self, num_samplers, name, events, learner):
        super().__init__(num_samplers)
        self.name, self.events, self.learner = name, events, learner
        self.sent = None

    def send(self, actions):
        assert self.sent is None, "a second step sent before the first was received"
        self.events.append(("send", self.name, self.learner.target_updates))
        self.sent = np.array(actions)

    def recv(self):
        assert self.sent is not None, "received a step never sent"
        actions, self.sent = self.sent, None
        self.events.append(("recv", self.name, self.learner.target_updates))
        return self.step(actions)


def run(config, seed=0):
    learner, events = FakeLearner(), []
    half = config.workers // 2
    groups = [FakeGroup(half, g, events, learner) for g in (0, 1)]
    backend = OverlappedBackend(groups, config.target_update_freq)
    replay = ReplayMemory(config.replay_capacity, (2,), K, frame_dtype=np.int64,
                          num_shards=config.workers)
    monitor, trainer = NullMonitor(), None
    if config.concurrent:
        calls = TrainCalls(learner, replay, config.batch_size, on_device=False)
        trainer = BackgroundTrainer(calls.train, calls.draw,
                                    on_loss=lambda r: monitor.record_train(*r),
                                    per_call=config.updates_per_call)
    try:
        backend.start(np.random.default_rng(seed))
        steps = FastLoop(loop_settings(config), backend, learner, replay, trainer,
                         monitor).run()
    finally:
        if trainer:
            trainer.close()
    return steps, groups, learner, replay, monitor, events


@pytest.mark.parametrize("concurrent", [True, False])
def test_every_step_lands_in_replay_once_in_each_games_order(concurrent):
    config = dataclasses.replace(BASE, workers=4, concurrent=concurrent, timesteps=600)
    steps, groups, _, replay, _, _ = run(config)
    assert steps == 600
    for g, group in enumerate(groups):
        for j in range(2):
            shard = 2 * g + j
            n = int(replay.sizes[shard])
            assert n == steps // 4  # every step of that game, nothing else
            oldest = (replay.pointers[shard] - n) % replay.shard_capacity
            order = (oldest + np.arange(n)) % replay.shard_capacity
            assert [tuple(f) for f in replay.frames[shard, order]] == group.history[j][:n]
            assert replay.actions[shard, order].tolist() == group.actions[j]
            ends = np.flatnonzero(replay.terminals[shard, order]) + 1
            assert ends.tolist() == list(range(3 + j, n + 1, 3 + j))


@pytest.mark.parametrize("concurrent", [True, False])
@pytest.mark.parametrize("workers", [2, 6, 8])
def test_nature_ratios_hold_with_chunks_of_half_a_round(concurrent, workers):
    """Chunks of W/2 steps (3 of 6 does not divide the period of 96): the target is copied
    at the first chunk end past each multiple, and the minibatches are the Nature loop's."""
    config = dataclasses.replace(BASE, workers=workers, concurrent=concurrent,
                                 updates_per_call=5)
    steps, _, learner, _, monitor, _ = run(config)
    half = workers // 2
    assert steps == -(-config.timesteps // half) * half
    assert learner.trained == minibatches_due(0, steps, config.prepopulate, config.train_freq)
    assert monitor.losses == learner.trained
    sync_ends = [e for e in range(half, steps + 1, half)
                 if e // 96 > (e - half) // 96 or e == steps]
    assert learner.target_updates == len(sync_ends)


@pytest.mark.parametrize("concurrent", [True, False])
@pytest.mark.parametrize("workers", [4, 6, 64])
def test_every_step_is_acted_through_the_target_of_its_own_period(concurrent, workers):
    """A step sent before a sync point and played after it would act through the target
    that the sync point replaces: none is. The chunk at agent step b must be acted with
    the target as copied at the last sync point before b, the (b // period)-th copy."""
    config = dataclasses.replace(BASE, workers=workers, concurrent=concurrent)
    steps, groups, _, _, _, events = run(config)
    half = workers // 2
    sends = [(name, version) for kind, name, version in events if kind == "send"]
    # Sends go out in the order of their chunks' steps: chunk c starts at c * half.
    played = [(name, version) for name, version in sends][:steps // half]
    assert len(played) == steps // half
    for c, (name, version) in enumerate(played):
        base = c * half
        assert name == c % 2, "the groups do not take turns"
        assert version == base // config.target_update_freq, (
            f"the chunk at step {base} was acted with target {version}")


def test_one_group_steps_while_the_other_is_acted_for():
    """Away from sync points, each group's step is sent while the other group's is still in
    flight: the emulators never wait for the main thread."""
    config = dataclasses.replace(BASE, workers=8, concurrent=True, timesteps=960)
    *_, events = run(config)
    in_flight, overlapped, sends = {0: False, 1: False}, 0, 0
    for kind, name, _ in events:
        if kind == "send":
            sends += 1
            overlapped += in_flight[1 - name]
        in_flight[name] = kind == "send"
    periods = 960 // 96
    # Per period, at most the two sends held back for its sync point start alone.
    assert overlapped >= sends - 2 * periods - 2
    assert overlapped > 0.8 * sends


def test_a_seeded_run_repeats_itself_and_another_seed_acts_otherwise():
    config = dataclasses.replace(BASE, workers=4, concurrent=True, eps_end=0.5)
    a, b, c = (run(config, seed)[3] for seed in (0, 0, 1))
    assert np.array_equal(a.frames, b.frames) and np.array_equal(a.actions, b.actions)
    assert not np.array_equal(a.actions, c.actions)


def test_groups_of_different_sizes_are_refused():
    with pytest.raises(ValueError, match="two groups of the same size"):
        OverlappedBackend([FakeSamplers(2), FakeSamplers(3)], 96)


def test_two_groups_are_built_where_asked_and_refused_where_they_cannot_play():
    from fast_dqn.errors import ConfigError
    from fast_dqn.run.components import build_local_backend
    from fast_dqn.run.settings.validation import chunk_size, resolve
    config = lambda **flags: resolve(FastConfig(**{"game": "pong", **flags}))  # noqa: E731
    assert config().sampler_groups == 1  # the default on a CPU: the paper's one call a round
    backend = build_local_backend(config(workers=4, sampler_groups=2))
    try:
        assert isinstance(backend, OverlappedBackend)
        assert backend.round_size == 2 and backend.num_shards == 4
        # A resume judges a run finished by the budget rounded up to these chunks.
        assert chunk_size(config(workers=4, sampler_groups=2)) == 2
        assert chunk_size(config(workers=4)) == 4
        assert [g.num_samplers for g in backend.groups] == [2, 2]
        # Game i is seeded seed + i, as with one group.
        assert [g.seed for g in backend.groups] == [0, 2]
    finally:
        backend.close()
    for flags in ({"workers": 7}, {"synchronize": False}, {"env_backend": "python"}):
        with pytest.raises(ConfigError, match="2 takes an even --workers"):
            config(sampler_groups=2, **flags)
    with pytest.raises(ConfigError, match="2 takes an even --workers.*--workers 7"):
        config(workers=7, sampler_groups=2)
    for wrong in (-1, 3):
        with pytest.raises(ConfigError):
            config(sampler_groups=wrong)


@pytest.mark.slow  # the real Pong ROM in ale-py's vector env
def test_two_groups_of_real_games_repeat_themselves_chunk_for_chunk():
    """On the real ROM, two groups driven by the same seed and the same network play the
    same chunks, and the groups' games are those of one group's: game i seeded seed + i."""
    from fast_dqn.run.components import build_local_backend
    from fast_dqn.run.settings.validation import resolve
    config = resolve(FastConfig(game="pong", workers=4, sampler_groups=2, seed=3,
                                env_threads=1, target_update_freq=100))
    epsilon = lambda steps: np.full(len(steps), 0.5)  # noqa: E731

    def network(states):  # depends on the states, so a wrong frame changes the actions
        return np.stack([states.reshape(len(states), -1)[:, j::6].sum(1) % 7
                         for j in range(6)], axis=1).astype(np.float32)

    def play():
        backend = build_local_backend(config)
        try:
            backend.start(np.random.default_rng(0))
            backend.act_through(network, None)
            step, chunks = 0, []
            while step < 600:
                chunk = backend.next_chunk(step, epsilon)
                chunks.append((chunk.frames.copy(), chunk.actions, chunk.rewards,
                               chunk.episode_ends, tuple(chunk.shards)))
                step += chunk.steps
                if step % 100 == 0:
                    backend.target_updated()  # a sync point every 100 steps
            return chunks
        finally:
            backend.close()

    a, b = play(), play()
    assert len(a) == 300 and [c[4] for c in a[:2]] == [(0, 1), (2, 3)]
    # The first states: game i of the two groups is game i of one group of 4.
    one, two = (build_local_backend(config.replace(sampler_groups=g)) for g in (1, 2))
    try:
        one.start(np.random.default_rng(0))
        two.start(np.random.default_rng(0))
        assert np.array_equal(one.obs, np.concatenate(two.obs))
    finally:
        one.close()
        two.close()
    for x, y in zip(a, b):
        assert all(np.array_equal(p, q) for p, q in zip(x, y))
    assert any(c[0].any() for c in a)  # real frames were played
