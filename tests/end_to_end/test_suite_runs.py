"""Real suites of tiny Pong and Breakout runs: on this machine, stopped by Ctrl-C and finished
by the same command, a process per run or in run groups; and on a two-node Ray cluster on
loopback, one node killed mid-run.
Each run must finish at its budget exactly once, and nothing may be run twice."""

import csv
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import ROOT, code_path_env, hang_guard

from fast_dqn.run.storage.checkpoint import CheckpointStore

pytestmark = pytest.mark.slow  # real runs: docs/testing.md's tiers

BUDGET = 2_400
RUN_FLAGS = ["--workers=4", "--prepopulate=400", "--replay-capacity=2000", "--evaluate=0",
             "--max-episode-steps=300", "--target-update-freq=400", "--batch-size=8",
             "--checkpoint-freq=800", "--eps-decay-steps=800"]


def suite_command(logdir, *extra):
    return [sys.executable, "-m", "fast_dqn", "suite", "--games", "pong,breakout",
            "--timesteps", str(BUDGET), "--logdir", str(logdir), "--plain", "--interval", "5",
            *extra, "--", *RUN_FLAGS]


def run_dirs(logdir, seeds):
    return [logdir / game / f"seed-{seed}" for game in ("pong", "breakout") for seed in seeds]


def episodes(run_dir):
    with open(run_dir / "episodes.csv", newline="") as f:
        return list(csv.DictReader(f))


def check_finished_once(run_dir):
    """Finished at the budget; its games logged once each, in order; started once."""
    store = CheckpointStore(str(run_dir))
    assert store.steps()[-1] == BUDGET and store.newest_is_finished(), run_dir
    rows = episodes(run_dir)
    assert [int(r["episode"]) for r in rows] == list(range(1, len(rows) + 1))
    steps = [int(r["agent_step"]) for r in rows]
    assert steps == sorted(steps) and steps[-1] <= BUDGET
    log = (run_dir.parent / f"{run_dir.name}.log").read_text()
    # Made once, never again; only a run stopped while it was still starting (no step
    # played, no checkpoint) may be made a second time.
    attempts = log.split("--logdir=")[1:]
    assert all("agent steps" not in a and "step " not in a for a in attempts[:-1]), log[-2000:]
    assert len(attempts) <= 2, log[-2000:]
    return log.count("--resume=")


def stopped_mid_run(command, tmp_path, env):
    """The suite started, and Ctrl-C sent once some run has a checkpoint and has not
    finished; (its exit status, its output)."""
    logdir = tmp_path / "suite"
    out = open(tmp_path / "first.txt", "w")
    first = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 240
        while not any(CheckpointStore(str(d)).steps() for d in run_dirs(logdir, (0, 1))):
            assert first.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "first.txt").read_text()[-3000:]
            time.sleep(0.5)
        first.send_signal(signal.SIGINT)
        code = first.wait(timeout=hang_guard(240))
    finally:
        first.kill()
        out.close()
    return code, (tmp_path / "first.txt").read_text()


