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


@pytest.fixture(scope="session")
def finished_cartpole_run(tmp_path_factory):
    """A tiny finished Nature CartPole run, in process (helpers.TINY_CARTPOLE, 600 steps), with
    checkpoints at 300 and 600, no evaluation and no best/. Tests copy it before changing it."""
    from helpers import TINY_CARTPOLE, flags

    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import NATURE
    logdir = tmp_path_factory.mktemp("finished") / "cartpole"
    assert cli.main(NATURE, flags(dict(TINY_CARTPOLE, timesteps=600, checkpoint_freq=300,
                                       logdir=str(logdir)))) == 0
    return logdir
