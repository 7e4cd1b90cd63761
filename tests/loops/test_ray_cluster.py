"""The Ray cluster's helpers: importing them, or the modules that check a --ray-address and run
a suite on Ray, must not load Ray (a run that never uses Ray pays nothing for it)."""

import subprocess
import sys

import pytest
from helpers import ROOT, hang_guard

IMPORTERS = ("fast_dqn.loops.ray_cluster", "fast_dqn.run.settings.validation",
             "fast_dqn.suite.cli", "fast_dqn.suite.ray_runs")


def test_the_cluster_helpers_import_without_ray():
    # A fresh interpreter: this one may have loaded Ray for another test.
    code = ("import importlib, sys\n"
            f"for name in {IMPORTERS!r}:\n"
            "    importlib.import_module(name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=hang_guard(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_backend_connects_through_the_cluster_helpers():
    pytest.importorskip("ray")
    from fast_dqn.loops import ray_backend, ray_cluster
    # One connect: the backend's is the helpers' own, not a copy that could drift from it.
    assert ray_backend.connect is ray_cluster.connect
