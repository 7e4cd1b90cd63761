"""What both loops do at a consistent point: evaluate if an evaluation is due, then write a
checkpoint where one is due, asked for (a stop) or the run ends.

A consistent point is one where the loop's state is whole: between any two steps of the
Nature loop; at a sync point of the fast loop, with the trainer idle and nothing held. The
loops decide when an evaluation is due; this says what happens then, once for both.
"""

from fast_dqn.loops.evaluation import EvaluationInterrupted


class EvaluateThenCheckpoint:
    """The evaluation, then the checkpoint, that both loops run at a consistent point.

    Args:
        evaluator: an Evaluator, called with the agent step to evaluate; None when
            evaluation is off.
        checkpoints: a Checkpointer, or None when the run writes no checkpoints.
    """

    def __init__(self, evaluator, checkpoints):
        self.evaluator, self.checkpoints = evaluator, checkpoints

    def stop_requested(self):
        """Whether a stop was asked for (false without checkpoints)."""
        return self.checkpoints.stop_requested() if self.checkpoints else False

    def evaluate(self, step, state_dict):
        """Play the evaluation of `step`.

        A stop interrupts it and leaves it pending: it keeps no state, so the resumed run
        plays it again. Any other error saves the loop's state, the evaluation still
        pending, first.

        Args:
            step: the agent step the evaluation is of.
            state_dict: a callable that returns the loop's state, asked only to save it
                before another error is raised.

        Returns:
            True when the evaluation was played; False when a stop interrupted it.
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

        The checkpoint of the last step is marked finished unless its evaluation is still
        pending.

        Args:
            step: agent steps taken so far, over all samplers.
            state_dict: a callable that returns the loop's state, asked only when a
                checkpoint is written.
            last: whether `step` is the run's last agent step.
            eval_pending: whether the evaluation of `step` is still to be played.
            stop: whether a stop was asked; the caller reads it once, so that the checkpoint
                and the run's end answer the same request.
        """
        if self.checkpoints and (stop or self.checkpoints.due(step) or last):
            self.checkpoints.save(step, state_dict(), final=last,
                                  finished=last and not eval_pending)
