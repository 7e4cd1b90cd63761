"""benchmarks/evaluation.py, tiny: both variants run the same games and it prints its table."""

import subprocess
import sys

import pytest
from helpers import ROOT, hang_guard

pytestmark = pytest.mark.slow  # a real network on real games


def test_the_evaluation_benchmark_prints_both_variants():
    result = subprocess.run([sys.executable, "-m", "benchmarks.evaluation", "--games=2",
                             "--workers=2", "--repeats=1", "--threads=1"],
                            capture_output=True, text=True, timeout=hang_guard(600), cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 2 and "one at a time" in rows[1] and "2 at once" in rows[2]
    for row in rows[1:]:
        assert float(row.split("|")[3]) > 0  # games/s
