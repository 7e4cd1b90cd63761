"""The agent really learns: CartPole-v1, in both loops and both optimizer families.

- `run_fast_dqn.py` with the `classic` preset (Adam, 50k agent steps, a greedy evaluation of
  10 games every 5k);
- `run_dqn.py` with the same preset but the Nature optimizer: centered RMSProp with the
  summed loss, lr 2.5e-4, epsilon 0.01 (the defaults of `--optimizer rmsprop`).

A run passes when two evaluations in a row average at least 475 of CartPole's 500: twenty
greedy games over 5k agent steps of further training, which one lucky evaluation cannot fake.
Both runs go side by side. Each is stopped with Ctrl-C as soon as it meets the criterion, since
the rest of its budget would prove nothing more; it must then exit cleanly. Each seed is fixed
and TensorFlow's ops are deterministic, so the outcome is the same every time.
"""

import signal
import subprocess
import threading
import time

import pytest

from helpers import ROOT, command, rows, selected

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers


def two_in_a_row(means, threshold=475):
    return any(a >= threshold and b >= threshold for a, b in zip(means, means[1:]))


def test_the_criterion_needs_two_evaluations_in_a_row():
    assert two_in_a_row([100, 480, 500, 200])
    assert not two_in_a_row([500, 100, 500, 100])
    assert not two_in_a_row([500])


RUNS = {"fast": ("run_fast_dqn.py", 0, []),
        "nature": ("run_dqn.py", 1, ["--optimizer=rmsprop", "--lr=2.5e-4"])}


class LearningRun:
    """One CartPole run, watched on its own thread: stopped with Ctrl-C once it meets the
    criterion, since the rest of its budget would prove nothing more."""

    def __init__(self, directory, script, seed, flags):
        self.run_dir, self.output = directory / "run", directory / "output.txt"
        with open(self.output, "w") as log:  # a file, not a pipe nobody reads while it runs
            self.process = subprocess.Popen(
                command(script, ["--env=CartPole-v1", f"--seed={seed}",
                                 f"--logdir={self.run_dir}", *flags]),
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.stopped, self.error = False, None
        self.watcher = threading.Thread(target=self._watch, daemon=True)
        self.watcher.start()

    def _watch(self):
        try:
            means, deadline = [], time.monotonic() + 900
            while (self.process.poll() is None and time.monotonic() < deadline
                   and not two_in_a_row(means)):
                time.sleep(1)
                means = evaluation_means(self.run_dir / "eval.csv")
            if self.process.poll() is None:
                self.stopped = True
                self.process.send_signal(signal.SIGINT)  # checkpoints, then exits 128 + 2
            self.process.wait(timeout=120)
        except BaseException as error:  # finish() raises it in the test
            self.error = error
            self.process.kill()

    def finish(self):
        """The run's exit status, once the watcher is done with it."""
        self.watcher.join()
        if self.error is not None:
            raise self.error
        return self.process.wait()

    def kill(self):
        self.process.kill()
        self.watcher.join()


@pytest.fixture(scope="module")
def learning_runs(request, tmp_path_factory):
    """The selected runs start at once: each is mostly one busy thread (the networks are too
    small to keep two cores busy), so side by side on 2 cores they end sooner than one after
    the other. Each is seeded and deterministic, so its outcome does not depend on the other."""
    runs = {name: LearningRun(tmp_path_factory.mktemp(name), *RUNS[name])
            for name in selected(request, "name")}
    yield runs
    for learning_run in runs.values():  # a test that failed or was never reached
        learning_run.kill()


@pytest.mark.parametrize("name", list(RUNS))
def test_cartpole_is_solved_in_two_evaluations_in_a_row(learning_runs, name):
    learning_run = learning_runs[name]
    code, output = learning_run.finish(), learning_run.output.read_text()
    # A run that ends its budget just as it is stopped exits 0: both are a clean end.
    assert code in ((0, 128 + signal.SIGINT) if learning_run.stopped else (0,)), output[-3000:]
    assert "checkpoint at step" in output
    means = evaluation_means(learning_run.run_dir / "eval.csv")
    assert two_in_a_row(means), f"evaluation means {means}"


def evaluation_means(eval_csv):
    """The means of the evaluations written so far; a row still being written has none yet."""
    if not eval_csv.exists():
        return []
    return [float(row["mean"]) for row in rows(eval_csv) if row.get("mean")]
