"""The fast loop's two trainers, behind one interface: what trains a period's minibatches
on the main network, and when.

- ConcurrentTrainer (the paper's, the default): a BackgroundTrainer trains the period's
  minibatches in its own thread while the samplers play the period's rounds; the loop waits
  for it at the sync point, before replay is written.
- LockstepTrainer (--no-concurrent): no thread. After each chunk, its transitions are written
  to replay and the minibatches due at its steps train at once, on the loop's thread. So
  nothing is held at a sync point and there is nothing to wait for; the loop state's `owed`
  and `trained_through` stay 0, as the lockstep loop always saved them.

The loop calls, in order: hand_out(period) at the sync point that begins a period (before
the consistent point, whose checkpoint then owes them); begin(period) as its rounds start;
played(period, previous) after each chunk; check() when no chunk came; wait(period, abort)
once the rounds are played; train_the_rest(period, abort) after the last flush of the run;
interrupt(period) on a stop mid-period.
"""


class ConcurrentTrainer:
    """Drives a BackgroundTrainer (fast_dqn.loops.background_trainer) period by period.

    Args:
        background: the BackgroundTrainer, whose thread trains the minibatches.
    """

    def __init__(self, background):
        self.background = background

    def hand_out(self, period):
        """Hand out the period's minibatches, at the sync point that begins it."""
        period.hand_out()

    def begin(self, period):
        """Start the trainer on what the period owes, each minibatch once its step is played."""
        if period.minibatches:
            period.mark_start()
            self.background.start(period.minibatches, unplayed=period.unplayed())

    def played(self, period, previous):
        """Release the minibatches of the agent steps a chunk just played.

        Args:
            period: the Period in progress.
            previous: the agent step before the chunk (unused here).
        """
        self.background.pace(period.unplayed())
        self.background.check()

    def check(self):
        """Re-raise a failure of the trainer's threads here."""
        self.background.check()

    def wait(self, period, abort):
        """Block until the period's minibatches are trained.

        Args:
            period: the Period in progress, all of its rounds played.
            abort: a callable, polled while waiting; when it returns true the wait ends.

        Returns:
            True when they are trained; False, at once, when abort() turned true first.
        """
        # The period is played: whatever it owes may train (never wait on a release that no
        # further step would bring).
        self.background.pace(0)
        if not self.background.wait(abort=abort):
            return False
        period.mark_trained()
        return True

    def train_the_rest(self, period, abort):
        """Train, at the run's end, what no later period will.

        It trains on replay as the last flush left it.

        Args:
            period: the run's last Period.
            abort: a callable, polled while waiting (see wait).

        Returns:
            True when they are trained (also when there were none); False when abort()
            turned true first.
        """
        if period.hand_out_the_rest():
            self.begin(period)
            return self.wait(period, abort)
        return True

    def interrupt(self, period):
        """Stop after the minibatch in training; the period then owes the rest."""
        if period.minibatches:
            period.rewind(self.background.interrupt())


class LockstepTrainer:
    """Trains each chunk's minibatches right after it, on the loop's thread.

    Args:
        learner: trains the main network.
        replay: the ReplayMemory it samples.
        settings: the loop's LoopSettings.
        monitor: hears each loss and keeps the console going.
    """

    def __init__(self, learner, replay, settings, monitor):
        self.learner, self.replay, self.settings, self.monitor = learner, replay, settings, monitor

    def hand_out(self, period):
        pass  # each chunk's minibatches are taken once it is played

    def begin(self, period):
        pass

    def played(self, period, previous):
        """Write a chunk just played into replay, and train the minibatches due at its steps.

        Args:
            period: the Period in progress.
            previous: the agent step before the chunk.
        """
        period.state.held.flush(self.replay)
        self._train(period, period.take_round(previous))

    def check(self):
        pass

    def wait(self, period, abort):
        return True  # every minibatch trained as its chunk was played

    def train_the_rest(self, period, abort):
        """Train, at the run's end, the minibatches still deferred.

        After a straight run's last chunk there are none: its take repaid them. A run resumed
        with its budget cut to its step plays no chunk, so what a refill deferred trains here.

        Args:
            period: the run's last Period.
            abort: unused: nothing trains on another thread.

        Returns:
            True: they are trained (or dropped, with a warning, where replay cannot be
            sampled).
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
