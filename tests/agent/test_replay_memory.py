import numpy as np
import pytest
from fake_ale import FakeAtariEnv

from fast_dqn.agent.batch import Batch
from fast_dqn.agent.replay_memory import ReplayMemory, check_fits_in_memory, estimate_bytes
from fast_dqn.envs.environment import wrap_atari
from fast_dqn.errors import ConfigError
from fast_dqn.run.components import env_settings
from fast_dqn.run.settings.hyperparameters import Config

K = 4


def fill(replay, episode_lengths, truncate_last=False):
    """Add episodes whose frames are 1, 2, 3, ... (0 is reserved for padding).

    Returns the logical record list [(frame, terminal, episode_end)] in write order.
    """
    records, t = [], 0
    for n, length in enumerate(episode_lengths):
        for i in range(length):
            t += 1
            last = i == length - 1
            truncated = last and truncate_last and n == len(episode_lengths) - 1
            terminal = last and not truncated
            replay.add(np.array([t]), action=t % 3, reward=float(t), terminal=terminal,
                       episode_end=last)
            records.append((t, terminal, last))
    return records


def reference_stack(records, p):
    """The state at logical record p, rebuilt by the obvious slow rule."""
    out = []
    for j in range(p - K + 1, p + 1):
        crosses = any(records[m][2] for m in range(j, p))
        out.append(0 if crosses else records[j][0])
    return out


def check_all_valid(replay, records):
    """Every valid transition in the buffer gathers to exactly the reference stacks."""
    live = records[-replay.sizes[0]:]
    oldest = (replay.pointers[0] - replay.sizes[0]) % replay.capacity
    for p in range(K - 1, len(live) - 1):
        if live[p][2] and not live[p][1]:
            continue  # time-limit cut: never sampled
        idx = np.array([(oldest + p) % replay.capacity])
        states, actions, rewards, next_states, dones, _ = replay.gather(None, idx)
        assert list(states[0, :, 0]) == reference_stack(live, p)
        assert rewards[0] == live[p][0] and actions[0] == live[p][0] % 3
        assert dones[0] == float(live[p][1])
        expected_next = [0] * K if live[p][1] else reference_stack(live, p + 1)
        assert list(next_states[0, :, 0]) == expected_next


def test_stacks_at_episode_boundaries_are_zero_padded():
    replay = ReplayMemory(100, (1,), K)
    records = fill(replay, [5, 1, 2, 6, 3])
    check_all_valid(replay, records)
    # Spot-check by hand: the 2nd frame of the 4th episode (frames 9..14) is frame 10.
    states, *_ = replay.gather(None, np.array([9]))
    assert list(states[0, :, 0]) == [0, 0, 9, 10]


def test_stacks_are_exact_after_wrap_around():
    replay = ReplayMemory(13, (1,), K)
    records = fill(replay, [4, 7, 2, 9, 5, 3])  # 30 records into 13 slots
    assert replay.sizes[0] == 13 and replay.pointers[0] == 30 % 13
    check_all_valid(replay, records)


@pytest.mark.parametrize("capacity,total", [(10, 7), (10, 10), (10, 23), (17, 100)])
def test_no_sample_spans_the_write_pointer(capacity, total):
    replay = ReplayMemory(capacity, (1,), K, seed=1)
    fill(replay, [total])
    oldest = (replay.pointers[0] - replay.sizes[0]) % capacity
    _, idx = replay.sample_indices(5000)
    logical = (idx - oldest) % capacity
    # The state needs K-1 older records; the next state needs one newer record.
    assert logical.min() >= K - 1 and logical.max() <= replay.sizes[0] - 2
    assert len(np.unique(logical)) == replay.sizes[0] - K  # and all of them are reachable


def test_time_limit_cuts_are_never_sampled():
    replay = ReplayMemory(50, (1,), K, seed=3)
    fill(replay, [6, 6], truncate_last=True)
    replay.add(np.array([99]), 0, 0.0, False, False)  # so the cut record has a successor
    cut_index = 11
    assert replay.episode_ends[0, cut_index] and not replay.terminals[0, cut_index]
    assert cut_index not in set(replay.sample_indices(5000)[1].tolist())


def test_sampling_needs_a_complete_transition():
    replay = ReplayMemory(10, (1,), K)
    fill(replay, [K])
    assert not replay.can_sample()
    with pytest.raises(ValueError):
        replay.sample(1)
    replay.add(np.array([9]), 0, 0.0, False, False)
    assert replay.can_sample()


