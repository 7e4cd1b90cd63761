"""Replay's arrays mirrored in the device's memory, so the learner gathers its minibatches
where it trains (fast_dqn.agent.replay_gather) and the host sends only their indices.

Host replay stays the record of truth: the loops write it, checkpoints save it, and its RNG
draws every minibatch's indices. The mirror copies what changed since its last `sync`, in one
transfer; replay is written only at sync points while nobody trains, so a sync at the start
of each call sees a replay that no longer changes in the period.
"""

import numpy as np

from fast_dqn.agent.replay_gather import FIELDS, ReplayGather


class ReplayMirror:
    """A copy of replay's arrays on the device, filled now, refreshed by `sync`.

    device_arrays is the backend's DeviceArrays class. `gather` builds minibatches from the
    arrays that `device` holds.
    """

    def __init__(self, replay, device_arrays):
        self.replay = replay
        self.gather = ReplayGather(replay.shard_capacity, replay.history_length,
                                   replay.n_step, replay.discount)
        arrays = replay.arrays()
        replay.take_changes()  # everything is copied now
        self.device = device_arrays({name: arrays[name] for name in FIELDS})

    def sync(self):
        """Copy the records written since the last sync in one transfer; returns how many."""
        shards, cols = self.replay.take_changes()
        if not len(cols):
            return 0
        # Padded to a power of two with copies of the last record (written twice, the same
        # value): one compiled write per size, log2 of the replay's size of them at most.
        size = 1 << (len(cols) - 1).bit_length()
        pad = size - len(cols)
        shards = np.concatenate([shards, np.repeat(shards[-1:], pad)]).astype(np.int32)
        cols = np.concatenate([cols, np.repeat(cols[-1:], pad)]).astype(np.int32)
        arrays = self.replay.arrays()
        self.device.write(shards, cols, {name: arrays[name][shards, cols] for name in FIELDS})
        return len(cols) - pad
