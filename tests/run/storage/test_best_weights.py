"""The best evaluation's weights: exported when beaten, kept in checkpoints, and put back on
resume so that best/ always names an evaluation that eval.csv has."""

import os

import numpy as np
from helpers import through_checkpoint

from fast_dqn.run.storage.best_weights import BestWeights, best_store


class Network:
    def __init__(self):
        self.version = 0

    def weights(self):
        return [np.full((2, 2), self.version, np.float32), np.arange(3.0) + self.version]


def exported(run_dir):
    best = best_store(str(run_dir)).latest()
    state = best.load_state()
    return best.step, state["mean"], float(state["weights"][0][0, 0])


def test_each_better_evaluation_exports_the_weights_it_played_with(tmp_path):
    network, said = Network(), []
    best = BestWeights(str(tmp_path), network.weights, said.append)
    for step, returns in ((100, [1, 3]), (200, [5, 5]), (300, [4, 6]), (400, [-1, 0])):
        network.version = step
        best.record(step, returns)
    # 300 ties 200 (mean 5): the first of equal ones is kept.
    assert exported(tmp_path) == (200, 5.0, 200.0)
    assert os.listdir(tmp_path / "best") == ["step-000000000200"]  # one deep
    assert best.state_dict()["step"] == 200 and said == []


def test_a_resume_puts_best_back_to_what_its_checkpoint_knew(tmp_path):
    network, said = Network(), []
    best = BestWeights(str(tmp_path), network.weights, said.append)
    network.version = 100
    best.record(100, [2.0])
    saved = through_checkpoint(best.state_dict())     # the checkpoint at step 150
    network.version = 200
    best.record(200, [9.0])                           # then kill -9: step 200 is redone
    assert exported(tmp_path)[0] == 200
    resumed = BestWeights(str(tmp_path), network.weights, said.append)
    resumed.load_state_dict(saved)
    assert exported(tmp_path) == (100, 2.0, 100.0)
    assert said == ["best/ rolled back to step 100 (mean 2.00), the best evaluation up to the "
                    "checkpoint; later evaluations are played again and may replace it"]
    # A checkpoint from before any evaluation: an export since is of a step played again.
    BestWeights(str(tmp_path), network.weights).load_state_dict(None)
    assert not os.path.exists(tmp_path / "best")
    resumed.load_state_dict(saved)                    # and matching ones are left alone
    said.clear()
    resumed.load_state_dict(saved)
    assert said == [] and exported(tmp_path)[0] == 100


def test_the_best_refuses_a_saved_best_of_a_later_step_or_another_network(tmp_path):
    """Checked before anything is loaded (fast_dqn.run.training orders the calls): best/ and
    the best in memory stay as they were."""
    import pytest

    from fast_dqn.state_schema import StateMismatch
    network, said = Network(), []
    best = BestWeights(str(tmp_path), network.weights, said.append)
    network.version = 100
    best.record(100, [2.0])
    saved = through_checkpoint(best.state_dict())
    best.check_state_dict(saved, 150)  # its own, of a step before the checkpoint's, fits
    best.check_state_dict(None, 150)   # as does no evaluation yet
    for edited, expected in [
            ({**saved, "step": 200}, "/best is of step 200 or of another network's weights, "
             "not of this run up to step 150"),
            ({**saved, "weights": saved["weights"][::-1]}, "/best is of step 100 or of "
             "another network's weights"),
            ({**saved, "weights": saved["weights"][:1]}, "/best is of step 100"),
            ({**saved, "mean": "high"}, "/best/mean is 'high', not a number"),
            (3, "/best is 3, not null or an object"),
            # Only finite weights are ever recorded: a NaN or an infinity was edited in.
            ({**saved, "weights": [saved["weights"][0], np.array([0.0, np.nan, 2.0])]},
             "/best/weights/1 holds a NaN or an infinity"),
            ({**saved, "weights": [np.full((2, 2), -np.inf, np.float32), saved["weights"][1]]},
             "/best/weights/0 holds a NaN or an infinity")]:
        with pytest.raises(StateMismatch) as refused:
            best.check_state_dict(edited, 150)
        assert expected in str(refused.value)
    assert best.state_dict() is not None and best.state_dict()["step"] == 100
    assert exported(tmp_path) == (100, 2.0, 100.0) and said == []


def test_an_export_holding_a_nan_is_named_damaged_and_best_is_dropped_not_lower_lr(tmp_path):
    """What `evaluate --best` reads of best/ (BEST_EXPORT): a NaN there was edited in after
    the export, which blames no divergence and falls back on no other checkpoint."""
    import pytest

    from fast_dqn.state_schema import BEST_EXPORT, StateMismatch
    network = Network()
    best = BestWeights(str(tmp_path), network.weights)
    best.record(100, [2.0])
    export = best_store(str(tmp_path)).latest()
    export.load_state(BEST_EXPORT)  # its own export fits
    state = export.load_state()
    state["weights"][1] = np.array([1.0, np.nan, 3.0])
    best_store(str(tmp_path / "edited")).save(100, state)
    edited = best_store(str(tmp_path / "edited")).latest()
    with pytest.raises(StateMismatch) as refused:
        edited.load_state(BEST_EXPORT)
    assert str(refused.value) == "/weights/1 holds a NaN or an infinity"
    line = edited.unfit_state(refused.value)
    assert line == (f"{edited.path}/state.json does not hold what this fast-dqn writes "
                    "(/weights/1 holds a NaN or an infinity): it was edited, or written by "
                    f"another program; drop --best, or move {tmp_path / 'edited' / 'best'} "
                    "away; the run's next better evaluation writes a new one")
