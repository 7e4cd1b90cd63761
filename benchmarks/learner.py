"""The learner alone: Nature-CNN train steps per second, variants measured side by side.

Variants alternate within one process (plain, XLA, ...), repeat after repeat, so machine noise
hits them alike; the table gives the median updates/s of each and its ratio to plain.

    python -m benchmarks.learner                          # plain vs XLA
    python -m benchmarks.learner --variants plain,xla,mixed --repeats 7
"""

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VARIANTS = {  # name -> (xla, mixed precision)
    "plain": (False, False),
    "xla": (True, False),
    "mixed": (False, True),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="plain,xla", help=",".join(VARIANTS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--updates", type=int, default=200, help="train steps per repeat")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads")
    args = parser.parse_args()

    from fast_dqn.agent.learner import DQNLearner, make_optimizer
    from fast_dqn.agent.q_network import nature_cnn
    from fast_dqn.agent.tf_setup import configure_tensorflow
    configure_tensorflow(0, args.threads)

    rng = np.random.default_rng(0)
    b = args.batch_size
    batch = (rng.integers(0, 256, (b, 4, 84, 84), dtype=np.uint8), rng.integers(0, 6, b),
             rng.normal(size=b).astype(np.float32),
             rng.integers(0, 256, (b, 4, 84, 84), dtype=np.uint8), np.zeros(b, np.float32))
    learners = {}
    for name in args.variants.split(","):
        xla, mixed = VARIANTS[name]
        learners[name] = DQNLearner(
            lambda: nature_cnn((4, 84, 84), 6, "mixed_float16" if mixed else None),
            make_optimizer("rmsprop", 2.5e-4, loss_scaling=mixed), 0.99, xla=xla)
        for _ in range(10):  # compile
            learners[name].train(*batch)
    rates = {name: [] for name in learners}
    for _ in range(args.repeats):
        for name, learner in learners.items():
            t = time.perf_counter()
            for _ in range(args.updates):
                learner.train(*batch)
            rates[name].append(args.updates / (time.perf_counter() - t))
    base = statistics.median(rates[next(iter(rates))])
    print(f"| variant | updates/s (median of {args.repeats}) | min | max | × {next(iter(rates))} "
          f"| agent steps/s at train_freq 4 |")
    print("|---|---|---|---|---|---|")
    for name, r in rates.items():
        m = statistics.median(r)
        print(f"| {name} | {m:.1f} | {min(r):.1f} | {max(r):.1f} | {m / base:.2f} | {4 * m:.0f} |")


if __name__ == "__main__":
    main()
