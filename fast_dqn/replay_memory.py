"""Frame-saving replay memory: single frames in a ring buffer, stacks rebuilt at sample time.

Record i holds the newest frame of state s_t together with a_t, r_t and two flags:
`terminal` (s_{t+1} has no value: the learner's episode ended, including a lost life) and
`episode_end` (terminal, or cut by the time limit). The next state s_{t+1} is record i+1's stack.

Rules the sampler keeps:
- a stack never reaches back across an episode start: those older frames are zeros, exactly as
  the env's FrameHistory pads them;
- a sample never spans the write pointer, so no stack mixes old and new data;
- a transition cut by the time limit is never sampled: its s_{t+1} was not stored, and its value
  must be bootstrapped, not zeroed;
- the next state of a terminal transition is all zeros: the target ignores it anyway.

Not thread-safe. The training loops write only when nothing samples (see fast_dqn.nature_loop).
"""

import numpy as np

from fast_dqn.errors import UsageError

# Bytes of bookkeeping per record: action (int32), reward (float32), two bool flags.
_EXTRA_BYTES = 4 + 4 + 1 + 1


def estimate_bytes(capacity, frame_shape, frame_dtype=np.uint8):
    return capacity * (int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize + _EXTRA_BYTES)


def available_memory_bytes():
    import psutil
    return psutil.virtual_memory().available


def check_fits_in_memory(capacity, frame_shape, frame_dtype=np.uint8, available=None):
    """Refuse a replay that cannot fit in RAM, before a single byte is allocated.

    numpy's zeros are lazily mapped, so an oversized buffer would otherwise fail hours later
    when the pages are first touched, or bring the OOM killer.
    """
    need = estimate_bytes(capacity, frame_shape, frame_dtype)
    available = available_memory_bytes() if available is None else available
    if need > 0.9 * available:
        raise UsageError(
            "--replay-capacity",
            f"a replay of {capacity:,} steps needs {need / 2**30:.2f} GiB but only "
            f"{available / 2**30:.2f} GiB of RAM is available; lower --replay-capacity")
    return need


class ReplayMemory:
    def __init__(self, capacity, frame_shape, history_length, frame_dtype=np.uint8, seed=0):
        if capacity < history_length + 2:
            raise UsageError("--replay-capacity",
                             f"must be at least {history_length + 2} to hold one transition")
        self.capacity = capacity
        self.history_length = history_length
        self.frames = np.zeros((capacity, *frame_shape), dtype=frame_dtype)
        self.actions = np.zeros(capacity, dtype=np.int32)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminals = np.zeros(capacity, dtype=bool)
        self.episode_ends = np.zeros(capacity, dtype=bool)
        self.pointer = 0  # the next record to write
        self.size = 0
        self.rng = np.random.default_rng(seed)
        # Column offsets of one sample's frames, oldest first: the state's k frames + 1 more.
        self._offsets = np.arange(-history_length + 1, 2)

    def __len__(self):
        return self.size

    def add(self, frame, action, reward, terminal, episode_end):
        """Store one step: the newest frame of s_t, a_t, r_t and how the step ended."""
        i = self.pointer
        self.frames[i] = frame
        self.actions[i] = action
        self.rewards[i] = reward
        self.terminals[i] = terminal
        self.episode_ends[i] = episode_end or terminal
        self.pointer = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_batch(self, frames, actions, rewards, terminals, episode_ends):
        """Store steps in order, as `add` would one at a time (used to flush held transitions)."""
        n = len(actions)
        idx = (self.pointer + np.arange(n)) % self.capacity
        self.frames[idx] = frames
        self.actions[idx] = actions
        self.rewards[idx] = rewards
        self.terminals[idx] = terminals
        self.episode_ends[idx] = np.logical_or(episode_ends, terminals)
        self.pointer = (self.pointer + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def can_sample(self):
        return self._num_candidates() > 0

    def _num_candidates(self):
        # Logical positions history_length-1 .. size-2 (oldest record is position 0): every
        # stack has k real records behind it and a successor in front of it.
        return self.size - self.history_length

    def sample_indices(self, batch_size):
        """Ring indices of `batch_size` valid transitions, uniformly at random."""
        n = self._num_candidates()
        if n <= 0:
            raise ValueError("replay memory holds no complete transition yet")
        oldest = (self.pointer - self.size) % self.capacity
        chosen = np.empty(batch_size, dtype=np.int64)
        filled = 0
        for _ in range(1000):
            if filled == batch_size:
                return chosen
            logical = self.rng.integers(0, n, size=batch_size - filled) + self.history_length - 1
            idx = (oldest + logical) % self.capacity
            # Time-limit cuts have no stored successor state; they are rare, so redraw them.
            idx = idx[~(self.episode_ends[idx] & ~self.terminals[idx])]
            chosen[filled:filled + len(idx)] = idx
            filled += len(idx)
        raise RuntimeError("replay memory holds only time-limit cuts; cannot sample")

    def sample(self, batch_size):
        """A minibatch (states, actions, rewards, next_states, dones) of numpy arrays.

        states and next_states are (B, k, *frame_shape) in the frame dtype.
        """
        return self.gather(self.sample_indices(batch_size))

    def gather(self, idx):
        k = self.history_length
        cols = (idx[:, None] + self._offsets) % self.capacity         # (B, k + 1)
        frames = self.frames[cols]                                     # one fancy-index copy
        # Frame j of the state is blanked if an episode ended at any record in [j, i-1].
        ends = self.episode_ends[cols[:, :k - 1]]                      # (B, k - 1)
        blank = np.flip(np.logical_or.accumulate(np.flip(ends, 1), axis=1), 1)
        if blank.any():
            frames[:, :k - 1][blank] = 0
        terminal = self.terminals[idx]
        states = frames[:, :k]
        next_states = frames[:, 1:].copy()
        if terminal.any():
            next_states[terminal] = 0
        return (states, self.actions[idx], self.rewards[idx], next_states,
                terminal.astype(np.float32))