def test_a_suite_stopped_by_ctrl_c_is_finished_by_the_same_command(tmp_path):
    logdir = tmp_path / "suite"
    command = suite_command(logdir, "--seeds", "2", "--parallel", "2")
    code, text = stopped_mid_run(command, tmp_path, code_path_env())
    assert code == 128 + signal.SIGINT, text[-3000:]
    assert "SIGINT: stopping every run with a checkpoint" in text
    assert "stopped by SIGINT; " in text and " runs to finish: the same command continues " \
        "it" in text
    stopped = [line.split(":")[0] for line in text.splitlines()
               if re.match(r"\w+/seed-\d+: stopped ", line)]
    saved = [line for line in text.splitlines() if ": stopped with a checkpoint at step " in line]
    assert 1 <= len(saved) <= len(stopped) <= 2
    # Runs not started before the stop were not started after it.
    started = [line.split(":")[0] for line in text.splitlines() if ": started (log:" in line]
    assert len(started) <= 3

    second = subprocess.run(command, capture_output=True, text=True, timeout=hang_guard(600), cwd=ROOT,
                            env=code_path_env())
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "4 of 4 finished" in second.stdout
    resumed = sum(check_finished_once(d) for d in run_dirs(logdir, (0, 1)))
    # Each run stopped with a checkpoint resumed once (one stopped before its run directory
    # was made starts anew); the others never.
    assert len(saved) <= resumed <= len(stopped)

    # Done: the same command again skips every run, and changes no file.
    before = {d: (d / "episodes.csv").read_bytes() for d in run_dirs(logdir, (0, 1))}
    third = subprocess.run(command, capture_output=True, text=True, timeout=hang_guard(300), cwd=ROOT,
                           env=code_path_env())
    assert third.returncode == 0 and "4 finished already, skipped" in third.stdout
    assert ": started" not in third.stdout and ": resumed" not in third.stdout
    assert before == {d: (d / "episodes.csv").read_bytes() for d in run_dirs(logdir, (0, 1))}

    scored = subprocess.run([sys.executable, "-m", "fast_dqn", "plot", str(logdir),
                             "--aggregate", "-o", str(tmp_path / "profile.png")],
                            capture_output=True, text=True, timeout=hang_guard(300), cwd=ROOT)
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert "4 runs of 2 games, each scored at its latest score" in scored.stdout


