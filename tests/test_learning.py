"""The agent really learns: CartPole-v1, in both loops and both optimizer families.

- `run_fast_dqn.py` with the `classic` preset (Adam, 50k agent steps, a greedy evaluation of
  10 games every 5k);
- `run_dqn.py` with the same preset but the Nature optimizer: centered RMSProp with the
  summed loss, lr 2.5e-4, epsilon 0.01 (the defaults of `--optimizer rmsprop`).

A run passes when two evaluations in a row average at least 475 of CartPole's 500: twenty
greedy games over 5k agent steps of further training, which one lucky evaluation cannot fake.
Each seed is fixed and TensorFlow's ops are deterministic, so the outcome is the same every
time. Each run takes about 2 minutes on 2 cores.
"""

import pytest

from helpers import rows, run

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
    result = run(script, ["--env=CartPole-v1", f"--seed={seed}",
                          f"--logdir={tmp_path / 'run'}", *flags], timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    means = [float(row["mean"]) for row in rows(tmp_path / "run" / "eval.csv")]
    assert len(means) == 10
    assert two_in_a_row(means), f"evaluation means {means}"