def test_add_batch_matches_add():
    a, b = ReplayMemory(7, (2,), K), ReplayMemory(7, (2,), K)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (11, 2), dtype=np.uint8)
    ends = rng.random(11) < 0.3
    for i in range(11):
        a.add(frames[i], i, float(i), ends[i], ends[i])
    b.add_batch(frames[:5], np.arange(5), np.arange(5.0), ends[:5], ends[:5])
    b.add_batch(frames[5:], np.arange(5, 11), np.arange(5.0, 11), ends[5:], ends[5:])
    for name in ("frames", "actions", "rewards", "terminals", "episode_ends"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert (a.pointers[0], a.sizes[0]) == (b.pointers[0], b.sizes[0])
    c = ReplayMemory(7, (2,), K)
    c.add_batch(frames, np.arange(11), np.arange(11.0), ends, ends)  # longer than the ring
    assert np.array_equal(a.frames, c.frames)
    assert (a.pointers[0], a.sizes[0]) == (c.pointers[0], c.sizes[0])


def test_replay_rebuilds_exactly_the_states_the_env_showed():
    fake = FakeAtariEnv(lives=3, life_loss_frames=(30, 60), game_over_frame=90)
    env = wrap_atari(fake, env_settings(Config(noop_max=0)), training=True)
    replay = ReplayMemory(40, (84, 84), K)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    seen = []  # (state, next_state, terminal) in write order
    for _ in range(60):
        action = int(rng.integers(0, 4))
        next_obs, reward, terminated, truncated, _ = env.step(action)
        replay.add(obs[-1], action, reward, terminated, terminated or truncated)
        seen.append((obs, next_obs, terminated))
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()
    live = seen[-replay.sizes[0]:]
    oldest = (replay.pointers[0] - replay.sizes[0]) % replay.capacity
    for p in range(K - 1, len(live) - 1):
        states, _, _, next_states, dones, _ = replay.gather(None, np.array([(oldest + p) % 40]))
        assert np.array_equal(states[0], live[p][0])
        if not live[p][2]:
            assert np.array_equal(next_states[0], live[p][1])
        assert dones[0] == float(live[p][2])


def test_memory_estimate_and_refusal():
    one_million = estimate_bytes(1_000_000, (84, 84))
    assert 7.06e9 < one_million < 7.08e9
    with pytest.raises(ConfigError) as error:
        check_fits_in_memory(1_000_000, (84, 84), available=4 * 2**30)
    assert error.value.setting == "replay_capacity" and "GiB" in str(error.value)
    # The library names the setting; the command line names the flag, in the fix too.
    assert "available; lower replay_capacity (a resumed run keeps its own: free memory, " \
        "or resume it on a machine with more)" in str(error.value)
    from fast_dqn.run.settings.flags import flag_name
    worded = error.value.worded(flag_name)
    assert worded.startswith("--replay-capacity: a replay of 1,000,000 steps needs ")
    assert "available; lower --replay-capacity (a resumed run" in worded
    assert check_fits_in_memory(1_000, (84, 84), available=4 * 2**30) == estimate_bytes(
        1_000, (84, 84))


def test_a_replay_beyond_ulimit_v_is_refused_though_it_fits_in_ram():
    """`ulimit -v` bounds the address space, which RAM's free bytes do not show: a replay
    that fit in RAM was a numpy MemoryError once the run directory existed."""
    fits = dict(available=64 * 2**30)
    assert check_fits_in_memory(100_000, (84, 84), **fits, address_space=2**50)
    with pytest.raises(ConfigError) as error:
        check_fits_in_memory(100_000, (84, 84), **fits, address_space=int(1.5 * 2**30))
    assert "`ulimit -v` leaves this process 1.50 GiB of address space; raise that limit " \
        "(ulimit -v unlimited) or lower replay_capacity" in str(error.value)
    # 0.71 GiB of replay beside the 1 GiB kept for the rest of the run.
    assert check_fits_in_memory(100_000, (84, 84), **fits, address_space=int(2 * 2**30))


def test_capacity_too_small_for_one_transition_is_refused():
    with pytest.raises(ConfigError):
        ReplayMemory(K + 1, (1,), K)


def test_a_replay_of_only_time_limit_cuts_fails_instead_of_spinning():
    replay = ReplayMemory(20, (1,), K)
    for t in range(K + 1):
        cut = t == K - 1
        replay.add(np.array([t + 1]), 0, 0.0, False, cut)
    with pytest.raises(RuntimeError):
        replay.sample(4)


def test_shards_keep_each_samplers_trajectory_contiguous_and_sample_uniformly():
    replay = ReplayMemory(3 * 30, (1,), K, seed=0, num_shards=3)
    records = []
    for shard in range(3):
        # Shard s gets frames 100*s + 1, 100*s + 2, ... with its own episode boundaries.
        recs = []
        for t in range(1, 21 + 5 * shard):
            end = t % (6 + shard) == 0
            replay.add(np.array([100 * shard + t]), t % 3, float(t), end, end, shard=shard)
            recs.append((100 * shard + t, end, end))
        records.append(recs)
    for shard in range(3):
        live = records[shard]
        for p in range(K - 1, len(live) - 1):
            states, *_ = replay.gather(np.array([shard]), np.array([p]))
            assert list(states[0, :, 0]) == reference_stack(live, p)
    shards, idx = replay.sample_indices(60_000)
    counts = np.bincount(shards, minlength=3)
    expected = np.array([len(r) - K for r in records])  # valid transitions per shard
    np.testing.assert_allclose(counts / counts.sum(), expected / expected.sum(), atol=0.01)


@pytest.mark.parametrize("env_backend", ["python", "vector"])
def test_replay_returns_what_the_agent_saw_on_a_real_rom(env_backend):
    """Breakout through the fast loop's own path (samplers, LocalBackend, held transitions
    flushed at sync points): every stored transition gives back the stack the agent acted on,
    its action, reward and terminal, and the next stack it saw, across ring wrap-arounds, lost
    lives and time-limit cuts."""
    from fast_dqn.loops.experience import LocalBackend
    from fast_dqn.loops.fast_loop_state import HeldTransitions
    from fast_dqn.run.components import build_samplers
    from fast_dqn.run.settings.hyperparameters import FastConfig

    config = FastConfig(game="breakout", max_episode_steps=120, env_backend=env_backend,
                        env_threads=1)
    workers, rounds, per_shard = 2, 400, 150
    q_rng = np.random.default_rng(1)
    seen = []  # the states each round's actions were chosen on, (W, k, 84, 84)

    def q_values(states):
        seen.append(states.copy())
        return q_rng.normal(size=(len(states), 4)).astype(np.float32)

    backend = LocalBackend(build_samplers(config, count=workers, seed=3))
    backend.start(np.random.default_rng(0))
    backend.act_through(q_values, None)
    replay = ReplayMemory(per_shard * workers, (84, 84), K, num_shards=workers)
    held, chunks = HeldTransitions(), []
    try:
        for r in range(rounds):
            chunk = backend.next_chunk(r * workers, lambda steps: np.zeros(len(steps)))
            held.append(chunk)
            chunks.append(chunk)
            if r % 50 == 49:  # a sync point
                held.flush(replay)
    finally:
        backend.close()
    assert len(seen) == rounds  # epsilon 0: every round is one batched call
    checked = {"terminal": 0, "cut": 0, "plain": 0}
    for shard in range(workers):
        oldest_round = rounds - int(replay.sizes[shard])
        for r in range(oldest_round + K - 1, rounds - 1):
            position = (int(replay.pointers[shard]) - (rounds - r)) % per_shard
            states, actions, rewards, next_states, dones, _ = replay.gather(
                np.array([shard]), np.array([position]))
            c = chunks[r]
            np.testing.assert_array_equal(states[0], seen[r][shard])
            assert actions[0] == c.actions[0, shard] and rewards[0] == c.rewards[0, shard]
            assert dones[0] == c.terminated[0, shard]
            if c.terminated[0, shard]:
                assert not next_states[0].any()
                checked["terminal"] += 1
            elif c.episode_ends[0, shard]:
                checked["cut"] += 1  # never sampled: its successor was not stored
            else:
                np.testing.assert_array_equal(next_states[0], seen[r + 1][shard])
                checked["plain"] += 1
    assert replay.sizes.tolist() == [per_shard] * workers  # wrapped around
    assert checked["terminal"] >= 2 and checked["cut"] >= 1 and checked["plain"] > 200


# --- n-step returns (issue: Pong in 90 minutes)

def test_n_step_returns_by_hand_at_a_terminal_and_at_a_cut():
    """gamma 0.5, history 2, n 3; reward t at step t; a terminal at 6, a time-limit cut at 9."""
    replay = ReplayMemory(20, (1,), 2, frame_dtype=np.int64, n_step=3, discount=0.5)
    for t in range(12):
        replay.add([t], t % 3, float(t), terminal=t == 6, episode_end=t in (6, 9))
    idx = np.arange(1, 9)
    states, actions, returns, next_states, dones, discounts = replay.gather_n_step(
        np.zeros_like(idx), idx)
    np.testing.assert_allclose(returns, [
        1 + 0.5 * 2 + 0.25 * 3,   # 1: three full steps
        2 + 0.5 * 3 + 0.25 * 4,
        3 + 0.5 * 4 + 0.25 * 5,
        4 + 0.5 * 5 + 0.25 * 6,   # 4: ends with the terminal's reward
        5 + 0.5 * 6,              # 5: the terminal is the second step
        6,                        # 6: the terminal itself
        7 + 0.5 * 8,              # 7: stops before the cut at 9, whose successor is unknown
        8])                       # 8: the cut is the next step
    np.testing.assert_array_equal(dones, [0, 0, 0, 1, 1, 1, 0, 0])
    np.testing.assert_array_equal(discounts, [0.125, 0.125, 0.125, 0.125, 0.25, 0.5, 0.25, 0.5])
    # s_{t+m}: 3 steps on, zeros after a terminal, and the cut's own state (8, 9) at a cut.
    np.testing.assert_array_equal(next_states[:, :, 0],
                                  [[3, 4], [4, 5], [5, 6], [0, 0], [0, 0], [0, 0], [8, 9], [8, 9]])
    np.testing.assert_array_equal(states[:, :, 0],
                                  [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [0, 7], [7, 8]])
    np.testing.assert_array_equal(actions, idx % 3)


def n_step_reference(records, p, n, gamma):
    """(return, next stack, done, discount) of the n-step transition at logical record p,
    by the obvious slow rule: stop after a terminal's reward, or before a cut's."""
    total, m, done = 0.0, n, False
    for j in range(n):
        frame, terminal, end = records[p + j]
        if end and not terminal:
            m = j
            break
        total += gamma ** j * frame  # the reward at step t is t
        if terminal:
            m, done = j + 1, True
            break
    next_stack = [0] * K if done else reference_stack(records, p + m)
    return total, next_stack, done, gamma ** m


def random_episodes(replay, rng, steps, shard=0, first=1):
    """Episodes of 1-12 steps, some ending in a terminal, some in a cut; frame = reward = t."""
    records, t = [], first
    while len(records) < steps:
        length, cut = int(rng.integers(1, 13)), rng.random() < 0.3
        for i in range(length):
            last = i == length - 1
            replay.add(np.array([t]), t % 3, float(t), terminal=last and not cut,
                       episode_end=last, shard=shard)
            records.append((t, last and not cut, last))
            t += 1
    return records


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("capacity", [37, 64])
def test_n_step_transitions_equal_the_reference_after_many_wrap_arounds(n, capacity):
    """Two shards, each wrapped several times: every sampleable transition of each shard has
    the reference's return, next stack, done and discount; none reaches into the other shard
    or past its own write pointer; and at n = 1 the n-step path is the one-step one."""
    gamma = 0.9
    replay = ReplayMemory(2 * capacity, (1,), K, frame_dtype=np.int64, n_step=n, discount=gamma,
                          num_shards=2)
    rng = np.random.default_rng(capacity + n)
    logs = [random_episodes(replay, rng, 5 * capacity + 3, shard=0, first=1),
            random_episodes(replay, rng, 4 * capacity + 11, shard=1, first=100_000)]
    checked = 0
    for shard, records in enumerate(logs):
        live = records[-replay.sizes[shard]:]
        oldest = (replay.pointers[shard] - replay.sizes[shard]) % capacity
        for p in range(K - 1, len(live) - n):
            if live[p][2] and not live[p][1]:
                continue  # a cut is never a sample's first step
            shards, idx = np.array([shard]), np.array([(oldest + p) % capacity])
            states, actions, returns, next_states, dones, discounts = replay.gather_n_step(
                shards, idx)
            ret, next_stack, done, discount = n_step_reference(live, p, n, gamma)
            assert list(states[0, :, 0]) == reference_stack(live, p)
            assert returns[0] == pytest.approx(ret, rel=1e-6)
            assert list(next_states[0, :, 0]) == next_stack
            assert dones[0] == float(done) and discounts[0] == pytest.approx(discount)
            if n == 1:
                one = replay.gather(shards, idx)
                for a, b in zip(one, (states, actions, returns, next_states, dones,
                                      discounts)):
                    np.testing.assert_array_equal(a, b)
            checked += 1
    assert checked > capacity  # most of both shards
    # Sampling draws only from those positions: at least n records ahead of each.
    candidates = replay._candidates()
    np.testing.assert_array_equal(candidates, replay.sizes - K - (n - 1))
    for _ in range(20):
        shards, idx = replay.sample_indices(64)
        ahead = (replay.pointers[shards] - 1 - idx) % capacity
        assert (ahead >= n).all()


@pytest.mark.parametrize("n", [1, 3])
def test_every_batch_carries_each_transitions_discount_a_power_of_gamma(n):
    replay = ReplayMemory(200, (1,), K, frame_dtype=np.int64, n_step=n, discount=0.99)
    random_episodes(replay, np.random.default_rng(0), 150)
    batch = replay.sample(16)
    assert isinstance(batch, Batch) and batch.discounts.dtype == np.float32
    powers = np.float32(0.99) ** np.arange(1, n + 1, dtype=np.float32)
    assert np.isclose(batch.discounts[:, None], powers, rtol=1e-6).any(axis=1).all()
    if n == 1:
        assert (batch.discounts == np.float32(0.99)).all()


# --- replay's own word on a checkpoint's state (fast_dqn.run.training orders the calls)

@pytest.mark.parametrize("edit, expected", [
    (lambda s: s.update(pointers=np.array([0, 13])), "/replay/pointers is not an array of "
     "shape (2,) of whole numbers from 0 to 11 (one per replay shard)"),
    # The next record of a full shard of 12 is one of 0..11: 12 would write past its end.
    (lambda s: s.update(pointers=np.array([3, 12]), sizes=np.array([3, 12])),
     "/replay/pointers is not an array of shape (2,) of whole numbers from 0 to 11"),
    # A shard not yet full was written from 0: its next record is its size.
    (lambda s: s.update(pointers=np.array([3, 5])), "/replay/pointers/1 is 5, but shard 1 "
     "holds 2 of its 12 records (/replay/sizes/1), so its next record is 2"),
    (lambda s: s.update(sizes=np.array([3, 1])), "/replay/pointers/1 is 2, but shard 1 holds "
     "1 of its 12 records"),
    (lambda s: s.update(sizes=np.array([3])), "/replay/sizes is not an array of shape (2,)"),
    (lambda s: s.update(sizes=np.array([3.0, 1.0])), "/replay/sizes is not an array"),
    (lambda s: s.update(pointers=np.array([-1, 0])), "/replay/pointers is not an array"),
    (lambda s: s.update(pointers=[0, 1]), "/replay/pointers is [0, 1], not an array"),
    (lambda s: s["rng"].update(bit_generator="MT19937"),
     "/replay/rng is a dict, not a PCG64 generator's state"),
    (lambda s: s.pop("sizes"), '/replay has no "sizes"'),
], ids=["pointer past its shard", "pointer at its shard's end", "pointer past the fill", "fill behind the pointer", "one size for two shards",
        "sizes as floats",
        "negative pointer", "pointers as a list", "rng of another generator", "no sizes"])
def test_replay_refuses_a_saved_state_that_does_not_fit_it_and_changes_nothing(edit,
                                                                               expected):
    from fast_dqn.state_schema import StateMismatch
    replay = ReplayMemory(24, (4,), history_length=1, frame_dtype=np.float32, num_shards=2)
    for t in range(5):
        replay.add(np.full(4, t, np.float32), 0, 1.0, False, False, shard=t % 2)
    saved = replay.state_dict()
    replay.check_state_dict(saved)  # its own state fits
    edit(saved)
    before = replay.state_dict()
    with pytest.raises(StateMismatch) as refused:
        replay.check_state_dict(saved)
    assert expected in str(refused.value)
    with pytest.raises(StateMismatch):
        replay.load_state_dict(saved)  # checked first: nothing is loaded
    after = replay.state_dict()
    np.testing.assert_array_equal(after["pointers"], before["pointers"])
    np.testing.assert_array_equal(after["sizes"], before["sizes"])
    assert after["rng"] == before["rng"]


def test_every_state_the_writer_leaves_fits_after_wrap_around_too():
    """No rule the writer breaks: a full shard's pointer is anywhere in it, after add and
    add_batch, a batch longer than the shard included."""
    replay = ReplayMemory(24, (4,), history_length=1, frame_dtype=np.float32, num_shards=2)
    frame = np.zeros(4, np.float32)
    for t in range(40):
        replay.add(frame, 0, 0.0, False, False, shard=t % 2)
        replay.check_state_dict(replay.state_dict())
        if t % 7 == 0:
            n = t % 15 + 1  # up to 15 steps, more than a shard of 12
            replay.add_batch(np.zeros((n, 4), np.float32), np.zeros(n, np.int32),
                             np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool),
                             shard=1)
            replay.check_state_dict(replay.state_dict())
    assert list(replay.sizes) == [12, 12] and set(replay.pointers) <= set(range(12))
