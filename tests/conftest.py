import os

import pytest

# pyproject.toml puts the repository root and tests/ on sys.path.
from helpers import TINY, BackgroundRun, run

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture
def background():
    """Starts a helpers.BackgroundRun; whatever is still going when the test ends is killed."""
    runs = []

    def start(script, args, timeout=300):
        runs.append(BackgroundRun(script, args, timeout))
        return runs[-1]

    yield start
    for started in runs:
        started.kill()


@pytest.fixture(scope="session")
def tiny_pong_run(tmp_path_factory):
    """run_dqn.py's tiny real Pong run (helpers.TINY, seed 1), made once for every module that
    reads it: a Pong run is the dearest thing a test starts. Tests only read it."""
    logdir = tmp_path_factory.mktemp("runs") / "pong"
    result = run("run_dqn.py", TINY + ["--seed=1", f"--logdir={logdir}"])
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir
