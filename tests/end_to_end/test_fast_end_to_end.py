"""Real runs of run_fast_dqn.py on the Pong ROM, with tiny budgets."""

import json
import subprocess
import sys
import textwrap

import pytest
from helpers import (
    TINY_PONG_FAST,
    code_path_env,
    flags,
    hang_guard,
    logs,
    rows,
    run,
    run_together,
    selected,
)

from fast_dqn.run.settings.flags import HELP_TOPICS

pytestmark = pytest.mark.slow  # real runs of the scripts: see docs/testing.md's tiers

TINY_FAST = flags(TINY_PONG_FAST)


def test_fast_tiny_pong_with_4_workers_is_reproducible(tmp_path):
    results = run_together(*[("run_fast_dqn.py", TINY_FAST + ["--seed=5",
                                                              f"--logdir={tmp_path / name}"])
                             for name in "ab"])
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    a, b = logs(tmp_path / "a"), logs(tmp_path / "b")
    episodes, evals = a
    # 4 samplers x 600 steps with a 300-step limit: every sampler ends at least 2 games.
    assert len(episodes) >= 8
    assert [int(e["agent_step"]) for e in evals] == [1200, 2400]
    assert a == b  # concurrent + synchronized, yet identical
    # Where the trainer gathers, and K: said at start-up, and recorded as resolved for the
    # device that trains (a CPU: host, 16).
    assert "replay: 0." in results[0].stdout
    assert "GiB in RAM; the trainer trains 16 minibatches per compiled call (--updates-per-call)" \
        in results[0].stdout
    assert "Keras backend: tensorflow; precision: float32\n" in results[0].stdout
    saved = json.loads((tmp_path / "a" / "config.json").read_text())
    assert saved["replay_device"] == "host" and saved["updates_per_call"] == 16
    # ... and the seed is what makes them so: another seed plays other games.
    assert vector_game(5) != vector_game(6)


def vector_game(seed):
    """The first frames that the vector env's 4 games show under a fixed action sequence."""
    import numpy as np

    from fast_dqn.envs.samplers import VectorSamplers
    from fast_dqn.run.components import env_settings
    from fast_dqn.run.settings.hyperparameters import FastConfig
    samplers = VectorSamplers(env_settings(FastConfig(game="pong")), 4, seed=seed, num_threads=2)
    frames = [samplers.reset()]
    for a in range(300):
        frames.append(samplers.step(np.full(4, a % 6)).observations)
    samplers.close()
    return np.stack(frames).tobytes()


OTHER_MODES = {"python-lockstep": ["--env-backend=python", "--concurrent=False"],
               "unsynchronized": ["--synchronize=0", "--no-prefetch"],
               # the DQN extensions on the vector backend; the precision is added per machine
               "extensions": ["--double", "--dueling", "--n-step=3"]}


UNSYNCHRONIZED = dict(workers=3, prepopulate=300)


def native_precision():
    """bfloat16 where this machine computes it, else float32: the CLI refuses bfloat16 where it
    would be emulated (test_presets_and_env checks that refusal on the real hardware)."""
    from fast_dqn.agent.backend_setup import computes_bfloat16
    return "bfloat16" if computes_bfloat16() else "float32"


@pytest.fixture(scope="module")
def other_mode_runs(request, tmp_path_factory):
    """The selected modes' runs, side by side (see helpers.BackgroundRun)."""
    base, modes = tmp_path_factory.mktemp("modes"), selected(request, "mode")
    mode_flags = {mode: OTHER_MODES[mode] for mode in modes}
    if "extensions" in mode_flags:
        mode_flags["extensions"] = mode_flags["extensions"] + [
            f"--precision={native_precision()}"]
    # Half the budget of the other fast runs, and games cut at 150 steps: 2 per sampler. The
    # unsynchronized run takes any worker count: 3, which does not divide the target period
    # of 400 (a synchronized run refuses that), with a warm-up of 300.
    short = dict(TINY_PONG_FAST, timesteps=1200, max_episode_steps=150)
    settings = {mode: dict(short, **UNSYNCHRONIZED) if mode == "unsynchronized" else short
                for mode in modes}
    results = run_together(*[("run_fast_dqn.py", flags(settings[mode]) + mode_flags[mode]
                              + [f"--logdir={base / mode}"]) for mode in modes])
    return {mode: (result, base / mode) for mode, result in zip(modes, results)}


@pytest.mark.parametrize("mode", list(OTHER_MODES))
def test_fast_other_modes_run(other_mode_runs, mode):
    result, logdir = other_mode_runs[mode]
    assert result.returncode == 0, result.stderr[-3000:]
    workers = UNSYNCHRONIZED["workers"] if mode == "unsynchronized" else 4
    assert len(rows(logdir / "episodes.csv")) >= 2 * workers
    if mode == "unsynchronized":  # 3 workers to the budget, the Nature number of minibatches
        from fast_dqn.loops.minibatch_schedule import minibatches_due
        from fast_dqn.run.storage.checkpoint import CheckpointStore
        config = json.loads((logdir / "config.json").read_text())
        assert (config["workers"], config["synchronize"]) == (3, False)
        final = CheckpointStore(str(logdir)).latest()
        assert final.step == 1200
        assert int(final.load_state()["learner"]["optimizer"][0]) == minibatches_due(
            0, 1200, 300, 4)
        steps = [int(row["agent_step"]) for row in rows(logdir / "episodes.csv")]
        assert steps == sorted(steps) and steps[-1] <= 1200
    if mode == "extensions":  # in bfloat16 where the hardware computes it, else float32
        config = json.loads((logdir / "config.json").read_text())
        assert (config["double"], config["dueling"], config["n_step"], config["precision"]) == (
            True, True, 3, native_precision())


FAULTY_RUN = textwrap.dedent("""
    import sys
    from fake_ale import FakeAtariEnv
    from fast_dqn.envs.environment import SeedOnFirstReset, wrap_atari
    from fast_dqn.envs.samplers import PythonSamplers
    from fast_dqn.loops.experience import LocalBackend
    from fast_dqn.run import cli, components, training
    from fast_dqn.run.run_kinds import FAST

    class FaultyAle(FakeAtariEnv):
        def step(self, action):
            if len(self.actions) > 2000:  # every frame since the start, across games
                raise OSError("injected emulator fault")
            return super().step(action)

    def samplers(config):
        return LocalBackend(PythonSamplers([SeedOnFirstReset(wrap_atari(
            FaultyAle(game_over_frame=500), components.env_settings(config), True), i)
            for i in range(config.workers)]))

    sys.exit(cli.main(FAST, sys.argv[1:],
                      train=lambda c, **kw: training.train_fast(c, samplers, **kw)))
""")


@pytest.mark.faults
def test_a_sampler_fault_in_a_real_run_exits_non_zero_with_the_traceback(tmp_path):
    script = tmp_path / "faulty.py"
    script.write_text(FAULTY_RUN)
    result = subprocess.run(
        [sys.executable, str(script), "--workers=2", "--timesteps=100000", "--prepopulate=100",
         "--replay-capacity=5000", "--target-update-freq=200", "--evaluate=0",
         f"--logdir={tmp_path / 'run'}"],
        capture_output=True, text=True, timeout=hang_guard(180), env=code_path_env())
    assert result.returncode != 0
    assert "injected emulator fault" in result.stderr and "Traceback" in result.stderr


# One bad flag through the real script; the others are test_bad_input's, in process.
def test_fast_bad_input_is_one_line(tmp_path):
    result = run("run_fast_dqn.py", ["--workers=0", f"--logdir={tmp_path / 'run'}"], timeout=60)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "--workers" in result.stderr
    assert not (tmp_path / "run").exists()


def test_fast_help_explains_each_mode():
    result = run("run_fast_dqn.py", ["--help"], timeout=60)
    flat = " ".join(result.stdout.split())
    for flag in ("--workers", "--concurrent", "--no-concurrent", "--synchronize",
                 "--no-synchronize", "--env-backend", "--prefetch", "--timesteps", "--game"):
        assert flag in flat
    assert "(default: 8 samplers)" in flat
    # Grouped by topic, in order, each flag under its own topic.
    topics = [line.rstrip(":") for line in result.stdout.splitlines()
              if line and not line.startswith(" ") and line.endswith(":")]
    assert topics == ["options"] + list(HELP_TOPICS)
    ray = result.stdout.split("Ray (--backend ray):")[1].split("run: directory")[0]
    flags = [line.split()[0] for line in ray.splitlines() if line.startswith("  --")]
    assert "--num-samplers" in flags and "--workers" not in flags
