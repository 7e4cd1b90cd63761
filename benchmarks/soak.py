"""Soak test: run the fast loop well past a full replay and watch memory and threads.

    python -m benchmarks.soak [--after-full 210_000] [--replay 50_000] [--workers 8]

Runs `run_fast_dqn.py` on Pong (vector backend, concurrent and synchronized, the Nature CNN)
for --replay + --after-full agent steps, with evaluations and checkpoints (--save-replay)
every 50k steps so that every part of a long run takes its turn. A small replay and a train
step every 32 agent steps keep it to minutes. Every --every seconds it samples the run's RSS
and thread count, tagged with the agent step from the run's progress lines.

Targets: after the replay is full, RSS grows by at most 5% and the thread count is constant.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP = re.compile(r"^step ([\d,]+)/")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    count = lambda s: int(float(s))  # noqa: E731
    # 210k: progress lines lag by up to 10 s, so the measured window still spans 200k steps.
    parser.add_argument("--after-full", type=count, default=210_000)
    parser.add_argument("--replay", type=count, default=50_000)
    parser.add_argument("--workers", type=count, default=8)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples")
    # 9,984 = 312 x 32: the fast loop needs whole minibatches per target period.
    args = parser.parse_args(argv)

    logdir = os.path.join(tempfile.mkdtemp(prefix="fast-dqn-soak-"), "run")
    total = args.replay + args.after_full
    command = [sys.executable, os.path.join(ROOT, "run_fast_dqn.py"), "--game=pong",
               f"--workers={args.workers}", f"--timesteps={total}",
               f"--replay-capacity={args.replay}", "--prepopulate=10000", "--train-freq=32",
               "--target-update-freq=9984", "--evaluate=50000", "--eval-episodes=1",
               "--max-episode-steps=2000", "--checkpoint-freq=50000", "--save-replay",
               f"--logdir={logdir}"]
    print(" ".join(command[1:]), flush=True)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, cwd=ROOT)
    latest = {"step": 0, "done": False}
    final_checkpoint = f"checkpoint at step {total:,} "

    def read_progress():
        for line in process.stdout:
            match = STEP.match(line)
            if match:
                latest["step"] = int(match.group(1).replace(",", ""))
            if line.startswith(final_checkpoint):
                latest["done"] = True  # what follows is shutdown, not the run

    reader = threading.Thread(target=read_progress, daemon=True)
    reader.start()
    child = psutil.Process(process.pid)
    samples = []  # (seconds, agent step, RSS bytes, threads)
    start = time.monotonic()
    while process.poll() is None and not latest["done"]:
        try:
            samples.append((time.monotonic() - start, latest["step"],
                            child.memory_info().rss, child.num_threads()))
        except psutil.NoSuchProcess:
            break
        time.sleep(args.every)
    process.wait(timeout=120)
    reader.join(5)
    if process.returncode != 0:
        sys.exit(f"the soak run failed with exit status {process.returncode}")

    # The first sample at or after the fill is the baseline; the last progress line can lag
    # by up to 10 s, which only makes the baseline later, never earlier.
    full = [s for s in samples if s[1] >= args.replay]
    if len(full) < 2:
        sys.exit("too few samples after the replay filled; raise --after-full")
    base_rss, last_rss = full[0][2], full[-1][2]
    peak_rss = max(s[2] for s in full)
    threads = sorted({s[3] for s in full})
    for seconds, step, rss, n in samples[::max(1, len(samples) // 12)] + [samples[-1]]:
        print(f"{seconds:7.0f} s  step {step:>9,}  RSS {rss / 2**20:8.1f} MiB  threads {n}")
    print(f"agent steps after the replay filled: {total - full[0][1]:,} "
          f"(sampled from step {full[0][1]:,})")
    print(f"RSS when full {base_rss / 2**20:.1f} MiB, at the end {last_rss / 2**20:.1f} MiB "
          f"({100 * (last_rss / base_rss - 1):+.2f}%), peak {peak_rss / 2**20:.1f} MiB "
          f"({100 * (peak_rss / base_rss - 1):+.2f}%)")
    print(f"thread counts after the fill: {threads}")
    for seconds, step, rss, n in full:
        if rss > 1.02 * base_rss or n != full[0][3]:
            print(f"  above +2% or another thread count: {seconds:.0f} s, step {step:,}, "
                  f"RSS {rss / 2**20:.1f} MiB, threads {n}")
    ok = peak_rss <= 1.05 * base_rss and len(threads) == 1
    print("targets (RSS growth <= 5%, constant threads):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
