"""What lets the fast loop stop anywhere and resume as if it never had.

A stop is served at the next round, also while the loop waits for the trainer at a sync point
(fast_dqn.loops.fast_loop). Mid-period, the trainer stops after its current minibatch, and the
checkpoint keeps what is held, the minibatches still owed for the period, and replay's RNG
rewound to where those minibatches will be drawn (PeriodStart). A resume with a smaller
--timesteps takes back the minibatches handed out for steps past the new end
(cut_to_budget). So a resumed run trains, acts and logs exactly as an uninterrupted one.
"""

from fast_dqn.loops.minibatch_schedule import MinibatchSchedule


def cut_to_budget(loop, total, train_freq, evaluates=True):
    """A checkpoint's loop state (a dict) resumed with a smaller budget, ending at `total`:
    the minibatches handed out for steps past it are taken back (none of them was trained:
    the trainer trains a minibatch only once its step is played), and a run already at its
    end plays no further. Done before a refill defers what the checkpoint owed."""
    if loop["trained_through"] > total:
        schedule = MinibatchSchedule.from_loop_state(loop, train_freq)
        loop["owed"] = max(0, loop["owed"] - schedule.pending(total, loop["trained_through"]))
        loop["trained_through"] = total
    if loop["step"] >= total and not loop["boundary"]:
        loop["sync_pending"] = True  # its sync point evaluates, as every run's last one does
    elif loop["step"] >= total and evaluates and loop["last_eval"] != loop["step"]:
        loop["eval_pending"] = True  # cut to a sync point that did not evaluate
    return loop


class PeriodStart:
    """Replay's RNG as the trainer's current period began. The trainer draws the period's
    minibatches from it in order, so a stop that interrupts the period rewinds it and skips
    the minibatches already trained: the resumed run draws the rest exactly as an
    uninterrupted one would."""

    def __init__(self, replay, batch_size):
        self.replay, self.batch_size = replay, batch_size
        self.rng_state = None

    def mark(self):
        """The trainer starts a period now."""
        self.rng_state = self.replay.rng.bit_generator.state

    def rewind(self, trained):
        """The period was interrupted after `trained` minibatches; returns that count."""
        self.replay.rng.bit_generator.state = self.rng_state
        self.replay.skip_samples(trained, self.batch_size)
        return trained
