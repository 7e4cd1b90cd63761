"""Evaluation games per second: one after another in Python against W at once on the vector env.

The run's evaluation protocol (fast_dqn.loops.evaluation): full Pong games at epsilon 0.05
through a Nature CNN (untrained, so each game is a quick loss), the same games in every
variant (each is fixed by its seed). The variants take turns, each repeated, and the median
is reported, with the ratio to one-at-a-time measured in the same process:
- one at a time: what evaluation did before --eval-workers, one Python env, a network call per
  greedy step;
- W at once: ale-py's vector env, one network call per step for all W games.

    python -m benchmarks.evaluation --games 16 --workers 8 --repeats 3
"""

import argparse
import os
import statistics
import time

import numpy as np

from fast_dqn.run.components import env_settings


def measure(games_factory, q_values, games, repeats, key):
    from fast_dqn.loops.evaluation import game_seeds, play
    times, returns = [], None
    for repeat in range(repeats):
        source = games_factory()
        try:
            start = time.perf_counter()
            returns = play(source, q_values, game_seeds(key, repeat, games), 0.05)
            times.append(time.perf_counter() - start)
        finally:
            source.close()
    return times, returns


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game", default="pong")
    parser.add_argument("--games", type=int, default=16, help="games per evaluation")
    parser.add_argument("--workers", type=int, nargs="+", default=[8],
                        help="games at once on the vector env (one row each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="TensorFlow threads (0: all)")
    args = parser.parse_args(argv)

    from fast_dqn.agent.backend_setup import configure_backend
    from fast_dqn.envs.environment import make_env
    from fast_dqn.envs.samplers import VectorSamplers
    from fast_dqn.loops.evaluation import AtOnce, OneAtATime
    from fast_dqn.run import components
    from fast_dqn.run.settings.hyperparameters import Config
    from fast_dqn.run.settings.validation import resolve

    load = os.getloadavg()
    configure_backend(0, args.threads)
    config = resolve(Config(game=args.game, replay_capacity=10_000, prepopulate=1_000))
    learner = components.build_learner(config, (config.history_length, 84, 84), 6)
    learner.q_values(np.zeros((8, 4, 84, 84), np.uint8))  # compile before the clock runs

    variants = [("one at a time (Python env)",
                 lambda: OneAtATime(make_env(env_settings(config), seed=None, training=False)))]
    for workers in args.workers:
        variants.append((f"{workers} at once (vector env)",
                         lambda w=workers: AtOnce(VectorSamplers(env_settings(config), w, seed=0))))
    times = {name: [] for name, _ in variants}
    returns = {}
    for repeat in range(args.repeats):  # the variants take turns, so drift hits each alike
        for name, factory in variants:
            elapsed, played = measure(factory, learner.q_values, args.games, 1, (0, repeat))
            times[name] += elapsed
            returns.setdefault(repeat, []).append(played)
    same = all(all(r == runs[0] for r in runs) for runs in returns.values())
    print(f"cores {os.cpu_count()}, load average before: "
          f"{' '.join(f'{x:.2f}' for x in load)}; {args.games} {args.game} games "
          f"per evaluation, {args.repeats} repeats; the same returns in every variant: {same}")
    print("| variant | seconds per evaluation (median) | games/s | × one at a time |")
    print("|---|---|---|---|")
    base = statistics.median(times[variants[0][0]])
    for name, _ in variants:
        median = statistics.median(times[name])
        print(f"| {name} | {median:.1f} | {args.games / median:.2f} | {base / median:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
