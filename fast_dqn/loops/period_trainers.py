"""The fast loop's two trainers of a period's minibatches, behind one interface (what a period
is: fast_dqn.loops.fast_loop).

- ConcurrentTrainer (the default): a BackgroundTrainer's thread trains them while the rounds
  play.
- LockstepTrainer (--no-concurrent): no thread. After each chunk its transitions are written to
  replay and its minibatches train at once, on the loop's thread. The loop state's `owed` and
  `trained_through` stay 0, as the lockstep loop always saved them.

The loop calls, in order: hand_out(period) at the sync point that begins a period;
begin(period) as its rounds start; played(period, previous) after each chunk; check() when no
chunk came; wait(period, abort) once the rounds are played; train_the_rest(period, abort)
after the run's last flush; interrupt(period) on a stop mid-period.
"""


class ConcurrentTrainer:
    """Drives a BackgroundTrainer (fast_dqn.loops.background_trainer) period by period."""

    def __init__(self, background):
        self.background = background

    def hand_out(self, period):
        period.hand_out()

    def begin(self, period):
        """Start the trainer on what the period owes, each minibatch once its step is played."""
        if period.minibatches:
            period.mark_start()
            self.background.start(period.minibatches, unplayed=period.unplayed())

    def played(self, period, previous):
        """Release the minibatches of the agent steps a chunk just played."""
        self.background.pace(period.unplayed())
        self.background.check()

    def check(self):
        """Re-raise a failure of the trainer's threads here."""
        self.background.check()

    def wait(self, period, abort):
        """Block until the period is trained (True), or until a polled abort() is true (False)."""
        # The period is played: whatever it owes may train (never wait on a release that no
        # further step would bring).
        self.background.pace(0)
        if not self.background.wait(abort=abort):
            return False
        period.mark_trained()
        return True

    def train_the_rest(self, period, abort):
        """Train what no later period will, on replay as the last flush left it; False on abort."""
        if period.hand_out_the_rest():
            self.begin(period)
            return self.wait(period, abort)
        return True

    def interrupt(self, period):
        """Stop after the minibatch in training; the period then owes the rest."""
        if period.minibatches:
            period.rewind(self.background.interrupt())


class LockstepTrainer:
    """Trains each chunk's minibatches right after it, on the loop's thread."""

    def __init__(self, learner, replay, settings, monitor):
        self.learner, self.replay, self.settings, self.monitor = learner, replay, settings, monitor

    def hand_out(self, period):
        pass  # each chunk's minibatches are taken once it is played

    def begin(self, period):
        pass

    def played(self, period, previous):
        """Write a chunk just played into replay, and train the minibatches due at its steps."""
        period.state.held.flush(self.replay)
        self._train(period, period.take_round(previous))

    def check(self):
        pass

    def wait(self, period, abort):
        return True  # every minibatch trained as its chunk was played

    def train_the_rest(self, period, abort):
        """Train, at the run's end, the minibatches still deferred; True.

        After a straight run's last chunk there are none. A run resumed with its budget cut to its
        step plays no chunk, so what a refill deferred trains here (or is dropped, with a warning,
        where replay cannot be sampled).
        """
        # (step, step] holds no due minibatch: the take at the run's end is the deferred ones.
        self._train(period, period.take_round(period.state.step))
        return True

    def _train(self, period, count):
        """Train `count` minibatches on the loop's thread, each heard by the monitor."""
        state = period.state
        final = state.step >= period.total
        for _ in range(count):
            self.monitor.record_train(
                *self.learner.train(self.replay.sample(self.settings.batch_size)))
            if final:  # the deferred ones all train here: keep the console going
                self.monitor.tick(state.step, float(self.settings.epsilon(state.step)))

    def interrupt(self, period):
        pass  # nothing trains between chunks
