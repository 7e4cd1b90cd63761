"""Frame-saving replay memory: single frames in a ring buffer, stacks rebuilt at sample time.

Record i holds the newest frame of s_t with a_t, r_t and two flags: `terminal` (s_{t+1} has no
value: the learner's episode ended, a lost life included) and `episode_end` (terminal, or cut
by the time limit). s_{t+1} is record i+1's stack. The sampler keeps four rules: a stack's
frames from before its episode began are zeros, as the env's FrameHistory pads them; no sample
spans the write pointer; a time-limit cut is never sampled (its s_{t+1} was not stored, and its
value must be bootstrapped, not zeroed); a terminal's next state is zeros.

With n_step = n > 1 a sample sums r = sum_{j<m} gamma^j r_{t+j} and bootstraps from s_{t+m}
with discount gamma^m, where m = n unless the episode ends first. A terminal's reward ends the
sum, and nothing is bootstrapped. A time-limit cut ends the sum before the cut's step, and the
sample bootstraps from the cut's own state, which is stored. The n records lie in one shard, on
one side of its write pointer, so a shard's newest n-1 transitions wait for n records to follow.

The memory is `num_shards` equal rings, one per game played at once, so a game's trajectory
stays contiguous; sampling is uniform over all shards' valid transitions. A record is
addressed as (shards, idx), shard first, here and on the device: the order of the arrays' axes.

Not thread-safe: the loops write only while nothing samples (fast_dqn.loops.background_trainer).
"""

import numpy as np

from fast_dqn.agent.batch import Batch
from fast_dqn.errors import ConfigError
from fast_dqn.state_schema import RUN, StateMismatch, check_state

# Bytes of bookkeeping per record: action (int32), reward (float32), two bool flags.
_EXTRA_BYTES = 4 + 4 + 1 + 1


def estimate_bytes(capacity, frame_shape, frame_dtype=np.uint8):
    """The RAM a replay of `capacity` records takes, frames and bookkeeping.

    Args:
        capacity: the replay's records (agent steps it holds).
        frame_shape: the shape of one stored frame.
        frame_dtype: the numpy dtype of the stored frames.

    Returns:
        The size in bytes.
    """
    return capacity * (int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize + _EXTRA_BYTES)


def available_memory_bytes():
    """The RAM available to a new allocation, as psutil sees it.

    Returns:
        The available RAM, in bytes.
    """
    import psutil
    return psutil.virtual_memory().available


# What a run maps beside its replay once the replay is allocated (threads' stacks, the
# evaluation games, the learner's buffers), kept free under `ulimit -v`. Ours, generous: a
# CartPole run's address space grew by less than this after the check.
_ADDRESS_SPACE_HEADROOM = 1 << 30


def address_space_left():
    """The bytes of address space, not RAM, left under `ulimit -v`; None without a limit."""
    import resource

    import psutil
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return soft - psutil.Process().memory_info().vms


def check_fits_in_memory(capacity, frame_shape, frame_dtype=np.uint8, available=None,
                         copies=1, address_space=None):
    """Refuse (ConfigError) a replay that cannot fit in RAM, before it is allocated.

    numpy's zeros are lazily mapped, so an oversized buffer would otherwise fail hours later.

    Args:
        capacity: the replay's records (agent steps it holds).
        frame_shape: the shape of one stored frame.
        frame_dtype: the numpy dtype of the stored frames.
        available: the RAM available, in bytes; None asks psutil.
        copies: 2 where the device mirror (--replay-device device) is in RAM too, on a CPU; else 1.
        address_space: the bytes left under `ulimit -v`; None asks address_space_left.

    Returns:
        The bytes the replay needs, all copies together.
    """
    need = copies * estimate_bytes(capacity, frame_shape, frame_dtype)
    available = available_memory_bytes() if available is None else available
    both = " (twice: replay and its mirror for --replay-device device; host keeps one)" \
        if copies == 2 else ""
    if need > 0.9 * available:
        raise ConfigError("replay_capacity",
            f"a replay of {capacity:,} steps needs {need / 2**30:.2f} GiB{both} but only "
            f"{available / 2**30:.2f} GiB of RAM is available; lower ${{replay_capacity}} (a "
            "resumed run keeps its own: free memory, or resume it on a machine with more)")
    address_space = address_space_left() if address_space is None else address_space
    if address_space is not None and need > 0.9 * (address_space - _ADDRESS_SPACE_HEADROOM):
        left = max(0, address_space) / 2**30
        raise ConfigError("replay_capacity",
            f"a replay of {capacity:,} steps needs {need / 2**30:.2f} GiB{both}, and "
            f"{_ADDRESS_SPACE_HEADROOM / 2**30:.0f} GiB more for the rest of the run, but "
            f"`ulimit -v` leaves this process {left:.2f} GiB of address space; raise that "
            "limit (ulimit -v unlimited) or lower ${replay_capacity}")
    return need


