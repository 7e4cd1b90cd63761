import os

import pytest

# pyproject.toml puts the repository root and tests/ on sys.path.
from helpers import BackgroundRun

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture
def background():
    """Starts a helpers.BackgroundRun; whatever is still going when the test ends is killed."""
    runs = []

    def start(script, args, timeout=300):
        runs.append(BackgroundRun(script, args, timeout))
        return runs[-1]

    yield start
    for run in runs:
        run.kill()
