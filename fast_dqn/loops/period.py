"""A period of the fast loop as one object: its sync point, the minibatches it hands out, and
replay's RNG for a stop's rewind. What a period is: fast_dqn.loops.fast_loop."""

from fast_dqn.loops.minibatch_schedule import minibatches_due


def next_sync_point(step, period, round_size, total):
    """The first round end after `step` that passes the next multiple of `period`, at most `total`.

    All four and the result are in agent steps; a round is `round_size` of them.
    """
    crossing = (step // period + 1) * period
    return min(total, -(-crossing // round_size) * round_size)


class Period:
    """The period in progress (fast_dqn.loops.fast_loop).

    Only the loop state's `owed` and `trained_through` outlive a stop; a resume rebuilds the
    period from them and the loop state's step.
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
        """Its minibatches handed out and not known to be trained.

        The count falls only when the trainer's wait ends or a stop rewinds, never while it runs.
        """
        return self.state.owed

    def ended_by(self, previous, step):
        """Whether a chunk that took the loop from agent step `previous` to `step` ends it."""
        length = self.settings.target_update_freq
        return step // length > previous // length or step >= self.total

    def hand_out(self):
        """Owe the minibatches of the agent steps from `trained_through` to its sync point."""
        state = self.state
        state.owed = self._take(state.trained_through, self.sync_point, final=False)
        state.trained_through = self.sync_point

    def hand_out_the_rest(self):
        """After the run's last flush, owe what no later period will train, and return how many.

        They are the minibatches of a run that ends at its first sync point, and any deferred.
        """
        state = self.state
        if state.trained_through < state.step or state.schedule.deferred:
            state.owed = self._take(state.trained_through, state.step, final=True)
            state.trained_through = state.step
        return state.owed

    def take_round(self, previous):
        """Take the minibatches due at the steps (previous, step] just played; return how many."""
        step = self.state.step
        return self._take(previous, step, final=step >= self.total)

    def unplayed(self):
        """How many of the minibatches it owes must wait until more agent steps are played.

        As many as the Nature loop trains at the handed-out steps not played yet: so the run's count
        never leads the Nature loop's at the steps played, also while deferred ones are repaid.
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
        """After a stop that ended the trainer after `trained` minibatches, owe the rest.

        Replay's RNG is set back to where an uninterrupted run draws them.
        """
        self.replay.rng.bit_generator.state = self.rng_at_start
        self.replay.skip_samples(trained, self.settings.batch_size)
        self.state.owed -= trained

    def _take(self, start, end, final):
        """The schedule's minibatches of agent steps (start, end]; `final` at the run's last
        write of replay, the last chance to repay deferred ones."""
        return self.state.schedule.take(start, end, final, replay_ready=self.replay.can_sample)
