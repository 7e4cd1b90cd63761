"""The agent really learns: CartPole-v1, in both loops and both optimizer families.

- `run_fast_dqn.py` with the `classic` preset (Adam, 50k agent steps, a greedy evaluation of
  10 games every 5k);
- `run_dqn.py` with the same preset but the Nature optimizer: centered RMSProp with the
  summed loss, lr 2.5e-4, epsilon 0.01 (the defaults of `--optimizer rmsprop`).

A run passes when two evaluations in a row average at least 475 of CartPole's 500: twenty
greedy games over 5k agent steps of further training, which one lucky evaluation cannot fake.
The test stops the run with Ctrl-C as soon as that happens, since the rest of the budget would
prove nothing more; the run must then exit cleanly. Each seed is fixed and TensorFlow's ops are
deterministic, so the outcome is the same every time.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT, rows

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers


def two_in_a_row(means, threshold=475):
    return any(a >= threshold and b >= threshold for a, b in zip(means, means[1:]))


def test_the_criterion_needs_two_evaluations_in_a_row():
    assert two_in_a_row([100, 480, 500, 200])
    assert not two_in_a_row([500, 100, 500, 100])
    assert not two_in_a_row([500])


@pytest.mark.parametrize("script,seed,flags", [
    ("run_fast_dqn.py", 0, []),
    ("run_dqn.py", 1, ["--optimizer=rmsprop", "--lr=2.5e-4"]),
])
def test_cartpole_is_solved_in_two_evaluations_in_a_row(tmp_path, script, seed, flags):
    run_dir, output = tmp_path / "run", tmp_path / "output.txt"
    with open(output, "w") as log:  # a file, not a pipe nobody reads while it runs
        process = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, script), "--env=CartPole-v1", f"--seed={seed}",
             f"--logdir={run_dir}", *flags],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        means, deadline = [], time.monotonic() + 900
        while process.poll() is None and time.monotonic() < deadline and not two_in_a_row(means):
            time.sleep(1)
            means = evaluation_means(run_dir / "eval.csv")
        stopped = process.poll() is None
        if stopped:
            process.send_signal(signal.SIGINT)  # checkpoints, then exits with 128 + SIGINT
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # A run that ends its budget just as it is stopped exits 0: both are a clean end.
    assert process.returncode in ((0, 128 + signal.SIGINT) if stopped else (0,)), (
        output.read_text()[-3000:])
    assert "checkpoint at step" in output.read_text()
    means = evaluation_means(run_dir / "eval.csv")
    assert two_in_a_row(means), f"evaluation means {means}"


def evaluation_means(eval_csv):
    """The means of the evaluations written so far; a row still being written has none yet."""
    if not eval_csv.exists():
        return []
    return [float(row["mean"]) for row in rows(eval_csv) if row.get("mean")]
