"""How --backend ray scales with sampler actors, on this machine.

For 1, 2 and 4 actors (each 4 Pong games, 64 steps per request, epsilon 0.1 so most steps
go through the actor's network), on a private local cluster:

- samplers alone: agent steps/s arriving at the driver, which only receives them;
- with the learner: the whole fast loop (replay, background trainer, Nature ratio of one
  minibatch of 32 per 4 steps, target update every --period steps), steady state after warm-up;
- weight broadcast: one ray.put of the target weights and every actor loaded with them
  (actors idle), median of --repeats;
- bytes per agent step on the wire: the chunks' arrays, and the weights amortized over a
  target period for one copy per actor;
- for reference, in the same run, the threads backend with 8 games (ale-py's vector env in
  this process, batched target-network calls) doing the same two measurements.

Rates are medians over --segments equal time (samplers) or period (learner) segments.

    python -m benchmarks.ray_scaling                  # about 10 minutes here
    python -m benchmarks.ray_scaling --actors 1 2 --seconds 10
"""

import argparse
import dataclasses
import os
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chunk_bytes(chunk):
    return sum(getattr(chunk, f.name).nbytes for f in dataclasses.fields(chunk)
               if hasattr(getattr(chunk, f.name), "nbytes"))


def samplers_alone(backend, seconds, segments):
    """Steps/s arriving at the driver, and the wire bytes per step of the chunks."""
    import numpy as np
    eps = lambda s: np.full(np.shape(s), 0.1)
    step, size, end = 0, None, time.perf_counter() + seconds  # warm-up: actors start
    while time.perf_counter() < end or step == 0:
        chunk = backend.next_chunk(step, eps)
        if chunk is not None:
            step += chunk.steps
            size = chunk_bytes(chunk) / chunk.steps
    rates = []
    for _ in range(segments):
        start_step, start = step, time.perf_counter()
        while time.perf_counter() - start < seconds:
            chunk = backend.next_chunk(step, eps)
            if chunk is not None:
                step += chunk.steps
        rates.append((step - start_step) / (time.perf_counter() - start))
    return rates, size


def drain(backend):
    import ray
    for queue in backend.pending:
        ray.wait(list(queue), num_returns=len(queue), timeout=120)
        queue.clear()


def broadcast_ms(backend, repeats):
    import ray
    times = []
    for r in range(repeats):
        start = time.perf_counter()
        ref = ray.put(backend.weights())
        ray.get([actor.load_weights.remote([ref], -1 - r) for actor in backend.actors])
        times.append(1000 * (time.perf_counter() - start))
    return times


def measure(config, backend, learner, args):
    """Samplers alone, then with the learner, on one started backend."""
    import numpy as np
    backend.start(np.random.default_rng(0))
    backend.act_through(learner.target_q_values, learner.target_weights)
    alone, per_step = samplers_alone(backend, args.seconds, args.segments)
    latency = None
    if config.backend == "ray":
        drain(backend)
        latency = broadcast_ms(backend, args.repeats)
    return alone, per_step, latency, with_learner(config, backend, learner, args.segments)


def spread(values, digits=0):
    return (f"{statistics.median(values):,.{digits}f} "
            f"({min(values):,.{digits}f}–{max(values):,.{digits}f})")


def with_learner(config, backend, learner, segments):
    from benchmarks.speedtest import TimingMonitor
    from fast_dqn.agent.train_calls import TrainCalls
    from fast_dqn.loops.background_trainer import BackgroundTrainer
    from fast_dqn.loops.fast_loop import FastLoop
    from fast_dqn.run import components
    replay = components.build_replay(config, (84, 84), backend.num_shards)
    # Timed from the second sync point after warm-up (the first trains the warm-up's tail).
    first = -(-config.prepopulate // config.target_update_freq) * config.target_update_freq
    start = first + config.target_update_freq
    config = config.replace(timesteps=start + segments * config.target_update_freq)
    monitor = TimingMonitor(start, config.target_update_freq, config.timesteps)
    monitor.message = lambda line: None
    calls = TrainCalls(learner, replay, config.batch_size, on_device=False)
    trainer = BackgroundTrainer(calls.train, calls.draw, per_call=config.updates_per_call)
    try:
        FastLoop(components.loop_settings(config), backend, learner, replay, trainer,
                 monitor).run()
    finally:
        trainer.close()
    return monitor.rates()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seconds", type=float, default=15, help="per samplers-alone segment")
    parser.add_argument("--segments", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="weight broadcasts")
    parser.add_argument("--period", type=int, default=2048, help="target update, agent steps")
    parser.add_argument("--threads", type=int, default=0, help="learner's TF threads")
    parser.add_argument("--no-threads-reference", dest="threads_reference",
                        action="store_false", help="skip the threads backend's row")
    args = parser.parse_args()

    import ray

    from fast_dqn.agent.backend_setup import configure_backend
    from fast_dqn.loops.experience import LocalBackend
    from fast_dqn.loops.ray_backend import RayBackend
    from fast_dqn.loops.ray_cluster import start_private_cluster
    from fast_dqn.run import components
    from fast_dqn.run.settings.hyperparameters import FastConfig
    from fast_dqn.run.settings.validation import resolve

    configure_backend(0, args.threads)
    start_private_cluster(max(os.cpu_count(), max(args.actors)), 1024)
    print(f"cores {os.cpu_count()}, load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| backend | games | samplers alone (steps/s) | with learner (steps/s) | "
          "broadcast (ms) | wire bytes/step (batches + weights) |")
    print("|---|---|---|---|---|---|")
    base = FastConfig(game="pong", backend="ray", envs_per_sampler=4, rollout_steps=64,
                      replay_capacity=100_000, prepopulate=2048, target_update_freq=args.period,
                      evaluate=0, eps_start=0.1, eps_end=0.1, threads=args.threads)
    base = resolve(base)
    for n in args.actors:
        config = base.replace(num_samplers=n)
        backend = RayBackend(components.ray_settings(config),
                             *components.ray_sampler_builders(config),
                             log=lambda line: None)
        try:
            learner = components.build_learner(config, (4, 84, 84), backend.num_actions)
            alone, per_step, latency, learning = measure(config, backend, learner, args)
        finally:
            backend.close()
        weights_bytes = sum(w.nbytes for w in learner.target_weights())
        amortized = weights_bytes / args.period
        print(f"| ray, {n} actor(s) | {n * 4} | {spread(alone)} | {spread(learning)} | "
              f"{spread(latency, 1)} | {per_step:,.0f} + {amortized:,.0f} per machine "
              f"({weights_bytes / 2**20:.2f} MiB per {args.period:,} steps) |", flush=True)
    if args.threads_reference:
        config = base.replace(backend="threads", workers=8)
        backend = LocalBackend(components.build_samplers(config))
        try:
            learner = components.build_learner(config, (4, 84, 84), backend.num_actions)
            alone, _, _, learning = measure(config, backend, learner, args)
        finally:
            backend.close()
        print(f"| threads (reference) | 8 | {spread(alone)} | {spread(learning)} | – | "
              "none (same process) |", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
