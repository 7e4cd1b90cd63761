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

import shutil

import numpy as np

from fast_dqn.run.storage.array_file import CorruptFile
from fast_dqn.run.storage.checkpoint import CheckpointStore, UnsupportedFormat
from fast_dqn.state_schema import RUN, StateMismatch, check_state

FOLDER = "best"


def best_store(run_dir, warn=None):
    return CheckpointStore(run_dir, keep=1, warn=warn, folder=FOLDER)


class BestWeights:
    def __init__(self, run_dir, weights, message=print):
        """weights(): the weights the evaluation just played with, as numpy arrays."""
        self.store = best_store(run_dir, warn=message)
        self.weights = weights
        self.message = message
        self.best = None  # {"step", "mean", "weights"} of the best evaluation so far

    def record(self, step, returns):
        mean = float(np.mean(returns))
        if self.best is not None and mean <= self.best["mean"]:
            return
        self.best = {"step": int(step), "mean": mean,
                     "weights": [np.array(w) for w in self.weights()]}
        self._export()

    def _export(self):
        self.store.save(self.best["step"], {"mean": self.best["mean"],
                                            "weights": self.best["weights"]})

    def state_dict(self):
        return self.best

    def check_state_dict(self, state, step, where="/best"):
        """Raise StateMismatch, changing nothing, unless `state` (as state_dict gives it: the
        best so far, or None) is of this run's network and of an evaluation at or before
        agent step `step`, the checkpoint's. where: its path in the checkpoint."""
        check_state(state, RUN["best"], where)  # the kinds, as every checkpoint's
        if state is None:
            return
        # A later step names an evaluation eval.csv will not have; other shapes, another
        # network, which best/ would export as this run's.
        if state["step"] > step or [np.shape(w) for w in state["weights"]] != [
                np.shape(w) for w in self.weights()]:
            raise StateMismatch(f"{where} is of step {state['step']:,} or of another "
                                f"network's weights, not of this run up to step {step:,}")

    def load_state_dict(self, state):
        """The best as the checkpoint knew it; best/ is made to match."""
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
