"""A period of the fast loop: the rounds from one sync point to the next, and the minibatches
the trainer trains on the main network meanwhile.

Periods follow the Nature loop's schedule: a period ends with the round in which the global
agent step passes a multiple of C (--target-update-freq), or reaches the budget. Its
minibatches are those the Nature loop trains up to its sync point, handed out when it begins
(fast_dqn.loops.minibatch_schedule says how many).
"""

from fast_dqn.loops.minibatch_schedule import minibatches_due


def next_sync_point(step, period, round_size, total):
    """The first round boundary after `step` that passes the next multiple of `period`.

    Args:
        step: agent steps taken so far, over all samplers.
        period: the target network's period C, in agent steps.
        round_size: agent steps in a round (or, with the Ray backend, a chunk).
        total: the run's last agent step.

    Returns:
        The agent step of that round's end, at most `total`.
    """
    crossing = (step // period + 1) * period
    return min(total, -(-crossing // round_size) * round_size)


class Period:
    """The period in progress.

    What of it outlives a stop lives in the loop's FastLoopState, in the checkpoint's own
    format: `owed`, its minibatches not yet trained, and `trained_through`, the agent step up
    to which the schedule has handed minibatches out. A resume rebuilds the period from them.
    Replay's RNG at the trainer's start is the period's own: a stop rewinds to it and skips
    the minibatches already trained, so the resumed run draws the rest as an uninterrupted
    one would.

    Args:
        state: the loop's FastLoopState; the period starts at its agent step.
        settings: the loop's LoopSettings.
        round_size: agent steps in a round (or, with the Ray backend, a chunk).
        total: the run's last agent step.
        replay: the ReplayMemory its minibatches are drawn from.
    """

    def __init__(self, state, settings, round_size, total, replay):
        self.state, self.settings, self.replay = state, settings, replay
        self.total = total
        # The agent step of the round that ends it; a period resumed with its rounds all
        # played ends where it stands.
        self.sync_point = state.step if state.sync_pending else next_sync_point(
            state.step, settings.target_update_freq, round_size, total)
        self.rng_at_start = None  # replay's RNG state as the trainer began on it

    @property
    def minibatches(self):
        """Its minibatches handed out and not known to be trained (minibatches).

        The count falls only when the trainer's wait ends, or a stop rewinds: not while the
        trainer runs.
        """
        return self.state.owed

    def ended_by(self, previous, step):
        """Whether a chunk that took the loop from agent step `previous` to `step` ends it.

        It does when it passed a multiple of C (--target-update-freq), or reached the budget.

        Args:
            previous: the agent step before the chunk.
            step: the agent step after it.

        Returns:
            True when the chunk ends the period.
        """
        length = self.settings.target_update_freq
        return step // length > previous // length or step >= self.total

    def hand_out(self):
        """Take the minibatches up to its sync point that no earlier period was handed.

        Called at its start, a sync point. They come from the schedule and become the loop
        state's `owed`; `trained_through` moves to the period's sync point.
        """
        state = self.state
        state.owed = self._take(state.trained_through, self.sync_point, final=False)
        state.trained_through = self.sync_point

    def hand_out_the_rest(self):
        """Take the minibatches no later period will train, at the run's last sync point.

        Called after the last flush: those of a run that ends at its first sync point
        (handed out only at the next one) and any still deferred.

        Returns:
            How many it owes now, in minibatches.
        """
        state = self.state
        if state.trained_through < state.step or state.schedule.deferred:
            state.owed = self._take(state.trained_through, state.step, final=True)
            state.trained_through = state.step
        return state.owed

    def take_round(self, previous):
        """Take from the schedule the minibatches due at the agent steps just played.

        Lockstep training takes them at once, after each chunk.

        Args:
            previous: the agent step before the chunk; it covered (previous, state.step].

        Returns:
            How many to train now, in minibatches.
        """
        step = self.state.step
        return self._take(previous, step, final=step >= self.total)

    def unplayed(self):
        """How many of what it owes the trainer must hold back until more steps are played.

        As many as the Nature loop trains at the handed-out steps not played yet: so the
        run's total never leads the Nature loop's at the steps played, also while deferred
        minibatches are repaid (they were due at steps already played).
        """
        state, schedule = self.state, self.state.schedule
        return min(state.owed, minibatches_due(state.step, state.trained_through,
                                               schedule.train_start, schedule.train_freq))

    def mark_start(self):
        """The trainer begins on its minibatches now: keep replay's RNG."""
        self.rng_at_start = self.replay.rng.bit_generator.state

    def mark_trained(self):
        """The trainer has trained all of its minibatches."""
        self.state.owed = 0

    def rewind(self, trained):
        """Owe the rest after a stop ended the trainer after `trained` of its minibatches.

        Replay's RNG then stands where an uninterrupted run draws them.

        Args:
            trained: the minibatches the trainer trained before it stopped.
        """
        self.replay.rng.bit_generator.state = self.rng_at_start
        self.replay.skip_samples(trained, self.settings.batch_size)
        self.state.owed -= trained

    def _take(self, start, end, final):
        """Take the minibatches of agent steps (start, end] from the schedule.

        `final` is true at the run's last write of replay, the last chance to repay
        deferred ones. Returns how many, in minibatches.
        """
        return self.state.schedule.take(start, end, final, replay_ready=self.replay.can_sample)
