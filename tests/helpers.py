"""What several test modules share: running the entry scripts, reading their logs, a clock.

Test modules import from here, never from each other."""

import csv
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--game=pong", "--timesteps=1600", "--prepopulate=400", "--replay-capacity=1000",
        "--evaluate=800", "--eval-episodes=1", "--max-episode-steps=300",
        "--target-update-freq=200"]


def code_path_env(base=None):
    """The environment of a child process that runs a generated script: the repository root
    (the package) and tests/ (the fakes) on its PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT, os.path.join(ROOT, "tests")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                               else []))
    return env


def run(script, args, timeout=300):
    return subprocess.run([sys.executable, os.path.join(ROOT, script), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def logs(logdir):
    """episodes.csv and eval.csv without their wall-clock column."""
    return tuple([{k: v for k, v in row.items() if k != "hours"} for row in rows(logdir / name)]
                 for name in ("episodes.csv", "eval.csv"))


class FakeClock:
    """A monotonic clock the test moves by setting .t."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t
