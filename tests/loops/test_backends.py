"""The backend contract of fast_dqn.loops.experience, run against both backends, and the Ray
backend's fault tolerance. CartPole keeps the games short and the networks small; the Ray
cluster is private, on loopback, and shared by this module's tests."""

import os
import signal
import time

import numpy as np
import pytest
from ray_tools import RAY_SETTINGS, ray_processes, wait_until_gone

from fast_dqn.loops.experience import LocalBackend
from fast_dqn.loops.fast_loop import FastLoop
from fast_dqn.loops.fast_loop_state import HeldTransitions
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.run import components
from fast_dqn.run.settings import precedence
from fast_dqn.run.settings.hyperparameters import FastConfig
from fast_dqn.run.settings.validation import resolve

# Dueling: every backend's acting copy of the target network must be built the way the
# learner builds it, or the weights it is sent do not fit.
CONFIG = resolve(precedence.build_config({"env": "CartPole-v1", "workers": 4, "num_samplers": 2,
                                   "envs_per_sampler": 2, "rollout_steps": 8, "seed": 3,
                                   "dueling": True}, FastConfig))


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    from fast_dqn.loops.ray_cluster import start_private_cluster
    before = ray_processes()
    with pytest.MonkeyPatch.context() as patch:  # undoes the cluster's own token too
        for name in RAY_SETTINGS:
            patch.delenv(name, raising=False)
        start_private_cluster(num_cpus=2, object_store_mb=256)
        yield ray
        ray.shutdown()
    assert not wait_until_gone(before), "ray.shutdown() left processes behind"


def make_backend(kind, request, config=CONFIG, log=None):
    if kind == "threads":
        return LocalBackend(components.build_samplers(config))
    request.getfixturevalue("ray_cluster")
    from fast_dqn.loops.ray_backend import RayBackend
    ray_config = config.replace(backend="ray")
    return RayBackend(components.ray_settings(ray_config),
                      *components.ray_sampler_builders(ray_config), log=log or (lambda line: None))


def favour(learner, action):
    """Make the target network prefer `action` in every state (through the advantage stream
    when the head is dueling: its last weights are the advantages')."""
    weights = learner.target.get_weights()
    weights[-2][:] = 0
    weights[-1][:] = np.eye(len(weights[-1]))[action]
    learner.target.set_weights(weights)


def collect(backend, steps_per_game, epsilon):
    """Chunks until every game has made `steps_per_game` steps (Ray actors start unevenly)."""
    chunks, total, made = [], 0, np.zeros(backend.num_shards, int)
    while made.min() < steps_per_game:
        chunk = backend.next_chunk(total, lambda s: np.full(np.shape(s), epsilon))
        if chunk is not None:
            chunks.append(chunk)
            total += chunk.steps
            made[chunk.shards] += len(chunk.actions)
    return chunks


def streams(chunks):
    """Each shard's steps in order: {shard: {field: array}}."""
    out = {}
    for chunk in chunks:
        for column, shard in enumerate(chunk.shards):
            parts = out.setdefault(int(shard), [])
            parts.append({f: getattr(chunk, f)[:, column]
                          for f in ("frames", "actions", "episode_ends", "game_over",
                                    "game_lengths", "game_returns", "epsilons")})
    return {shard: {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}
            for shard, parts in out.items()}


@pytest.mark.parametrize("kind", ["threads", pytest.param("ray", marks=[pytest.mark.slow,
                                                                        pytest.mark.ray])])
