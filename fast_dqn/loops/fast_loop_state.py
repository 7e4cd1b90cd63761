"""What the fast loop carries from round to round, all of it that a checkpoint saves: the held
transitions and FastLoopState; and cut_to_budget, for a resume with a smaller --timesteps."""

from dataclasses import dataclass

import numpy as np

from fast_dqn.loops.minibatch_schedule import MinibatchSchedule, minibatches_due
from fast_dqn.state_schema import StateMismatch


class HeldTransitions:
    """The chunks received since the last flush, in arrival order.

    Args:
        chunks: a checkpoint's held chunks, as `self.chunks` keeps them; empty for none.
    """

    def __init__(self, chunks=()):
        # Each chunk as (frames, actions, rewards, terminated, episode_ends, shards); a
        # checkpoint keeps this list as it is.
        self.chunks = list(chunks)
        self.cut_in_replay = set()  # shards whose last stored transition lost its successor

    @staticmethod
    def check_saved(chunks, num_shards, frame_shape, frame_dtype):
        """Check, before anything is loaded, that a checkpoint's held chunks fit the replay.

        Args:
            chunks: the checkpoint's held chunks, as HeldTransitions keeps them.
            num_shards: the replay's shards, one per game.
            frame_shape: the shape of one stored frame (the observation's, less the stack).
            frame_dtype: the numpy dtype of the stored frames.

        Raises:
            StateMismatch: a chunk that the flush would fail on, or store as wrong frames.
        """
        for i, (frames, *steps, shards) in enumerate(chunks):
            where = f"/loop/held/{i}"
            if shards.ndim != 1 or shards.dtype.kind not in "iu" or not len(shards) or \
                    shards.min() < 0 or shards.max() >= num_shards:
                raise StateMismatch(f"{where} names shards outside 0..{num_shards - 1}")
            rounds = (len(frames), len(shards))
            if frames.shape != (*rounds, *frame_shape) or frames.dtype != frame_dtype or \
                    any(step.shape != rounds for step in steps):
                raise StateMismatch(f"{where} holds arrays of shapes "
                                    f"{[a.shape for a in (frames, *steps)]}, not {rounds} "
                                    f"steps of frames {frame_shape} ({frame_dtype})")

    def append(self, chunk):
        """Hold a chunk; one that starts new streams first ends its games' episodes.

        Args:
            chunk: the Chunk received (fast_dqn.loops.experience).
        """
        ends = np.array(chunk.episode_ends)  # writable: a later restart may cut it
        if chunk.new_stream:
            self._cut(chunk.shards)
        self.chunks.append((chunk.frames, chunk.actions, chunk.rewards, chunk.terminated,
                            ends, chunk.shards))

    def _cut(self, shards):
        """End the episodes of `shards` at their latest transition, held or already stored."""
        for shard in shards:
            for *_, ends, held_shards in reversed(self.chunks):
                column = np.flatnonzero(held_shards == shard)
                if len(column):
                    ends[-1, column[0]] = True
                    break
            else:
                self.cut_in_replay.add(int(shard))

    def flush(self, replay):
        """Write everything held into replay, shard 0's steps first, each shard in time order.

        Args:
            replay: the ReplayMemory written, one shard per game.
        """
        if self.cut_in_replay:
            replay.cut_episodes(sorted(self.cut_in_replay))
            self.cut_in_replay = set()
        columns = {}
        for chunk in self.chunks:
            *arrays, shards = chunk
            for column, shard in enumerate(shards):
                columns.setdefault(int(shard), []).append((arrays, column))
        for shard in sorted(columns):
            # One shard at a time: joining all of them at once would briefly double the held
            # frames in RAM (70 MB per Nature period with 8 games).
            frames, actions, rewards, terminated, ends = (
                np.concatenate([arrays[field][:, column] for arrays, column in columns[shard]])
                for field in range(5))
            replay.add_batch(frames, actions, rewards, terminated, ends, shard=shard)
        self.chunks = []


