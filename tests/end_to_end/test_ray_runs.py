"""--backend ray in real runs: a two-node cluster on loopback, and tiny Pong runs through the
command line, stopped by SIGTERM, resumed, and checked to leave no Ray process behind."""

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import ROOT, code_path_env, hang_guard, rows
from ray_tools import environment_without_ray_settings, ray_processes, wait_until_gone

from fast_dqn.run.storage.checkpoint import CheckpointStore

pytestmark = [pytest.mark.slow, pytest.mark.ray]  # real runs: docs/testing.md's tiers, markers

ray = pytest.importorskip("ray")


TWO_NODES = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ray
    from ray.cluster_utils import Cluster
    from fast_dqn.loops.ray_backend import RayBackend
    from fast_dqn.run import components
    from fast_dqn.run.settings import precedence
    from fast_dqn.run.settings.hyperparameters import FastConfig
    from fast_dqn.run.settings.validation import resolve

    # The head (the learner's machine) offers no CPU, so the one-CPU sampler actors can only
    # be placed on the second node: the recipe's `ray start --head --num-cpus=0`. Both nodes
    # listen on this machine's own address (Ray replaces 127.0.0.1 by it when connecting);
    # Linux routes that through the loopback interface, so nothing leaves the machine.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        second = cluster.add_node(num_cpus=2, object_store_memory=200 * 2**20)
        config = resolve(precedence.build_config(
            {"env": "CartPole-v1", "backend": "ray", "num_samplers": 2, "envs_per_sampler": 2,
             "rollout_steps": 8, "ray_address": cluster.address}, FastConfig))
        backend = RayBackend(components.ray_settings(config),
                             *components.ray_sampler_builders(config),
                             log=lambda line: None)
        try:
            nodes = backend.node_ids()
            learner = components.build_learner(config, backend.observation_space.shape, 2)
            backend.start(np.random.default_rng(0))
            backend.act_through(learner.target_q_values, learner.target_weights)
            shards, steps = set(), 0
            while steps < 400:
                chunk = backend.next_chunk(steps, lambda s: np.ones(np.shape(s)))
                if chunk is not None:
                    shards.update(chunk.shards.tolist())
                    steps += chunk.steps
        finally:
            backend.close()
        print(json.dumps({"nodes": nodes, "head": cluster.head_node.node_id,
                          "second": second.node_id, "shards": sorted(shards),
                          "connected_after": ray.is_initialized(),
                          "cluster_alive": cluster.remaining_processes_alive()}))
    finally:
        cluster.shutdown()
""")


def test_samplers_run_on_the_second_node_of_a_two_node_cluster(tmp_path):
    # In its own process: one Python process meets one Ray cluster in real use, and Ray
    # keeps per-process state that a second cluster in the same process trips over.
    before = ray_processes()
    script = tmp_path / "two_nodes.py"
    script.write_text(TWO_NODES)
    env = code_path_env(environment_without_ray_settings())
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=hang_guard(300), env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["second"] != found["head"]
    assert found["nodes"] == [found["second"]] * 2
    assert found["shards"] == [0, 1, 2, 3]
    # The driver disconnected, and left the cluster (the user's) running.
    assert not found["connected_after"] and found["cluster_alive"]
    assert not wait_until_gone(before)


TINY_RAY = ["--game=pong", "--backend=ray", "--num-samplers=2", "--envs-per-sampler=2",
            "--rollout-steps=64", "--prepopulate=512", "--replay-capacity=4096",
            "--target-update-freq=512", "--max-episode-steps=300", "--evaluate=0",
            "--ray-object-store-mb=200", "--batch-size=8"]


def start(argv, home, log):
    env = dict(environment_without_ray_settings(), HOME=str(home), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "run_fast_dqn.py"] + argv, cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.faults
def test_a_tiny_pong_run_on_ray_stops_on_sigterm_resumes_and_leaves_nothing(tmp_path):
    before = ray_processes()
    logdir = tmp_path / "run"
    out = tmp_path / "out.txt"
    with open(out, "w") as log:
        proc = start(TINY_RAY + ["--timesteps=1000000", f"--logdir={logdir}"], tmp_path, log)
        # SIGTERM once the samplers have delivered past warm-up, mid-period.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if "step " in out.read_text() and any(
                    int(line.split()[1].split("/")[0].replace(",", "")) > 700
                    for line in out.read_text().splitlines() if line.startswith("step ")):
                break
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    text = out.read_text()
    assert code == 128 + signal.SIGTERM, text[-3000:]
    assert "stopped after a checkpoint" in text
    assert not wait_until_gone(before), "the stopped run left Ray processes"
    # The run's token never touched the user's home (it would switch auth on for later
    # `ray start`s on the machine).
    assert not (tmp_path / ".ray").exists()

    stopped_at = CheckpointStore(str(logdir)).steps()[-1]
    end = stopped_at + 1280
    with open(out, "w") as log:
        proc = start(["--resume", str(logdir), f"--timesteps={end}"], tmp_path, log)
        code = proc.wait(timeout=hang_guard(300))
    text = out.read_text()
    assert code == 0, text[-3000:]
    assert "games in progress start again from their beginning (Ray's samplers cannot " \
        "save a game in progress)" in text
    assert not wait_until_gone(before), "the finished run left Ray processes"
    # Games of at most 300 steps, restarted at the resume; 1280 steps after it: at least one
    # actor's games play 300 (the faster actor may deliver more than its half).
    episodes = rows(logdir / "episodes.csv")
    after = [e for e in episodes if int(e["agent_step"]) > stopped_at]
    assert len(after) >= 2 and all(0 < int(e["length"]) <= 300 for e in episodes)
    steps = [int(e["agent_step"]) for e in episodes]
    assert steps == sorted(steps) and steps[-1] <= end
    assert CheckpointStore(str(logdir)).steps()[-1] == end
