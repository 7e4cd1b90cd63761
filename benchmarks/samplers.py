"""Env stepping alone (no network): which sampler backend makes W games parallel?

Random actions on Pong, agent steps/s summed over all games, each variant timed in turn and
repeated, medians reported:
- python, 1 thread: the wrappers of fast_dqn.envs.atari_wrappers, W envs stepped one after another;
- python, W threads: the same, one Python thread per env (does the GIL let them overlap?);
- vector, T threads: ale-py's AtariVectorEnv, W envs stepped by T C++ threads.

    python -m benchmarks.samplers --workers 2
    python -m benchmarks.samplers --workers 8

With --groups, the fast loop's samplers themselves, as its backends hand out chunks: all W
games in each round (LocalBackend, one group) against two groups that take turns
(OverlappedBackend), side by side in one process, acting at epsilon 0.1 through a null network
that answers zeros after --latency-ms milliseconds without holding the GIL (a GPU's call,
stood in for). Reported: agent steps/s and the main thread's own CPU time per W agent steps.

    python -m benchmarks.samplers --groups --workers 16,64 --latency-ms 0,2
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


def backends(workers, groups, threads):
    """The fast loop's local backend for W Pong games, with one or two groups."""
    from fast_dqn.run.components import build_local_backend
    from fast_dqn.run.settings.hyperparameters import FastConfig
    from fast_dqn.run.settings.validation import resolve
    # A period longer than any measurement: no sync point holds a step back.
    return build_local_backend(resolve(FastConfig(
        game="pong", workers=workers, evaluate=0, seed=0, sampler_groups=groups,
        env_threads=threads, target_update_freq=10**8, timesteps=10**9)))


def null_network(latency_s):
    def q_values(states):
        if latency_s:
            time.sleep(latency_s)  # releases the GIL, as waiting on a GPU kernel does
        return np.zeros((len(states), 6), np.float32)
    return q_values


def time_chunks(backend, workers, rounds, step):
    """Hand out `rounds` x W agent steps; returns (agent steps/s, main-thread CPU seconds per
    W steps, the next step)."""
    epsilon = lambda steps: np.full(len(steps), 0.1)
    end = step + rounds * workers
    wall, cpu = time.perf_counter(), time.thread_time()
    while step < end:
        step += backend.next_chunk(step, epsilon).steps
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    return rounds * workers / wall, cpu / rounds, step


def compare_groups(worker_counts, latencies_ms, rounds, repeats, threads):
    print(f"| W | network latency | groups | agent steps/s (median of {repeats}) | "
          "main thread CPU per round | ratio to one group |")
    print("|---|---|---|---|---|---|")
    for workers in worker_counts:
        for latency in latencies_ms:
            made = {g: backends(workers, g, threads) for g in (1, 2)}
            steps = {g: 0 for g in made}
            for g, backend in made.items():
                backend.start(np.random.default_rng(0))
                backend.act_through(null_network(latency / 1000), None)
                steps[g] = time_chunks(backend, workers, 20, 0)[2]  # warm the threads
            results = {g: [] for g in made}
            for _ in range(repeats):  # interleaved, so drifts of the machine hit both
                for g, backend in made.items():
                    rate, cpu, steps[g] = time_chunks(backend, workers, rounds, steps[g])
                    results[g].append((rate, cpu))
            one = statistics.median(r for r, _ in results[1])
            for g, r in results.items():
                rate = statistics.median(x for x, _ in r)
                cpu = statistics.median(c for _, c in r)
                print(f"| {workers} | {latency:g} ms | {g} | {rate:,.0f} | {cpu * 1e3:.3f} ms "
                      f"| {rate / one:.2f} |", flush=True)
            for backend in made.values():
                backend.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", action="store_true",
                        help="compare the fast loop's backends: one group against two")
    parser.add_argument("--latency-ms", default="0",
                        help="--groups: the null network's latencies, comma-separated")
    parser.add_argument("--rounds", type=int, default=300,
                        help="--groups: rounds of W agent steps per repeat")
    parser.add_argument("--env-threads", type=int, default=0,
                        help="--groups: C++ threads per group (0 = one per core, at most W/2 "
                        "with two groups)")
    parser.add_argument("--workers", default="8",
                        help="games; --groups takes a comma-separated list")
    parser.add_argument("--steps", type=int, default=500, help="agent steps per game per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.groups:
        compare_groups([int(w) for w in args.workers.split(",")],
                       [float(x) for x in args.latency_ms.split(",")], args.rounds,
                       args.repeats, args.env_threads)
        return
    from ale_py.vector_env import AtariVectorEnv

    W = int(args.workers)
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
