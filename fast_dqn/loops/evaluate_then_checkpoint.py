"""What both loops do at a consistent point: evaluate if an evaluation is due, then write a
checkpoint where one is due, asked for (a stop) or the run ends.

A consistent point is one where the loop's state is whole: between any two steps of the
Nature loop; at a sync point of the fast loop, with the trainer idle and nothing held. The
loops decide when an evaluation is due; this says what happens then, once for both.
"""

from fast_dqn.loops.evaluation import EvaluationInterrupted


class EvaluateThenCheckpoint:
    """evaluator(step): an Evaluator, or None when evaluation is off; checkpoints: a
    Checkpointer, or None."""

    def __init__(self, evaluator, checkpoints):
        self.evaluator, self.checkpoints = evaluator, checkpoints

    def stop_requested(self):
        return self.checkpoints.stop_requested() if self.checkpoints else False

    def evaluate(self, step, state_dict):
        """Play the evaluation of `step`; true when it was played. A stop interrupts it and
        leaves it pending: it keeps no state, so the resumed run plays it again. Any other
        error saves the loop's state (state_dict()), the evaluation still pending, first."""
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
        """Write a checkpoint where one is due, a stop was asked (`stop`, read by the caller
        once, so that the checkpoint and the run's end answer the same request), or at the
        run's `last` step: `finished` there unless its evaluation is still pending."""
        if self.checkpoints and (stop or self.checkpoints.due(step) or last):
            self.checkpoints.save(step, state_dict(), final=last,
                                  finished=last and not eval_pending)