def records_to_sample(history_length, n_step):
    """The records a shard holds before it has a transition to sample.

    A stack's frames and the n steps its return sums, the last with its successor stored.

    Args:
        history_length: frames in a stacked state.
        n_step: the steps an n-step return sums (1: one-step returns).

    Returns:
        The number of records.
    """
    return history_length + n_step


def min_capacity(num_shards, history_length, n_step):
    """The smallest replay whose every shard holds a transition to sample and a record to write.

    Args:
        num_shards: the replay's shards, one per game played at once.
        history_length: frames in a stacked state.
        n_step: the steps an n-step return sums (1: one-step returns).

    Returns:
        The smallest capacity, in records (agent steps).
    """
    return num_shards * (records_to_sample(history_length, n_step) + 1)


class ReplayMemory:
    """Replay memory of single frames in `num_shards` rings, one per game (see the top).

    Args:
        capacity: its records over all shards (agent steps), at least min_capacity.
        frame_shape: the shape of one stored frame.
        history_length: frames in a stacked state.
        frame_dtype: the numpy dtype of the stored frames.
        seed: the seed of the sampling RNG.
        num_shards: its shards, one per game played at once (the Nature loop's: 1).
        n_step: the steps an n-step return sums (1: one-step returns).
        discount: gamma, per agent step.
    """

    def __init__(self, capacity, frame_shape, history_length, frame_dtype=np.uint8, seed=0,
                 num_shards=1, n_step=1, discount=0.99):
        per_shard = capacity // num_shards
        if capacity < min_capacity(num_shards, history_length, n_step):
            raise ConfigError("replay_capacity",
                              f"must be at least {min_capacity(num_shards, history_length, n_step)}"
                              " to hold one transition per game played at once")
        self.num_shards = num_shards
        self.shard_capacity = per_shard
        self.capacity = per_shard * num_shards
        self.history_length = history_length
        self.n_step, self.discount = n_step, discount
        self.frames = np.zeros((num_shards, per_shard, *frame_shape), dtype=frame_dtype)
        self.actions = np.zeros((num_shards, per_shard), dtype=np.int32)
        self.rewards = np.zeros((num_shards, per_shard), dtype=np.float32)
        self.terminals = np.zeros((num_shards, per_shard), dtype=bool)
        self.episode_ends = np.zeros((num_shards, per_shard), dtype=bool)
        self.pointers = np.zeros(num_shards, dtype=np.int64)  # the next record to write
        self.sizes = np.zeros(num_shards, dtype=np.int64)
        self.rng = np.random.default_rng(seed)
        # Records written since the last take_changes(), newest last, per shard (a mirror
        # on the device copies them: fast_dqn.agent.replay_mirror).
        self._changed = np.zeros(num_shards, dtype=np.int64)
        # Column offsets of one sample's frames, oldest first: the state's k frames + 1 more.
        self._offsets = np.arange(-history_length + 1, 2)

    def __len__(self):
        return int(self.sizes.sum())

    def add(self, frame, action, reward, terminal, episode_end, shard=0):
        """Store one step: the newest frame of s_t, a_t, r_t and how the step ended.

        Args:
            frame: the newest frame of s_t, of frame_shape.
            action: a_t, the index of the action taken.
            reward: r_t, the reward of the step.
            terminal: s_{t+1} has no value (the learner's episode ended).
            episode_end: the step ended the episode, by a terminal or the time limit.
            shard: the shard to write, the game's.
        """
        i = self.pointers[shard]
        self.frames[shard, i] = frame
        self.actions[shard, i] = action
        self.rewards[shard, i] = reward
        self.terminals[shard, i] = terminal
        self.episode_ends[shard, i] = episode_end or terminal
        self.pointers[shard] = (i + 1) % self.shard_capacity
        self.sizes[shard] = min(self.sizes[shard] + 1, self.shard_capacity)
        self._changed[shard] = min(self._changed[shard] + 1, self.shard_capacity)

    def add_batch(self, frames, actions, rewards, terminals, episode_ends, shard=0):
        """Store consecutive steps of one shard, oldest first, as `add` would one at a time.

        Args:
            frames: the newest frame of each step, as `add` takes it.
            actions: each step's a_t, as `add` takes it.
            rewards: each step's r_t, as `add` takes it.
            terminals: each step's `terminal`, as `add` takes it.
            episode_ends: each step's `episode_end`, as `add` takes it.
            shard: the shard to write, the game's.
        """
        n = len(actions)
        if n > self.shard_capacity:  # only the newest records would survive anyway
            cut = n - self.shard_capacity
            self.pointers[shard] = (self.pointers[shard] + cut) % self.shard_capacity
            frames, actions, rewards = frames[cut:], actions[cut:], rewards[cut:]
            terminals, episode_ends, n = terminals[cut:], episode_ends[cut:], self.shard_capacity
        idx = (self.pointers[shard] + np.arange(n)) % self.shard_capacity
        self.frames[shard, idx] = frames
        self.actions[shard, idx] = actions
        self.rewards[shard, idx] = rewards
        self.terminals[shard, idx] = terminals
        self.episode_ends[shard, idx] = np.logical_or(episode_ends, terminals)
        self.pointers[shard] = (self.pointers[shard] + n) % self.shard_capacity
        self.sizes[shard] = min(self.sizes[shard] + n, self.shard_capacity)
        self._changed[shard] = min(self._changed[shard] + n, self.shard_capacity)

    def arrays(self):
        """The big arrays, by name, for a checkpoint to write or to fill in place.

        Returns:
            {name: the array itself, not a copy}.
        """
        return {"frames": self.frames, "actions": self.actions, "rewards": self.rewards,
                "terminals": self.terminals, "episode_ends": self.episode_ends}

    def state_dict(self):
        """Everything but the arrays: write positions, fill and the sampling RNG.

        Returns:
            {"pointers", "sizes": copies, one per shard, in records; "rng": the PCG64 state}.
        """
        return {"pointers": self.pointers.copy(), "sizes": self.sizes.copy(),
                "rng": self.rng.bit_generator.state}

    def check_state_dict(self, state, where="/replay"):
        """Raise StateMismatch, changing nothing, unless `state` fits this replay.

        Args:
            state: a replay's state, as state_dict gives it.
            where: the state's path in the checkpoint, for the message.
        """
        check_state(state, RUN["replay"], where)  # the kinds, as every checkpoint's
        # A position at or past the shard's end would write outside it, far from its cause.
        shard = self.shard_capacity
        for name, top in (("pointers", shard - 1), ("sizes", shard)):
            values = state[name]
            if values.shape != self.pointers.shape or values.dtype.kind not in "iu" \
                    or values.min() < 0 or values.max() > top:
                raise StateMismatch(f"{where}/{name} is not an array of shape "
                                    f"{self.pointers.shape} of whole numbers from 0 to "
                                    f"{top:,} (one per replay shard)")
        # add and add_batch write a shard from 0 on, so until it is full its next record is
        # its size. Sampling starts at pointer - size: any other pair draws unwritten records.
        pointers, sizes = state["pointers"], state["sizes"]
        unfilled = np.flatnonzero((sizes < shard) & (pointers != sizes))
        if unfilled.size:
            s = unfilled[0]
            raise StateMismatch(f"{where}/pointers/{s} is {pointers[s]:,}, but shard {s} holds "
                                f"{sizes[s]:,} of its {shard:,} records ({where}/sizes/{s}), "
                                f"so its next record is {sizes[s]:,}")

    def load_state_dict(self, state):
        """Load write positions, fill and the sampling RNG; the arrays are filled in place.

        Args:
            state: a replay's state, as state_dict gives it; check_state_dict refuses a misfit.
        """
        self.check_state_dict(state)
        self.pointers[:] = state["pointers"]
        self.sizes[:] = state["sizes"]
        self.rng.bit_generator.state = state["rng"]
        self._changed[:] = self.shard_capacity  # the arrays were filled in place

    def take_changes(self):
        """The records written, or cut, since the last call.

        Returns:
            (shards, columns): one entry per record.
        """
        cols = [(self.pointers[s] - c + np.arange(c)) % self.shard_capacity
                for s, c in enumerate(self._changed)]
        shards = np.repeat(np.arange(self.num_shards), self._changed)
        self._changed[:] = 0
        return shards, np.concatenate(cols)

    def cut_episodes(self, shards=None):
        """End the stored trajectory of `shards` as a time-limit cut would.

        For games that restart (a resume, a replaced sampler): no stack may join the old game to
        the new one, and the last stored transition, whose successor is lost, must never be sampled.

        Args:
            shards: the shards whose games restart; None: all.
        """
        shards = range(self.num_shards) if shards is None else shards
        for shard in (s for s in shards if self.sizes[s]):
            self.episode_ends[shard, (self.pointers[shard] - 1) % self.shard_capacity] = True
            self._changed[shard] = max(self._changed[shard], 1)  # the newest record

    def skip_samples(self, count, batch_size):
        """Advance the RNG exactly as `count` calls of sample(batch_size) would.

        Args:
            count: the minibatches to skip.
            batch_size: the transitions in each minibatch, B.
        """
        for _ in range(count):
            self.sample_indices(batch_size)

    def can_sample(self):
        """Whether any shard holds a complete transition to sample.

        Returns:
            True when sample may be called.
        """
        return self._candidates().sum() > 0

    def _candidates(self):
        # Logical positions history_length-1 .. size-1-n of each shard (its oldest record is
        # position 0): every stack has k real records behind it and n records in front.
        return np.maximum(self.sizes - records_to_sample(self.history_length, self.n_step) + 1,
                          0)

    def sample_indices(self, batch_size):
        """Draw `batch_size` valid transitions, uniformly at random.

        Before can_sample it raises ValueError; after 1,000 draws of time-limit cuts, RuntimeError.

        Args:
            batch_size: the transitions to draw, B.

        Returns:
            (shards, indices), each (B,).
        """
        counts = self._candidates()
        total = int(counts.sum())
        if total <= 0:
            raise ValueError("replay memory holds no complete transition yet")
        starts = np.cumsum(counts) - counts
        oldest = (self.pointers - self.sizes) % self.shard_capacity
        shards = np.empty(batch_size, dtype=np.int64)
        chosen = np.empty(batch_size, dtype=np.int64)
        filled = 0
        for _ in range(1000):
            if filled == batch_size:
                return shards, chosen
            u = self.rng.integers(0, total, size=batch_size - filled)
            s = np.searchsorted(starts, u, side="right") - 1
            idx = (oldest[s] + u - starts[s] + self.history_length - 1) % self.shard_capacity
            # Time-limit cuts have no stored successor state; they are rare, so redraw them.
            keep = ~(self.episode_ends[s, idx] & ~self.terminals[s, idx])
            n = int(keep.sum())
            shards[filled:filled + n], chosen[filled:filled + n] = s[keep], idx[keep]
            filled += n
        raise RuntimeError("replay memory holds only time-limit cuts; cannot sample")

    def sample_indices_many(self, count, batch_size):
        """Draw `count` minibatches as `count` calls of sample_indices (or sample) would.

        Args:
            count: the minibatches to draw, K.
            batch_size: the transitions in each minibatch, B.

        Returns:
            (shards, indices), each (K, B).
        """
        drawn = [self.sample_indices(batch_size) for _ in range(count)]
        return (np.stack([s for s, _ in drawn]), np.stack([i for _, i in drawn]))

    def gather_many(self, shards, idx):
        """The minibatches at (K, B) indices, in one gather, stacked as one Batch.

        Args:
            shards: int (K, B), each transition's shard.
            idx: int (K, B), each transition's column in its shard.

        Returns:
            A Batch of (K, B, ...) arrays.
        """
        k, b = idx.shape
        flat = (shards.ravel(), idx.ravel())
        batch = self.gather_n_step(*flat) if self.n_step > 1 else self.gather(*flat)
        return Batch(*(np.reshape(a, (k, b, *a.shape[1:])) for a in batch))

    def sample(self, batch_size):
        """A minibatch of `batch_size` transitions drawn uniformly.

        Args:
            batch_size: the transitions to draw, B.

        Returns:
            A Batch, each transition with its bootstrap discount (gamma, or gamma^m n-step).
        """
        shards, idx = self.sample_indices(batch_size)
        if self.n_step > 1:
            return self.gather_n_step(shards, idx)
        return self.gather(shards, idx)

    def stacks(self, shards, idx):
        """The stacked states of records `idx` of `shards`, frames from before the episode zeroed.

        Args:
            shards: int (B,), each record's shard.
            idx: int (B,), each record's column in its shard.

        Returns:
            The states, (B, k, ...) frames.
        """
        k = self.history_length
        cols = (idx[:, None] + self._offsets[:k]) % self.shard_capacity
        frames = self.frames[shards[:, None], cols]
        ends = self.episode_ends[shards[:, None], cols[:, :k - 1]]
        blank = np.flip(np.logical_or.accumulate(np.flip(ends, 1), axis=1), 1)
        if blank.any():
            frames[:, :k - 1][blank] = 0
        return frames

    def n_step_returns(self, shards, idx):
        """The n-step sums of the transitions starting at records `idx` of `shards`.

        Args:
            shards: int (B,), each record's shard.
            idx: int (B,), each record's column in its shard.

        Returns:
            (returns, steps m, whether it ended at a terminal), each (B,).
        """
        n = self.n_step
        cols = (idx[:, None] + np.arange(n)) % self.shard_capacity       # (B, n)
        rows = shards[:, None]
        ends, terminals = self.episode_ends[rows, cols], self.terminals[rows, cols]
        # The first episode end in the window, or n: the sum takes its reward if it is a
        # terminal, and stops before it if it is a cut.
        first_end = np.where(ends.any(axis=1), ends.argmax(axis=1), n)
        ended_by = np.minimum(first_end, n - 1)
        terminal = ends[np.arange(len(idx)), ended_by] & terminals[np.arange(len(idx)), ended_by]
        terminal &= first_end < n
        steps = np.where(first_end < n, np.where(terminal, first_end + 1, first_end), n)
        weights = self.discount ** np.arange(n) * (np.arange(n) < steps[:, None])
        returns = (self.rewards[rows, cols].astype(np.float64) * weights).sum(axis=1)
        return returns.astype(np.float32), steps, terminal

    def gather_n_step(self, shards, idx):
        """The n-step transitions starting at records `idx` of `shards`.

        Args:
            shards: int (B,), each record's shard.
            idx: int (B,), each record's column in its shard.

        Returns:
            A Batch, each transition with its bootstrap discount gamma^m.
        """
        returns, steps, terminal = self.n_step_returns(shards, idx)
        next_states = self.stacks(shards, (idx + steps) % self.shard_capacity)
        if terminal.any():
            next_states[terminal] = 0
        discounts = (self.discount ** steps).astype(np.float32)
        return Batch(self.stacks(shards, idx), self.actions[shards, idx], returns, next_states,
                     terminal.astype(np.float32), discounts)

    def gather(self, shards, idx):
        """The one-step transitions of records `idx` of `shards`.

        Args:
            shards: int (B,), each record's shard; None: all of shard 0.
            idx: int (B,), each record's column in its shard.

        Returns:
            A Batch, each transition with its bootstrap discount gamma.
        """
        k = self.history_length
        shards = np.zeros_like(idx) if shards is None else shards
        cols = (idx[:, None] + self._offsets) % self.shard_capacity   # (B, k + 1)
        rows = shards[:, None]
        frames = self.frames[rows, cols]                                # one fancy-index copy
        # Frame j of the state is blanked if an episode ended at any record in [j, i-1].
        ends = self.episode_ends[rows, cols[:, :k - 1]]                 # (B, k - 1)
        blank = np.flip(np.logical_or.accumulate(np.flip(ends, 1), axis=1), 1)
        if blank.any():
            frames[:, :k - 1][blank] = 0
        terminal = self.terminals[shards, idx]
        states = frames[:, :k]
        next_states = frames[:, 1:].copy()
        if terminal.any():
            next_states[terminal] = 0
        return Batch(states, self.actions[shards, idx], self.rewards[shards, idx], next_states,
                     terminal.astype(np.float32),
                     np.full(len(idx), self.discount, np.float32))
