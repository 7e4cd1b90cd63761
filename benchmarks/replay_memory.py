"""Allocate and fill a replay memory, then report peak RSS and minibatches/s.

    python -m benchmarks.replay_memory                    # 1M frames, the issue's target size
    python -m benchmarks.replay_memory --capacity 100000  # quicker
"""

import argparse
import statistics
import time

import numpy as np
import psutil

from fast_dqn.agent.replay_memory import ReplayMemory, check_fits_in_memory, estimate_bytes


def peak_rss_bytes():
    # ru_maxrss is the high-water mark (KiB on Linux), so a transient spike is not missed.
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capacity", type=int, default=1_000_000, help="replay records")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    frame_shape = (84, 84)
    check_fits_in_memory(args.capacity, frame_shape)
    rss_start = psutil.Process().memory_info().rss
    t0 = time.perf_counter()
    replay = ReplayMemory(args.capacity, frame_shape, history_length=4, seed=0)
    rng = np.random.default_rng(0)
    # Fill in chunks of distinct noisy frames, with an episode end every ~1000 steps, so pages
    # are really touched and the boundary logic really runs during sampling.
    chunk = 10_000
    block = rng.integers(0, 256, size=(chunk, *frame_shape), dtype=np.uint8)
    for start in range(0, args.capacity, chunk):
        n = min(chunk, args.capacity - start)
        ends = rng.random(n) < 1e-3
        replay.add_batch(block[:n], rng.integers(0, 6, n), rng.normal(size=n), ends, ends)
    fill_s = time.perf_counter() - t0

    rates = []
    for _ in range(args.repeats):
        count, t = 0, time.perf_counter()
        while time.perf_counter() - t < args.seconds:
            replay.sample(args.batch_size)
            count += 1
        rates.append(count / (time.perf_counter() - t))

    print(f"| capacity | estimate | peak RSS | RSS before | fill time | "
          f"minibatches/s (batch {args.batch_size}, median of {args.repeats}) |")
    print("|---|---|---|---|---|---|")
    print(f"| {args.capacity:,} | {estimate_bytes(args.capacity, frame_shape) / 1e9:.2f} GB "
          f"| {peak_rss_bytes() / 1e9:.2f} GB | {rss_start / 1e9:.2f} GB | {fill_s:.1f} s "
          f"| {statistics.median(rates):,.0f} (min {min(rates):,.0f}, max {max(rates):,.0f}) |")


if __name__ == "__main__":
    main()
