"""What both loops do at a consistent point: evaluate if an evaluation is due, then write a
checkpoint where one is due, asked for (a stop) or the run ends.

A consistent point is one where the loop's state is whole: between any two steps of the
Nature loop; at a sync point of the fast loop, the trainer idle and nothing held.
"""

from fast_dqn.loops.evaluation import EvaluationInterrupted


class EvaluateThenCheckpoint:
    """The evaluation, then the checkpoint; either part may be None (off)."""

    def __init__(self, evaluator, checkpoints):
        self.evaluator, self.checkpoints = evaluator, checkpoints

    def stop_requested(self):
        """Whether a stop was asked for (false without checkpoints)."""
        return self.checkpoints.stop_requested() if self.checkpoints else False

    def evaluate(self, step, state_dict):
        """Play the evaluation of `step`; False when a stop interrupted it, leaving it pending.

        The evaluation keeps no state, so the resumed run plays it again. Any other error first
        checkpoints the loop's state (`state_dict()`), the evaluation still pending.
        """
        try:
            self.evaluator(step)
            return True
        except EvaluationInterrupted:
            return False
        except Exception:
            if self.checkpoints:
                self.checkpoints.save(step, state_dict())
            raise

    def checkpoint(self, step, state_dict, last, eval_pending, stop):
        """Write a checkpoint where one is due, a stop was asked, or at the run's last step.

        The last step's checkpoint is marked finished unless its evaluation is still pending.
        `state_dict` is called only when a checkpoint is written. The caller reads `stop` once, so
        that the checkpoint and the run's end answer the same request.
        """
        if self.checkpoints and (stop or self.checkpoints.due(step) or last):
            self.checkpoints.save(step, state_dict(), final=last,
                                  finished=last and not eval_pending)
