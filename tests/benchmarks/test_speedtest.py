"""benchmarks/speedtest.py --quick: every configuration runs and reports sane figures."""

import csv
import subprocess
import sys

import pytest
from helpers import ROOT, hang_guard

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers


def test_speedtest_quick(tmp_path):
    out = tmp_path / "speed.csv"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.speedtest", "--quick",
         f"--csv={out}"], capture_output=True, text=True, timeout=hang_guard(600), cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    # The header says which backend and device trained (the figures mean nothing without).
    assert "device: " in result.stdout and "Keras backend: " in result.stdout
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 5  # header + nature, two fast modes, two ceilings
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert {r["name"] for r in rows} == {"nature", "fast-2-on-on", "fast-2-off-off", "learner",
                                         "samplers-2"}
    busy = [float(r["trainer_busy"]) for r in rows if r["name"] == "fast-2-on-on"]
    assert busy and all(0 < b <= 1 for b in busy)  # the concurrent trainer's share of the time
    for r in rows:
        assert float(r["steps_per_s"]) > 1 and float(r["peak_rss_mb"]) > 100
        assert float(r["min"]) <= float(r["steps_per_s"]) <= float(r["max"])
