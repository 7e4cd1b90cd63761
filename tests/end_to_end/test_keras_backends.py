"""The learner on every installed Keras backend: the same math on each, runs that carry over
between them, and a JAX run where TensorFlow cannot even be imported.

Keras fixes its backend when it is first imported, so each backend's checks run in a child
process with its own KERAS_BACKEND."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
from helpers import ROOT, TINY_CARTPOLE, code_path_env, flags, hang_guard
from ray_tools import environment_without_ray_settings, ray_processes, wait_until_gone

from fast_dqn.run.storage.checkpoint import CheckpointStore

pytestmark = pytest.mark.backends  # Keras backends, precision: see docs/testing.md's markers

BACKENDS = ("tensorflow", "jax")
THIS = keras.backend.backend()


def installed(backend):
    return importlib.util.find_spec(backend) is not None


def needs(*backends):
    missing = [b for b in backends if not installed(b)]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} is not installed "
                              "(pip install -e '.[jax]')")


def child(backend, args, block_tensorflow=False, tmp_path=None, timeout=hang_guard(600), base_env=None):
    """python ARGS under KERAS_BACKEND=backend. block_tensorflow puts a `tensorflow` first on
    the path that records any import of it in tmp_path/tensorflow-imported and then fails as
    a missing package does (in every process the child starts, Ray's actors included)."""
    env = code_path_env(base_env)
    env["KERAS_BACKEND"] = backend
    if block_tensorflow:
        blocker = tmp_path / "blocker" / "tensorflow"
        blocker.mkdir(parents=True, exist_ok=True)
        (blocker / "__init__.py").write_text(
            "import traceback\n"
            f"with open({str(tmp_path / 'tensorflow-imported')!r}, 'a') as f:\n"
            "    traceback.print_stack(file=f)\n"
            "raise ImportError('No module named tensorflow (blocked by the test)')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(blocker.parent), env["PYTHONPATH"]])
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)


@pytest.mark.slow  # the learner's tests again, in a child process: about a minute and a half
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != THIS])
def test_the_learner_tests_pass_on_the_other_backend(backend):
    """The hand-computed TD targets, Huber gradients, Double DQN, n-step discounts, float16
    loss scaling and the Nature-rule update within 2% per tensor, K fused updates against K
    single ones, each compile choice against the default, and the device gather against
    numpy's: the same files, on the backend this process does not run."""
    if not installed(backend):
        pytest.skip(f"{backend} is not installed (pip install -e '.[jax]')")
    result = child(backend, ["-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/agent/test_learner.py", "tests/agent/test_fused_updates.py",
                             "tests/agent/test_update_variants.py",
                             "tests/agent/test_backend_setup.py"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout


# A run group's tests: JAX's alone (fast_dqn.agent.run_group). Their TensorFlow refusals run
# in this process; the child runs all the rest.
GROUP_TESTS = ("tests/agent/test_run_group.py", "tests/run/test_group_training.py",
               "tests/run/test_group_cli.py")


@pytest.mark.slow  # a JAX child: about five minutes, most of it the group's real runs
@needs("jax")
@pytest.mark.skipif(THIS == "jax", reason="this process runs them itself")
def test_the_run_group_tests_pass_under_jax():
    """G updates in one call against G ordinary ones, padded and masked heads, each run of a
    group against its ordinary run (CartPole, and Pong with Breakout on real ROMs), resumes
    as a group and alone, a diverged and a damaged run left out, the command line's group."""
    result = child("jax", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                           *GROUP_TESTS], timeout=hang_guard(1500))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    # Only the refusals that are TensorFlow's skip under JAX.
    skipped = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert " passed" in result.stdout and all("TensorFlow's" in line for line in skipped), \
        result.stdout[-3000:]


CARTPOLE = flags(dict(TINY_CARTPOLE, timesteps=600, checkpoint_freq=300, evaluate=300,
                      eval_episodes=2))

# Loads the run's newest checkpoint into a learner on this process's backend, and prints what
# it holds once loaded, and its Q-values of fixed states.
PROBE = """
import json, sys
import numpy as np
from fast_dqn.run.storage.checkpoint import latest_checkpoint
from fast_dqn.run.components import build_learner
from fast_dqn.run.settings.hyperparameters import Config
from fast_dqn.run.resume import saved_values
from fast_dqn.run.settings.validation import resolve
from fast_dqn.run.storage.run_directory import load_run_config
saved = load_run_config(sys.argv[1], "RUN_DIR")
config = Config(**saved_values(saved, Config))
checkpoint = latest_checkpoint(sys.argv[1], "RUN_DIR")
state = checkpoint.load_state()["learner"]
learner = build_learner(resolve(config), (1, 4), 2)
learner.load_state_dict(state)
loaded = learner.state_dict()
states = np.random.default_rng(0).normal(size=(16, 1, 4)).astype(np.float32)
print(json.dumps({
    "step": checkpoint.step,
    "exact": all(np.array_equal(a, b) for part in ("main", "target", "optimizer")
                 for a, b in zip(state[part], loaded[part])),
    "sizes": [len(state[part]) for part in ("main", "target", "optimizer")],
    "minibatches": learner.minibatches_trained(),
    "q": learner.q_values(states).tolist(),
    "target_q": learner.target_q_values(states).tolist()}))
"""


def probe(backend, run_dir):
    result = child(backend, ["-c", PROBE, str(run_dir)])
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def same_on_both(run_dir, minibatches):
    """The run's newest checkpoint read on both backends: every weight and optimizer slot
    loads exactly on each, the optimizer counts the same minibatches, and the networks agree
    to float32 rounding (the backends' kernels differ)."""
    tf_side, jax_side = probe("tensorflow", run_dir), probe("jax", run_dir)
    assert tf_side["exact"] and jax_side["exact"]
    assert tf_side["sizes"] == jax_side["sizes"] and jax_side["sizes"][2] > 2
    assert tf_side["minibatches"] == jax_side["minibatches"] == minibatches
    np.testing.assert_allclose(jax_side["q"], tf_side["q"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jax_side["target_q"], tf_side["target_q"], rtol=1e-5, atol=1e-5)


def resume_on(backend, run_dir, timesteps):
    resumed = child(backend, ["run_dqn.py", "--resume", str(run_dir), f"--timesteps={timesteps}"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Keras backend: {backend}" in resumed.stdout and "resumed from" in resumed.stdout
    assert CheckpointStore(str(run_dir)).latest().step == timesteps


# One run that crosses both ways: started on TensorFlow, resumed on JAX, resumed again on
# TensorFlow; each checkpoint read on both backends, the last evaluated on JAX.
@pytest.mark.slow  # three runs, four probes and an evaluation, each a process of its own
@needs(*BACKENDS)
@pytest.mark.faults
def test_a_run_resumes_on_the_other_backend_with_the_same_networks_and_optimizer(tmp_path):
    run_dir = tmp_path / "run"
    started = child("tensorflow", ["run_dqn.py", *CARTPOLE, f"--logdir={run_dir}"])
    assert started.returncode == 0, started.stderr[-3000:]
    assert "Keras backend: tensorflow" in started.stdout
    same_on_both(run_dir, (600 - 100) // 4)
    resume_on("jax", run_dir, 900)
    same_on_both(run_dir, (900 - 100) // 4)
    resume_on("tensorflow", run_dir, 1200)
    # Evaluate loads the run on the backend that did not write its checkpoint.
    evaluated = child("jax", ["-m", "fast_dqn.tools.evaluate", str(run_dir), "--episodes=1"])
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]


def episodes(run_dir):
    lines = (run_dir / "episodes.csv").read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, name in enumerate(header) if name != "hours"]  # wall-clock: not seeded
    return [[row.split(",")[i] for i in keep] for row in lines]


@pytest.mark.slow  # real runs of both loops and both tools under JAX
@needs("jax")
def test_jax_runs_everything_without_tensorflow(tmp_path):
    """Both loops, evaluation, the evaluate and plot tools, with `import tensorflow` failing
    (and recorded): TensorBoard's writer and the whole package do without it. The same seed
    gives the same games twice."""
    nature, fast = tmp_path / "nature", tmp_path / "fast"
    for script, run_dir in (("run_dqn.py", nature), ("run_fast_dqn.py", fast)):
        result = child("jax", [script, *CARTPOLE, f"--logdir={run_dir}"]
                       + (["--workers=2"] if script == "run_fast_dqn.py" else []),
                       block_tensorflow=True, tmp_path=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "device: CPU (JAX found no GPU); Keras backend: jax" in result.stdout
        assert list((run_dir / "tensorboard").iterdir())
    again = tmp_path / "again"
    result = child("jax", ["run_dqn.py", *CARTPOLE, f"--logdir={again}"],
                   block_tensorflow=True, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert episodes(again) == episodes(nature) and len(episodes(nature)) > 10
    for tool in (["-m", "fast_dqn.tools.evaluate", str(fast), "--episodes=2"],
                 ["-m", "fast_dqn.tools.plot", str(nature), str(fast),
                  f"--output={tmp_path / 'curves.png'}"]):
        result = child("jax", tool, block_tensorflow=True, tmp_path=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "curves.png").stat().st_size > 0
    imported = tmp_path / "tensorflow-imported"
    assert not imported.exists(), imported.read_text()[-3000:]


@pytest.mark.slow  # a private Ray cluster, two sampler actors: about a minute
@needs("jax")
@pytest.mark.ray
def test_jax_runs_the_ray_backend_without_tensorflow(tmp_path):
    before = ray_processes()
    run_dir = tmp_path / "run"
    result = child("jax", ["run_fast_dqn.py", "--game=pong", "--backend=ray",
                           "--num-samplers=2", "--envs-per-sampler=2", "--rollout-steps=64",
                           "--prepopulate=512", "--replay-capacity=4096",
                           "--target-update-freq=512", "--max-episode-steps=300",
                           "--evaluate=0", "--ray-object-store-mb=200", "--timesteps=1536",
                           f"--logdir={run_dir}"],
                   block_tensorflow=True, tmp_path=tmp_path,
                   base_env=dict(environment_without_ray_settings(), HOME=str(tmp_path)))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Keras backend: jax" in result.stdout
    assert (run_dir / "checkpoints" / "step-000000001536").is_dir()
    assert "os.fork() was called" not in result.stderr  # Ray's fork-and-exec start-up
    imported = tmp_path / "tensorflow-imported"
    assert not imported.exists(), imported.read_text()[-3000:]
    assert not wait_until_gone(before)


@needs("jax")
def test_xla_is_told_its_settings_before_the_first_question_to_jax(tmp_path):
    """Preallocation off (TF's memory growth) and deterministic GPU kernels must be in the
    environment when XLA's client starts; --precision auto starts it while the flags are
    validated, before the backend is configured. The child checks the environment at the
    moment JAX starts its clients, and that they did start."""
    script = (
        "import os\n"
        "import jax._src.xla_bridge as bridge\n"
        "start = bridge.backends\n"
        "seen = []\n"
        "def starting():\n"
        "    seen.append((os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'),\n"
        "                 os.environ.get('XLA_FLAGS')))\n"
        "    return start()\n"
        "bridge.backends = starting\n"
        "from fast_dqn.agent.backend_setup import computes_bfloat16\n"
        "computes_bfloat16()\n"  # the first question to JAX, as --precision auto asks it
        "assert bridge.backends_are_initialized()\n"
        "print(*seen[0])\n")
    env = dict(os.environ, XLA_FLAGS="--xla_dump_to=" + str(tmp_path / "dump"))
    env.pop("XLA_PYTHON_CLIENT_PREALLOCATE", None)
    result = child("jax", ["-c", script], base_env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    # The user's own XLA_FLAGS are kept.
    assert result.stdout.split() == ["false", f"--xla_dump_to={tmp_path / 'dump'}",
                                     "--xla_gpu_deterministic_ops=true"]


@pytest.mark.slow  # four real runs, each a process of its own: about 40 s
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_checkout_and_a_run_directory_under_a_non_utf8_path_train(tmp_path, backend):
    """A copy of the checkout under b"caf\\xe9" (not UTF-8) trains on each backend, into a run
    directory under such a name too: TensorFlow's AutoGraph and JAX's lowering hand the
    package's source file names to C++, which took no such name (a RuntimeError traceback at
    the first train step, and a half-written run directory behind it). Both loops, so each
    compiled call trains: one minibatch (Nature), K of them from replay (fast)."""
    if not installed(backend):
        pytest.skip(f"{backend} is not installed (pip install -e '.[jax]')")
    checkout = tmp_path / "caf\udce9"  # os.fsencode: b"caf\xe9"
    shutil.copytree(os.path.join(ROOT, "fast_dqn"), checkout / "fast_dqn",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for script in ("run_dqn.py", "run_fast_dqn.py"):
        shutil.copy(os.path.join(ROOT, script), checkout)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's package
    env["KERAS_BACKEND"] = backend
    for script, extra in (("run_dqn.py", []),
                          ("run_fast_dqn.py", ["--workers=2", "--updates-per-call=4"])):
        run_dir = tmp_path / f"r\udce9n-{script}"
        result = subprocess.run([sys.executable, script, *CARTPOLE, f"--logdir={run_dir}",
                                 *extra], capture_output=True, text=True, errors="replace",
                                cwd=checkout, env=env, timeout=hang_guard(300))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert "finished: 600 agent steps" in result.stdout
        assert (run_dir / "checkpoints" / "step-000000000600").is_dir()