def test_backend_contract(kind, request):
    backend = make_backend(kind, request)
    try:
        assert backend.num_actions == 2 and backend.observation_space.shape == (1, 4)
        assert backend.num_shards == 4
        learner = components.build_learner(CONFIG, backend.observation_space.shape, 2)
        backend.start(np.random.default_rng(0))
        backend.act_through(learner.target_q_values, learner.target_weights)

        chunks = collect(backend, 200, epsilon=1.0)
        for chunk in chunks:
            assert chunk.steps == backend.round_size and not chunk.new_stream
            assert chunk.frames.shape == (*chunk.actions.shape, 4)  # single frames, no stack
            assert chunk.frames.dtype == backend.observation_space.dtype
        by_shard = streams(chunks)
        assert sorted(by_shard) == [0, 1, 2, 3]
        for s in by_shard.values():
            assert np.all(s["epsilons"] == 1.0)
            # Each shard's steps arrive contiguous and in order: every game's logged length
            # is the distance between consecutive game ends, and CartPole's return is its
            # length. A lost, repeated or reordered chunk would break this.
            ends = np.flatnonzero(s["game_over"])
            assert len(ends) >= 3
            assert np.array_equal(s["game_lengths"][ends], np.diff(ends, prepend=-1))
            assert np.array_equal(s["game_returns"][ends], s["game_lengths"][ends])
            assert np.array_equal(s["episode_ends"], s["game_over"])

        # Greedy acting follows the target network; after target_updated() the new weights
        # reach every game (in flight requests may still finish with the old ones).
        favour(learner, 1)
        backend.target_updated()
        first = streams(collect(backend, 80, epsilon=0.0))
        favour(learner, 0)
        backend.target_updated()
        second = streams(collect(backend, 80, epsilon=0.0))
        for shard in range(4):
            if kind == "threads":
                assert set(first[shard]["actions"]) == {1}
            else:  # requests sent before the first update acted at random
                assert first[shard]["actions"][-8:].tolist() == [1] * 8
            actions = second[shard]["actions"].tolist()
            switch = actions.index(0)
            assert set(actions[:switch]) <= {1} and set(actions[switch:]) == {0}
            assert switch <= CONFIG.requests_in_flight * CONFIG.rollout_steps
        assert backend.load_state_dict(backend.state_dict(), 100) is (kind == "threads")
    finally:
        backend.close()


def test_held_transitions_cut_a_restarted_stream():
    from fast_dqn.agent.replay_memory import ReplayMemory
    from fast_dqn.loops.experience import Chunk

    def chunk(t0, shards, new_stream=False):
        n = len(shards)
        frames = np.array([[[t0 + t, s] for s in shards] for t in range(2)])
        zeros = np.zeros((2, n))
        return Chunk(frames, zeros.astype(int), zeros, zeros.astype(bool), zeros.astype(bool),
                     zeros.astype(bool), zeros, zeros.astype(int), zeros,
                     np.array(shards), new_stream)

    replay = ReplayMemory(40, (2,), 1, frame_dtype=np.int64, num_shards=4)
    held = HeldTransitions()
    held.append(chunk(0, [0, 1]))
    held.append(chunk(0, [2, 3]))
    held.flush(replay)
    held.append(chunk(2, [0, 1]))
    held.append(chunk(2, [2, 3], new_stream=True))   # shards 2, 3: already in replay
    held.append(chunk(4, [0, 1]))
    held.append(chunk(6, [0, 1], new_stream=True))   # shards 0, 1: the cut is still held
    held.flush(replay)
    assert replay.sizes.tolist() == [8, 8, 4, 4]
    for shard in (0, 1):
        assert replay.frames[shard, :8, 0].tolist() == list(range(8))
        assert np.flatnonzero(replay.episode_ends[shard, :8]).tolist() == [5]
    for shard in (2, 3):
        assert np.flatnonzero(replay.episode_ends[shard, :4]).tolist() == [1]
    assert not replay.terminals.any()  # cuts, never terminal: their successors are lost


class KillingMonitor:
    """Kills sampler actor 0's process once the run passes `at` steps, then holds the run
    until the replacement has delivered, so that it does within the tiny budget. A new actor
    starts TensorFlow, which on a loaded machine takes longer than the other actor needs to
    play the rest of the budget: each tick waits for the replacement's first batch (up to
    a deadline, past which the test fails on its missing cut)."""

    def __init__(self, backend, at):
        self.backend, self.at, self.killed_pid = backend, at, None
        self.games, self.losses = [], 0

    def tick(self, step, epsilon):
        import ray
        if self.killed_pid is None and step >= self.at:
            self.killed_pid = ray.get(self.backend.actors[0].spec.remote())["pid"]
            os.kill(self.killed_pid, signal.SIGKILL)
            self.deadline = time.monotonic() + 240
        elif self.killed_pid and (self.backend.incarnations[0] == 0 or 0 in self.backend.fresh):
            requests = list(self.backend.pending[0])
            left = self.deadline - time.monotonic()
            if self.backend.incarnations[0] and requests and left > 0:
                ray.wait(requests[:1], timeout=left)
            else:
                time.sleep(0.2)

    def record_game(self, step, length, game_return, epsilon):
        self.games.append(step)

    def record_train(self, loss, mean_q=None):
        self.losses += 1

    def follow(self, schedule):
        pass

    def sync_point(self, step):
        pass

    def message(self, line):
        pass


