"""What several test modules share: running the entry scripts, reading their logs, a clock.

Test modules import from here, never from each other."""

import csv
import glob
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The tests' base settings, in one place: each variant is the one before it with what its
# tests need changed. Budgets are small multiples of the periods, so the tests' counts of
# minibatches, sync points and evaluations are exact.
# A real Pong run of either script: warm-up, two target periods per evaluation, two of those.
# Minibatches of 8, not 32: less than half the Nature CNN's CPU time per update, which was
# most of a tiny run's time, and what these runs prove (logs, counts, resumes) is the same at
# any batch size. ε reaches its end within the budget, so that the trained network chooses
# most actions and a comparison of two runs' logs compares what it computed.
TINY_PONG = dict(game="pong", timesteps=1600, prepopulate=400, replay_capacity=1000,
                 evaluate=800, eval_episodes=1, max_episode_steps=300, target_update_freq=200,
                 batch_size=8, eps_decay_steps=600, eps_end=0.05)
# The fast loop's real Pong run: 4 workers.
TINY_PONG_FAST = dict(TINY_PONG, workers=4, timesteps=2400, replay_capacity=2000,
                      target_update_freq=400, evaluate=1200, eps_decay_steps=800)
# CartPole in-process (train_nature / train_fast): an MLP, so each test takes seconds.
TINY_CARTPOLE = dict(env="CartPole-v1", game=None, history_length=1, replay_capacity=2_000,
                     prepopulate=100, batch_size=8, train_freq=4, target_update_freq=200,
                     evaluate=0, checkpoint_freq=0, eps_decay_steps=500, optimizer="adam",
                     lr=1e-3)
# The fast loop over fake samplers and a fake learner (tests/fake_samplers.py).
TINY_FAKE = dict(timesteps=960, prepopulate=100, replay_capacity=4000, target_update_freq=96,
                 train_freq=4, batch_size=8, eps_decay_steps=400, eps_end=0.1, evaluate=0)


def flags(settings):
    """Settings as the command line's flags."""
    return [f"--{name.replace('_', '-')}={value}" for name, value in settings.items()
            if value is not None]


TINY = flags(TINY_PONG)


def code_path_env(base=None):
    """The environment of a child process that runs a generated script: the repository root
    (the package) and tests/ (the fakes) on its PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(
        [ROOT, os.path.join(ROOT, "tests")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                               else []))
    return env


def hang_guard(seconds):
    """A child process's time limit: a guard against a hang, never a speed check.

    `seconds` is ample for the work alone on 2 cores; the limit stretches with the load at
    the start (a suite beside other work ran 10 to 25 times slower), so a slow machine makes
    the suite slow, not red.
    """
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * max(2.0, 1.0 + load)


def command(script, args):
    return [sys.executable, os.path.join(ROOT, script), *args]


def run(script, args, timeout=300):
    return subprocess.run(command(script, args), capture_output=True, text=True,
                          timeout=hang_guard(timeout), cwd=ROOT)


class BackgroundRun:
    """A script run on a thread of its own; result() gives what run() would have returned.

    Independent runs go side by side because each spends much of its time in one busy thread
    (TensorFlow's import, the environment steps), so on 2 cores two or three of them end
    sooner together than one after another. Their logs cannot depend on it: every run is
    seeded, and what the tests compare is exactly what they prove is reproducible. Tests start
    one through conftest's `background` fixture, which kills it if the test fails early."""

    def __init__(self, script, args, timeout=300):
        self.process = subprocess.Popen(command(script, args), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self._done = Future()
        threading.Thread(target=self._communicate, args=(hang_guard(timeout),),
                         daemon=True).start()

    def _communicate(self, timeout):
        try:
            out, err = self.process.communicate(timeout=timeout)
            self._done.set_result(subprocess.CompletedProcess(self.process.args,
                                                              self.process.returncode, out, err))
        except BaseException as error:  # a timeout included: result() raises it in the test
            self.kill()
            self._done.set_exception(error)

    def result(self):
        return self._done.result()

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def run_together(*calls, timeout=300):
    """run() for each (script, args) at once; the CompletedProcesses in the same order."""
    runs = [BackgroundRun(script, args, timeout) for script, args in calls]
    try:
        return [background.result() for background in runs]
    finally:
        for background in runs:  # after a failure, the others stop too
            background.kill()


def selected(request, parameter):
    """The values of `parameter` in the tests of the requesting module that this session runs,
    so a module fixture that starts one run per value starts only the runs asked for."""
    return [item.callspec.params[parameter] for item in request.session.items
            if item.module is request.module and parameter in getattr(
                getattr(item, "callspec", None), "params", {})]


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


def through_checkpoint(state):
    """`state` as a resume reads it back: through the checkpoint's own encoding as data and
    JSON text (fast_dqn.run.storage.state_tree), which refuses anything but data."""
    import json

    from fast_dqn.run.storage.state_tree import from_data, to_data
    document, arrays = to_data(state)
    return from_data(json.loads(json.dumps(document)), arrays)


def read_scalars(logdir):
    """{tag: [(step, value), ...]} from every event file under logdir/tensorboard, as they
    are on disk: the raw records, with no reader's purging of restarts."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    found = {}
    for path in sorted(glob.glob(str(logdir / "tensorboard" / "events.*"))):
        for event in LegacyEventFileLoader(path).Load():
            for value in event.summary.value:
                found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def on_every_minibatch(monkeypatch, hook):
    """hook(learner, batch) before each minibatch a DQNLearner trains, in order: one per call
    (train, the Nature loop's) or K per call (train_many, the fast loop's trainer)."""
    from fast_dqn.agent.batch import Batch
    from fast_dqn.agent.learner import DQNLearner
    train, train_many = DQNLearner.train, DQNLearner.train_many

    def one(self, batch):
        hook(self, batch)
        return train(self, batch)

    def many(self, batches):
        for j in range(len(batches.actions)):
            hook(self, Batch(*(a[j] for a in batches)))
        return train_many(self, batches)
    monkeypatch.setattr(DQNLearner, "train", one)
    monkeypatch.setattr(DQNLearner, "train_many", many)


def wait_for(condition, process, seconds=240):
    """Polls condition() every 0.1 s while process runs; fails if the process ends first or
    seconds pass (a hang guard, not a speed check)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, "the run ended before it could be signalled"
        assert time.monotonic() < deadline
        time.sleep(0.1)


# The Keras dtype policy of each --precision a learner test builds with.
POLICIES = {"float32": None, "bfloat16": "mixed_bfloat16"}


def filled_replay(n_step=1, shards=2, capacity=600, frame_shape=(6, 5), steps=280, seed=0,
                  discount=0.9):
    """A replay of random frames with terminals, cuts and both shards wrapped around."""
    import numpy as np

    from fast_dqn.agent.replay_memory import ReplayMemory
    rng = np.random.default_rng(seed)
    replay = ReplayMemory(capacity, frame_shape, 4, seed=seed + 1, num_shards=shards,
                          n_step=n_step, discount=discount)
    for shard in range(shards):
        for _ in range(steps + 37 * shard):
            replay.add(rng.integers(0, 256, frame_shape, dtype=np.uint8), rng.integers(4),
                       rng.choice([-1.0, 0.0, 0.5, 1.0]), rng.random() < 0.06,
                       rng.random() < 0.1, shard=shard)
    return replay
