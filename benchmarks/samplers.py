"""Env stepping alone (no network): which sampler backend makes W games parallel?

Random actions on Pong, agent steps/s summed over all games, each variant timed in turn and
repeated, medians reported:
- python, 1 thread: the wrappers of fast_dqn.envs.atari_wrappers, W envs stepped one after another;
- python, W threads: the same, one Python thread per env (does the GIL let them overlap?);
- vector, T threads: ale-py's AtariVectorEnv, W envs stepped by T C++ threads.

    python -m benchmarks.samplers --workers 2
    python -m benchmarks.samplers --workers 8
"""

import argparse
import statistics
import threading
import time

import numpy as np

from fast_dqn.run.components import env_settings


def python_envs(workers):
    from fast_dqn.envs.environment import make_atari_env
    from fast_dqn.run.settings.hyperparameters import Config
    envs = [make_atari_env(env_settings(Config(game="pong")), seed=i) for i in range(workers)]
    for env in envs:
        env.reset()
    return envs


def step_env(env, steps, rng):
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 6)))
        if terminated or truncated:
            env.reset()


def run_python_sequential(envs, steps):
    rng = np.random.default_rng(0)
    for _ in range(steps):
        for env in envs:
            step_env(env, 1, rng)


def run_python_threads(envs, steps):
    threads = [threading.Thread(target=step_env, args=(env, steps, np.random.default_rng(i)))
               for i, env in enumerate(envs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=500, help="agent steps per game per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from ale_py.vector_env import AtariVectorEnv

    W = args.workers
    envs = python_envs(W)
    vectors = {t: AtariVectorEnv("pong", W, num_threads=t, autoreset_mode="SameStep")
               for t in (1, 2)}
    for v in vectors.values():
        v.reset(seed=0)
    rng = np.random.default_rng(0)

    def run_vector(t):
        return lambda: [vectors[t].step(rng.integers(0, 6, W, dtype=np.int32))
                        for _ in range(args.steps)]

    variants = {
        "python wrappers, 1 thread": lambda: run_python_sequential(envs, args.steps),
        f"python wrappers, {W} threads": lambda: run_python_threads(envs, args.steps),
        "ale-py vector env, 1 C++ thread": run_vector(1),
        "ale-py vector env, 2 C++ threads": run_vector(2),
    }
    rates = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, run in variants.items():
            t = time.perf_counter()
            run()
            rates[name].append(W * args.steps / (time.perf_counter() - t))
    print(f"| {W} Pong games | agent steps/s (median of {args.repeats}) | min | max |")
    print("|---|---|---|---|")
    for name, r in rates.items():
        print(f"| {name} | {statistics.median(r):,.0f} | {min(r):,.0f} | {max(r):,.0f} |")


if __name__ == "__main__":
    main()
