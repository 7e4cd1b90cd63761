"""The agent really learns: CartPole-v1, in both loops and both optimizer families.

- `run_fast_dqn.py` with the `classic` preset (Adam, a greedy evaluation of 10 games every 5k
  agent steps);
- `run_dqn.py` with the same preset but the Nature optimizer: centered RMSProp with the
  summed loss, lr 2.5e-4, epsilon 0.01 (the defaults of `--optimizer rmsprop`).

A seed has learned when one evaluation averages at least 150 over its ten greedy games,
within 20k agent steps. Random actions average 22, and the untrained networks of seeds 0-4
9 to 33, so only a policy that learned to balance the pole gets there. A loop passes when a
majority of its three seeds learn.

Why not CartPole's "solved" (two evaluations in a row of 475): a seed's run is the same every
time on one CPU, but another CPU's float rounding makes it another run, and the runs reach
500 only after 40k to 50k agent steps, between evaluations that fall back to about 100. The
old test asked that of one seed per loop, and on an AVX2-only CPU it failed. Every seed
measured there reached 150 within two evaluations, and a learning rate of 1e-9 keeps every
seed far below it (docs/testing.md has the table).

Each run is stopped with Ctrl-C as soon as it has learned, since the rest of its budget would
prove nothing more, and must then exit cleanly. A seed starts only when the seeds that have
learned and those still running cannot make the majority without it, so a loop that learns
usually costs two runs.
"""

import os
import signal
import subprocess
import time

import pytest
from helpers import ROOT, command, rows, selected

pytestmark = [pytest.mark.slow, pytest.mark.learning]  # real runs: docs/testing.md's tiers, markers

LEARNED = 150  # 4.5 times the best untrained seed (33), and below every seed's best by 10k
BUDGET = 20_000  # every seed measured had learned by 10k; a run that never does ends here
SEEDS = (0, 1, 2)
MAJORITY = 2  # one seed that is slow on some CPU cannot fail the test alone
LOOPS = {"fast": ("run_fast_dqn.py", []),
         "nature": ("run_dqn.py", ["--optimizer=rmsprop", "--lr=2.5e-4"])}


def has_learned(means):
    return any(mean >= LEARNED for mean in means)


def verdict(learned):
    """Whether a loop learned, from the seeds finished so far (True for each that learned):
    None while the seeds left could still change it."""
    if sum(learned) >= MAJORITY:
        return True
    if len(learned) - sum(learned) > len(SEEDS) - MAJORITY:
        return False
    return None


def test_the_criterion_needs_a_majority_of_seeds_over_the_level():
    assert has_learned([90, 151, 100]) and not has_learned([149.9, 22, 10])
    assert verdict([True, True]) is True and verdict([False, True, True]) is True
    assert verdict([False, False]) is False and verdict([True, False, False]) is False
    assert verdict([True]) is None and verdict([True, False]) is None


class LearningRun:
    """One seed's CartPole run in its own directory."""

    def __init__(self, directory, loop, seed):
        script, flags = LOOPS[loop]
        self.loop, self.seed, self.means = loop, seed, []
        self.run_dir, self.output = directory / "run", directory / "output.txt"
        self.stopped = self.cut = False
        directory.mkdir()
        with open(self.output, "w") as log:  # a file, not a pipe nobody reads while it runs
            self.process = subprocess.Popen(
                command(script, ["--env=CartPole-v1", f"--seed={seed}", f"--timesteps={BUDGET}",
                                 f"--logdir={self.run_dir}", *flags]),
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.deadline = time.monotonic() + 900  # a hang guard only

    @property
    def learned(self):
        return has_learned(self.means)

    def check(self):
        """Reads its evaluations and stops it once it has learned; True once it has exited."""
        self.means = evaluation_means(self.run_dir / "eval.csv")
        if self.learned:
            self.stop()
        if time.monotonic() > self.deadline:
            self.kill()
            raise TimeoutError(f"{self.loop} seed {self.seed} still running after 900 s")
        return self.process.poll() is not None

    def stop(self):
        if not self.stopped and self.process.poll() is None:
            self.stopped = True
            self.process.send_signal(signal.SIGINT)  # checkpoints, then exits 128 + 2

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def run_seeds(base, loops, slots):
    """Each loop's finished runs, in seed order, once every loop has its verdict."""
    pending = {loop: list(SEEDS) for loop in loops}
    running, finished = [], {loop: [] for loop in loops}
    try:
        while True:
            open_loops = [loop for loop in loops
                          if verdict([run.learned for run in finished[loop]]) is None]
            for run in running:  # its loop is decided: what it would show changes nothing
                if run.loop not in open_loops:
                    run.cut = True
                    run.kill()
            if not running and not any(pending[loop] for loop in open_loops):
                return {loop: sorted(runs, key=lambda run: run.seed)
                        for loop, runs in finished.items()}
            for loop in sorted(open_loops, key=lambda loop: len(pending[loop]), reverse=True):
                active = [run for run in running if run.loop == loop]
                learned = sum(run.learned for run in finished[loop])
                if pending[loop] and len(running) < slots and learned + len(active) < MAJORITY:
                    seed = pending[loop].pop(0)
                    running.append(LearningRun(base / f"{loop}-{seed}", loop, seed))
            time.sleep(1)
            for run in [run for run in running if run.check()]:
                running.remove(run)
                run.means = evaluation_means(run.run_dir / "eval.csv")
                finished[run.loop].append(run)
    finally:
        for run in running:  # an error, or a test interrupted
            run.kill()


@pytest.fixture(scope="module")
def learning_runs(request, tmp_path_factory):
    """The selected loops' seeds, a few at a time: each run is mostly one busy thread (the
    networks are too small to keep two cores busy), so two side by side on 2 cores end sooner
    than one after the other. Each is seeded, so its outcome does not depend on the others."""
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")  # not on macOS
             else os.cpu_count() or 2)
    slots = max(2, cores // 2)
    return run_seeds(tmp_path_factory.mktemp("cartpole"), selected(request, "loop"), slots)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_majority_of_seeds_learns_cartpole(learning_runs, loop):
    runs = learning_runs[loop]
    for run in runs:
        if run.cut:  # killed once its loop had failed: nothing to check
            continue
        code, output = run.process.returncode, run.output.read_text()
        # A run that ends its budget just as it is stopped exits 0: both are a clean end.
        assert code in ((0, 128 + signal.SIGINT) if run.stopped else (0,)), output[-3000:]
        assert "checkpoint at step" in output
    means = {run.seed: run.means for run in runs}
    assert verdict([run.learned for run in runs]), (
        f"a majority of seeds must reach {LEARNED}; evaluation means by seed: {means}")


def evaluation_means(eval_csv):
    """The means of the evaluations written so far; a row still being written has none yet."""
    if not eval_csv.exists():
        return []
    return [float(row["mean"]) for row in rows(eval_csv) if row.get("mean")]