@dataclass
class FastLoopState:
    """Everything of the fast loop that a checkpoint saves; nothing else of it outlives a stop."""
    schedule: MinibatchSchedule   # which minibatches are due when, and those deferred
    held: HeldTransitions         # chunks received since the last sync point
    step: int = 0                 # agent steps taken, over all samplers
    trained_through: int = 0      # the minibatches of steps up to here are handed out
    last_eval: int = 0            # the step of the last evaluation
    owed: int = 0                 # minibatches the trainer still owes for this period
    sync_pending: bool = False    # the last chunk passed a sync point not yet handled
    eval_pending: bool = False    # an evaluation is due (or was interrupted)
    boundary: bool = True         # trainer idle and nothing held: a consistent point

    @classmethod
    def fresh(cls, settings, warn=None):
        """The state of a run that starts at agent step 0, at a consistent point.

        Args:
            settings: the loop's LoopSettings (its warm-up and train_freq, in agent steps).
            warn: a callable told of deferred minibatches left untrained, or None.

        Returns:
            The FastLoopState, nothing held.
        """
        return cls(MinibatchSchedule(settings.prepopulate, settings.train_freq, warn=warn),
                   HeldTransitions())

    @classmethod
    def from_state_dict(cls, state, settings, warn=None):
        """The state a checkpoint's loop state holds.

        Args:
            state: the loop state of a checkpoint, a dict as state_dict() writes it.
            settings: the loop's LoopSettings (its train_freq, in agent steps).
            warn: a callable told of deferred minibatches left untrained, or None.

        Returns:
            The FastLoopState.
        """
        return cls(MinibatchSchedule.from_loop_state(state, settings.train_freq, warn),
                   HeldTransitions(state["held"]), state["step"], state["trained_through"],
                   state["last_eval"], state["owed"], state["sync_pending"],
                   state["eval_pending"], state["boundary"])

    def state_dict(self):
        """The state for a checkpoint, in the checkpoint's own format.

        Returns:
            {"step", "trained_through", "last_eval" (agent steps), "schedule" (the
            MinibatchSchedule's state_dict()), "owed" (minibatches), "held" (the held
            chunks), "sync_pending", "eval_pending", "boundary" (bools)}.
        """
        return {"step": self.step, "trained_through": self.trained_through,
                "last_eval": self.last_eval, "schedule": self.schedule.state_dict(),
                "owed": self.owed, "held": self.held.chunks,
                "sync_pending": self.sync_pending, "eval_pending": self.eval_pending,
                "boundary": self.boundary}


def take_back(loop, end, train_freq):
    """Take back, in place, the minibatches handed out for agent steps after `end`.

    None of them was trained: the trainer never leads the steps played. They come off what the
    period owes first, then off those deferred (a refill defers its steps' minibatches as it
    hands them out), so that the trained, owed and deferred ones add up to the Nature loop's
    count at `end`, which becomes `trained_through`. `loop` is as cut_to_budget's.
    """
    if loop["trained_through"] <= end:
        return
    schedule = MinibatchSchedule.from_loop_state(loop, train_freq)
    back = minibatches_due(end, loop["trained_through"], schedule.train_start, train_freq)
    from_owed = min(loop["owed"], back)
    loop["owed"] -= from_owed
    schedule.deferred = max(0, schedule.deferred - (back - from_owed))
    loop["schedule"] = schedule.state_dict()
    loop["trained_through"] = end


def cut_to_budget(loop, total, train_freq, evaluates=True):
    """Fit a checkpoint's loop state to the resumed run's budget, which may be smaller.

    Args:
        loop: a checkpoint's loop state (FastLoopState.state_dict()), changed in place.
        total: the resumed run's last agent step (budget_end); later steps' minibatches go back.
        train_freq: one minibatch per this many agent steps after warm-up.
        evaluates: whether the resumed run evaluates; then a cut to an unevaluated sync point does.

    Returns:
        `loop`, cut to the budget.
    """
    take_back(loop, total, train_freq)
    if loop["step"] >= total and not loop["boundary"]:
        loop["sync_pending"] = True  # its sync point evaluates, as every run's last one does
    elif loop["step"] >= total and evaluates and loop["last_eval"] != loop["step"]:
        loop["eval_pending"] = True  # cut to a sync point that did not evaluate
    return loop

