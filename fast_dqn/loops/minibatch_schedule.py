"""How many minibatches to train, and when: the Nature ratio, kept across a refill of replay.

The Nature loop trains one minibatch every train_freq agent steps once warm-up is over
(agent step > train_start). Both loops train exactly those minibatches over a run, also when
resumes split it.

A run resumed from a checkpoint without replay (--save-replay off) starts with an empty
replay. Training on a few fresh transitions would overfit them, so it pauses for a *refill* of
--prepopulate steps. The minibatches due meanwhile, and those the checkpoint still owed, are
*deferred*: after the refill each minibatch due brings at most one deferred one with it (at
most twice the Nature rate until they are repaid), and whatever is left trains at the run's
last step. Only a run that ends before replay holds a single complete transition drops any,
and says so.
"""


def minibatches_due(start, end, train_start, train_freq):
    """How many minibatches the Nature loop trains at agent steps s in (start, end].

    Args:
        start: the agent step before the first one counted.
        end: the last agent step counted.
        train_start: the last agent step of warm-up; no minibatch is due up to it.
        train_freq: one minibatch per this many agent steps.

    Returns:
        The number of minibatches due, 0 or more.
    """
    low = max(start, train_start)
    return max(0, end // train_freq - low // train_freq)


class MinibatchSchedule:
    """The minibatches each stretch of agent steps trains, with those deferred by a refill.

    Args:
        train_start: the last agent step of warm-up; no minibatch is due up to it.
        train_freq: one minibatch per this many agent steps after warm-up.
        refill_until: no training at agent steps up to this one (a refill of replay).
        deferred: the minibatches owed, to be repaid after the refill.
        warn: a callable told of deferred minibatches left untrained, or None.
    """

    def __init__(self, train_start, train_freq, refill_until=0, deferred=0, warn=None):
        self.train_start = train_start
        self.train_freq = train_freq
        self.refill_until = refill_until
        self.deferred = deferred
        self.warn = warn or (lambda message: None)

    @classmethod
    def from_loop_state(cls, loop, train_freq, warn=None):
        """The schedule a checkpoint's loop state holds (keys a later release adds aside).

        Args:
            loop: the loop state of a checkpoint, whose "schedule" is a state_dict().
            train_freq: one minibatch per this many agent steps after warm-up.
            warn: a callable told of deferred minibatches a run ended without training.

        Returns:
            The MinibatchSchedule.
        """
        saved = loop["schedule"]
        return cls(saved["train_start"], train_freq, saved["refill_until"], saved["deferred"],
                   warn=warn)

    def state_dict(self):
        """The schedule's state for a checkpoint: warm-up, refill and deferred minibatches.

        Returns:
            {"train_start", "refill_until" (agent steps), "deferred" (minibatches)}.
        """
        return {"train_start": self.train_start, "refill_until": self.refill_until,
                "deferred": self.deferred}

    def refill(self, step, prepopulate, owed=0):
        """Replay was emptied at `step`: defer `owed` and pause for `prepopulate` steps.

        Args:
            step: the agent step at which replay is empty.
            prepopulate: the refill, in agent steps, during which nothing is trained.
            owed: the minibatches a checkpoint still owed, added to those deferred.
        """
        self.deferred += owed
        self.refill_until = max(self.refill_until, step + prepopulate)

    def take(self, start, end, final, replay_ready=lambda: True):
        """The number of minibatches to train for agent steps (start, end].

        Args:
            start: the agent step before the first one counted.
            end: the last agent step counted.
            final: whether `end` is the run's last step, where all deferred ones are due.
            replay_ready: says whether replay can be sampled; asked only when something is due.

        Returns:
            The minibatches to train now, due and repaid ones together; 0 when replay is not
            ready (they stay deferred, or are dropped with a warning when final).
        """
        due = minibatches_due(start, end, self.train_start, self.train_freq)
        after_refill = minibatches_due(max(start, self.refill_until), end, self.train_start,
                                       self.train_freq)
        self.deferred += due - after_refill
        repaid = self.deferred if final else min(self.deferred, after_refill)
        self.deferred -= repaid
        count = after_refill + repaid
        if count and not replay_ready():
            if final:
                self.warn(f"{count:,} minibatches were not trained: the run ended before "
                          "replay held a complete transition")
            else:
                self.deferred += count
            return 0
        return count