@pytest.mark.slow
@pytest.mark.faults
@pytest.mark.ray
def test_a_killed_actor_is_replaced_and_nothing_is_counted_twice(request, monkeypatch):
    from fast_dqn.agent.train_calls import TrainCalls
    from fast_dqn.loops.background_trainer import BackgroundTrainer
    config = CONFIG.replace(timesteps=2400, prepopulate=200, target_update_freq=96,
                                 replay_capacity=20_000, batch_size=16, evaluate=0)
    messages = []
    backend = make_backend("ray", request, config, log=messages.append)
    learner = components.build_learner(config, backend.observation_space.shape, 2)
    replay = components.build_replay(config, (4,), backend.num_shards, np.float32)
    monitor = KillingMonitor(backend, at=800)
    calls = TrainCalls(learner, replay, config.batch_size, on_device=False)
    trainer = BackgroundTrainer(calls.train, calls.draw, per_call=config.updates_per_call,
                                on_loss=lambda result: monitor.record_train(*result))
    cut_shards, cut = [], HeldTransitions._cut

    def recording_cut(self, shards):  # the games the loop ends at a restart, once ended
        cut(self, shards)
        ended = set(self.cut_in_replay)  # still to end in replay at the flush
        for *_, ends, held_shards in self.chunks:  # or ended in the last held step
            ended |= {int(shard) for shard in held_shards[ends[-1]]}
        cut_shards.append(sorted(int(shard) for shard in shards if shard in ended))

    monkeypatch.setattr(HeldTransitions, "_cut", recording_cut)
    backend.start(np.random.default_rng(0))
    try:
        steps = FastLoop(components.loop_settings(config), backend, learner, replay, trainer,
                         monitor).run()
        import ray
        new_pid = ray.get(backend.actors[0].spec.remote())["pid"]
    finally:
        trainer.close()
        backend.close()
    assert steps == 2400
    assert any(m.startswith("sampler actor 0 was lost") for m in messages), messages
    assert backend.incarnations == [1, 0] and new_pid != monitor.killed_pid
    # Every counted step is in replay exactly once: the lost requests never arrived.
    assert len(replay) == steps == backend.delivered * backend.round_size
    assert replay.sizes[0] == replay.sizes[1] and replay.sizes[2] == replay.sizes[3]
    # Actor 0's old and new games are split by a cut (an end that is not terminal) in each of
    # its two shards, unless that shard's old game had just ended at its last step anyway
    # (then the end is terminal; CartPole's games are short). Actor 1's games were
    # never cut.
    assert cut_shards == [[0, 1]]  # actor 0's two games, once, and no other
    cuts = replay.episode_ends & ~replay.terminals
    assert cuts[0].sum() <= 1 and cuts[1].sum() <= 1 and cuts[:2].sum() >= 1
    assert not cuts[2:].any()
    assert monitor.losses == minibatches_due(0, steps, config.prepopulate, config.train_freq)


def test_ray_ships_the_whole_package_to_joined_machines():
    """A joined machine imports fast_dqn.run.components and fast_dqn.envs from what the driver
    ships: the package root, not the folder of the module that ships it."""
    pytest.importorskip("ray")
    from fast_dqn.loops.ray_cluster import package_dir
    assert os.path.basename(package_dir()) == "fast_dqn"
    assert {"envs", "agent", "loops", "run"} <= set(os.listdir(package_dir()))
