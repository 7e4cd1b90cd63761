"""The fast loop's trainer's two functions: draw the next call's K minibatches, and train
them in one compiled call.

Every minibatch's indices are drawn on the host from replay's own RNG, in order, as
ReplayMemory.sample draws them: so a seeded run trains the same minibatches in the same
order whatever K, and a stop's RNG rewind (fast_dqn.loops.period, Period.rewind) stays exact.
Where replay is mirrored on the device (fast_dqn.agent.replay_mirror), only the indices
travel; else the K minibatches are gathered on the host and copied in one transfer.
"""


class TrainCalls:
    """The background trainer's draw and train, over one learner and one replay.

    Args:
        learner: the DQNLearner that trains the main network.
        replay: the ReplayMemory the minibatches are drawn from.
        batch_size: the transitions in one minibatch, B.
        on_device: whether replay is mirrored on the device (--replay-device device), so
            that only the indices travel; `mirror` is then its ReplayMirror, else None.
    """

    def __init__(self, learner, replay, batch_size, on_device):
        self.learner, self.replay, self.batch_size = learner, replay, batch_size
        self.mirror = learner.mirror_replay(replay) if on_device else None

    def draw(self, count):
        """Draw the next `count` minibatches from replay's RNG; replay is only read.

        Reading only is the trainer's rule 1 (fast_dqn.loops.background_trainer).

        Args:
            count: the minibatches to draw, K.

        Returns:
            What `train` takes: a Batch of (K, B, ...) arrays gathered on the host, or, with the
            mirror, the (shards, indices) int arrays, each (K, B).
        """
        shards, idx = self.replay.sample_indices_many(count, self.batch_size)
        if self.mirror is None:
            return self.replay.gather_many(shards, idx)
        # The first draw of a period copies what the last sync point wrote; later ones
        # find nothing new.
        self.mirror.sync()
        return shards, idx

    def train(self, drawn):
        """Train the drawn minibatches in one compiled call, in the order drawn.

        Args:
            drawn: what `draw` returned, for K minibatches.

        Returns:
            A list of K (loss, mean Q) float pairs; a loss or mean Q that is not finite raises
            TrainingDiverged.
        """
        if self.mirror is None:
            losses, mean_qs = self.learner.train_many(drawn)
        else:
            losses, mean_qs = self.learner.train_from_replay(self.mirror, *drawn)
        return list(zip(losses.tolist(), mean_qs.tolist()))
