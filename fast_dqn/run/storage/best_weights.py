"""The weights of a run's best evaluation, kept beside its latest checkpoint.

Only the latest checkpoint is what training resumes from, but a researcher reports the agent
at its best evaluation (as Stable-Baselines3's EvalCallback keeps best_model): a run whose
score peaks and then falls must not lose the peak. Each evaluation that beats every earlier
one (a higher mean; the first of equal ones is kept) exports the weights it evaluated to
RUN_DIR/best/, a one-deep CheckpointStore, so the export is atomic and verified like a
checkpoint. `python -m fast_dqn.tools.evaluate RUN_DIR --best` plays them.

The best so far, weights included, is also part of every checkpoint. A resume puts best/
back to what its checkpoint knew: an export made after it, by steps that are played again,
would name an evaluation that eval.csv no longer has.
"""

import os
import shutil

import numpy as np

from fast_dqn.run.storage.array_file import CorruptFile
from fast_dqn.run.storage.checkpoint import CheckpointStore, UnsupportedFormat
from fast_dqn.state_schema import RUN, StateMismatch, check_state

FOLDER = "best"


def best_store(run_dir, warn=None):
    """The one-deep CheckpointStore of a run's best/.

    Args:
        run_dir: the run's directory, which holds best/.
        warn: where to report what the store passes over; None: nowhere.

    Returns:
        A CheckpointStore that keeps 1.
    """
    # Only `evaluate --best` reads an export's state; it has no earlier one to fall back on.
    return CheckpointStore(run_dir, keep=1, warn=warn, folder=FOLDER, unfit_fix=(
        f"drop --best, or move {os.path.join(run_dir, FOLDER)} away; the run's next better "
        "evaluation writes a new one"))


class BestWeights:
    """The best evaluation so far and its weights, exported to RUN_DIR/best/ as it improves.

    Args:
        run_dir: the run's directory, which holds best/.
        weights: a function of no arguments: the weights just evaluated, as numpy arrays.
        message: where to say a rollback of best/ on resume.
        identity: the run's game and network ends (fast_dqn.run.training.run_identity), written
            into each export so that a tool can tell another run's best/; None writes none.
    """

    def __init__(self, run_dir, weights, message=print, identity=None):
        self.store = best_store(run_dir, warn=message)
        self.weights = weights
        self.message = message
        self.identity = identity
        self.best = None  # {"step", "mean", "weights"} of the best evaluation so far

    def record(self, step, returns):
        """Keep and export the weights just evaluated if their mean beats every earlier one.

        Args:
            step: the agent step of the evaluation.
            returns: its games' unclipped scores, whose mean is compared.
        """
        mean = float(np.mean(returns))
        if self.best is not None and mean <= self.best["mean"]:
            return
        self.best = {"step": int(step), "mean": mean,
                     "weights": [np.array(w) for w in self.weights()]}
        self._export()

    def _export(self):
        export = {"mean": self.best["mean"], "weights": self.best["weights"]}
        if self.identity is not None:
            export["identity"] = self.identity
        self.store.save(self.best["step"], export)

    def state_dict(self):
        """The best so far, for a checkpoint.

        Returns:
            {"step", "mean", "weights"} of the best evaluation, or None before the first.
        """
        return self.best

    def check_state_dict(self, state, step, where="/best"):
        """Raise StateMismatch, changing nothing, unless `state` fits this run's network and `step`.

        Args:
            state: the best so far, as state_dict gives it (or None).
            step: the checkpoint's agent step; the evaluation must be at or before it.
            where: the state's path in the checkpoint, for the message.
        """
        # The kinds, as every checkpoint's, and finite weights: a NaN there was edited in, and
        # best/ would export it, and the next checkpoint keep it.
        check_state(state, RUN["best"], where)
        if state is None:
            return
        # A later step names an evaluation eval.csv will not have; other shapes, another
        # network, which best/ would export as this run's.
        if state["step"] > step or [np.shape(w) for w in state["weights"]] != [
                np.shape(w) for w in self.weights()]:
            raise StateMismatch(f"{where} is of step {state['step']:,} or of another "
                                f"network's weights, not of this run up to step {step:,}")

    def load_state_dict(self, state):
        """Take the best as the checkpoint knew it; best/ is made to match.

        Args:
            state: the best so far, as state_dict gives it (or None).
        """
        self.best = state
        if self.best is None:
            # No evaluation before the checkpoint: an export is of a step played again.
            shutil.rmtree(self.store.dir, ignore_errors=True)
            return
        try:
            newest = self.store.latest()
        except (CorruptFile, UnsupportedFormat):  # written again below
            newest = None
        if newest is None or newest.step != self.best["step"]:
            # Later exports first: the store keeps the newest step, and this one is older.
            self.store.discard_after(self.best["step"])
            self._export()
            self.message(f"best/ rolled back to step {self.best['step']:,} (mean "
                         f"{self.best['mean']:.2f}), the best evaluation up to the checkpoint; "
                         "later evaluations are played again and may replace it")
