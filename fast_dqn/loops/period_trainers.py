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
    """Drives a BackgroundTrainer (fast_dqn.loops.background_trainer) period by period."""

    def __init__(self, background):
        self.background = background

    def hand_out(self, period):
        period.hand_out()

    def begin(self, period):
        """The trainer starts on what the period owes, each minibatch once its step is
        played."""
        if period.minibatches:
            period.mark_start()
            self.background.start(period.minibatches, unplayed=period.unplayed())

    def played(self, period, previous):
        """A chunk was played: release the minibatches of its steps."""
        self.background.pace(period.unplayed())
        self.background.check()

    def check(self):
        self.background.check()

    def wait(self, period, abort):
        """Block until the period's minibatches are trained; False, at once, when abort()
        turns true first."""
        # The period is played: whatever it owes may train (never wait on a release that no
        # further step would bring).
        self.background.pace(0)
        if not self.background.wait(abort=abort):
            return False
        period.trained_all()
        return True

    def train_the_rest(self, period, abort):
        """At the run's end, after the last flush: train what no later period will, on
        replay as the flush left it."""
        if period.hand_out_the_rest():
            self.begin(period)
            self.wait(period, abort)

    def interrupt(self, period):
        """Stop after the minibatch in training; the period then owes the rest."""
        if period.minibatches:
            period.rewind(self.background.interrupt())


class LockstepTrainer:
    """Trains each chunk's minibatches right after it, on the loop's thread."""

    def __init__(self, learner, replay, settings, monitor):
        """learner: trains the main network; replay: the ReplayMemory it samples;
        settings: the loop's LoopSettings; monitor: hears each loss and keeps the console
        going."""
        self.learner, self.replay, self.settings, self.monitor = learner, replay, settings, monitor

    def hand_out(self, period):
        pass  # each chunk's minibatches are taken once it is played

    def begin(self, period):
        pass

    def played(self, period, previous):
        """A chunk took the loop from agent step `previous`: write it, and train the
        minibatches due at its steps."""
        state = period.state
        state.held.flush(self.replay)
        final = state.step >= period.total
        for _ in range(period.take_round(previous)):
            self.monitor.record_train(
                *self.learner.train(self.replay.sample(self.settings.batch_size)))
            if final:  # the deferred ones all train here: keep the console going
                self.monitor.tick(state.step, float(self.settings.epsilon(state.step)))

    def check(self):
        pass

    def wait(self, period, abort):
        return True  # every minibatch trained as its chunk was played

    def train_the_rest(self, period, abort):
        pass  # the last chunk's take repaid every deferred minibatch

    def interrupt(self, period):
        pass  # nothing trains between chunks