def test_a_suite_of_run_groups_stopped_by_ctrl_c_is_finished_by_the_same_command(tmp_path):
    """Pong and Breakout (padded) of 2 seeds in groups of 2 under JAX: stopped mid-run, each
    group's runs checkpoint at one step, and the same command resumes them as groups."""
    logdir = tmp_path / "suite"
    command = suite_command(logdir, "--seeds", "2", "--runs-per-process", "2")
    env = code_path_env()
    env["KERAS_BACKEND"] = "jax"
    code, text = stopped_mid_run(command, tmp_path, env)
    assert code == 128 + signal.SIGINT, text[-3000:]
    assert "in groups of 2 runs, one process each" in text
    assert re.search(r"\w+/seed-\d \+ \w+/seed-\d: a group of 2 in one process", text)
    stopped = {}
    for d in run_dirs(logdir, (0, 1)):
        steps = CheckpointStore(str(d)).steps()
        if steps:
            stopped[d] = steps[-1]
    # The group that ran stopped both its runs at one agent step, short of the budget.
    assert len(stopped) == 2 and len(set(stopped.values())) == 1, stopped
    assert 0 < next(iter(stopped.values())) < BUDGET

    second = subprocess.run(command, capture_output=True, text=True, timeout=hang_guard(600), cwd=ROOT,
                            env=env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "4 of 4 finished" in second.stdout
    assert "a group of 2 in one process" in second.stdout
    for d in run_dirs(logdir, (0, 1)):
        store = CheckpointStore(str(d))
        assert store.steps()[-1] == BUDGET and store.newest_is_finished(), d
        rows = episodes(d)
        assert [int(r["episode"]) for r in rows] == list(range(1, len(rows) + 1))
        log = (d.parent / f"{d.name}.log").read_text()
        assert ("resumed from" in log) == (d in stopped), log[-2000:]


RAY_SUITE = textwrap.dedent("""
    import sys, threading, time
    from ray.cluster_utils import Cluster
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    from fast_dqn.suite.cli import main

    logdir, flags = sys.argv[1], sys.argv[2:]
    # The head offers no CPU; each worker node one: each run (one CPU) gets a node of its own.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    doomed = cluster.add_node(num_cpus=1, object_store_memory=150 * 2**20)
    cluster.add_node(num_cpus=1, object_store_memory=150 * 2**20)
    runs = [f"{logdir}/{game}/seed-0" for game in ("pong", "breakout")]

    def kill_a_node():
        # Once both runs have a checkpoint, one node dies: the run on it resumes elsewhere.
        while not all(CheckpointStore(run).steps() for run in runs):
            time.sleep(0.3)
        cluster.remove_node(doomed, allow_graceful=False)
        print("killed a node", flush=True)

    threading.Thread(target=kill_a_node, daemon=True).start()
    try:
        code = main(["--games", "pong,breakout", "--timesteps", "2400", "--backend", "ray",
                     "--ray-address", cluster.address, "--cpus-per-run", "1", "--logdir",
                     logdir, "--plain", "--interval", "10", "--"] + flags,
                    prog="fast-dqn suite")
    finally:
        cluster.shutdown()
    sys.exit(code)
""")


@pytest.mark.ray
def test_a_ray_suite_survives_a_node_that_dies_mid_run(tmp_path):
    pytest.importorskip("ray")
    from ray_tools import environment_without_ray_settings, ray_processes, wait_until_gone
    before = ray_processes()
    logdir = tmp_path / "suite"
    script = tmp_path / "ray_suite.py"
    script.write_text(RAY_SUITE)
    result = subprocess.run([sys.executable, str(script), str(logdir), *RUN_FLAGS],
                            capture_output=True, text=True, timeout=hang_guard(900), cwd=ROOT,
                            env=code_path_env(environment_without_ray_settings()))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "killed a node" in result.stdout and "2 of 2 finished" in result.stdout
    # The run on the dead node resumed from its checkpoint on the other; the other never.
    resumed = sorted(check_finished_once(d) for d in run_dirs(logdir, (0,)))
    assert resumed == [0, 1], result.stdout[-3000:]
    assert not wait_until_gone(before), "the suite left Ray processes behind"


RAY_GROUP_SUITE = textwrap.dedent("""
    import sys
    from ray.cluster_utils import Cluster
    from fast_dqn.suite.cli import main

    logdir, flags = sys.argv[1], sys.argv[2:]
    # The head offers no CPU; one node offers 2: a group of 2 runs of 1 CPU each fits it.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    cluster.add_node(num_cpus=2, object_store_memory=150 * 2**20)
    try:
        code = main(["--games", "pong,breakout", "--timesteps", "2400", "--backend", "ray",
                     "--ray-address", cluster.address, "--cpus-per-run", "1",
                     "--runs-per-process", "2", "--logdir", logdir, "--plain", "--interval",
                     "10", "--"] + flags, prog="fast-dqn suite")
    finally:
        cluster.shutdown()
    sys.exit(code)
""")


@pytest.mark.ray
def test_a_ray_suite_trains_a_run_group_as_one_task(tmp_path):
    pytest.importorskip("ray")
    from ray_tools import environment_without_ray_settings, ray_processes, wait_until_gone
    before = ray_processes()
    logdir = tmp_path / "suite"
    script = tmp_path / "ray_group_suite.py"
    script.write_text(RAY_GROUP_SUITE)
    env = code_path_env(environment_without_ray_settings())
    env["KERAS_BACKEND"] = "jax"
    result = subprocess.run([sys.executable, str(script), str(logdir), *RUN_FLAGS],
                            capture_output=True, text=True, timeout=hang_guard(900), cwd=ROOT, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "in groups of 2 runs, each group a Ray task of 2 CPUs" in result.stdout
    assert "pong/seed-0 + breakout/seed-0: submitted" in result.stdout
    assert "2 of 2 finished" in result.stdout
    for d in run_dirs(logdir, (0,)):
        store = CheckpointStore(str(d))
        assert store.steps()[-1] == BUDGET and store.newest_is_finished(), d
        assert "finished: 2,400 agent steps" in (d.parent / f"{d.name}.log").read_text()
    assert "fast_dqn group" in (logdir / "pong" / "seed-0.group.log").read_text()
    assert not wait_until_gone(before), "the suite left Ray processes behind"
