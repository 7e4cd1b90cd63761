"""How long a mistyped training command waits for its one-line refusal, on this machine.

Each case runs `python run_fast_dqn.py ...` as a fresh process, --repeats times, and prints
one line: the median wall time (min and max), the exit status and the refusal's first words.
argparse's own refusal of a malformed value is the floor: it loads none of the run's modules.
The others are refused before Keras, TensorFlow or JAX is imported
(tests/run/test_bad_input.py checks that by what was imported); before that they waited for
the import, seconds.

    python -m benchmarks.refusal_time               # each case 3 times
    python -m benchmarks.refusal_time --repeats 5
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cases(scratch):
    """[(name, flags)]: the refusals timed, their run directories made under `scratch`."""
    damaged = os.path.join(scratch, "damaged")
    os.makedirs(damaged)
    with open(os.path.join(damaged, "config.json"), "w") as f:
        f.write('{"loop": "fast", "game": ')  # cut short, as by a full disk
    return [("argparse: --timesteps=abc", ["--timesteps=abc"]),
            ("--game=pongg", ["--game=pongg"]),
            ("--env=Foo-v9", ["--env=Foo-v9"]),
            ("--resume of no directory", ["--resume", os.path.join(scratch, "nonexistent")]),
            ("--resume, config.json damaged", ["--resume", damaged])]


def time_refusal(flags):
    """(wall seconds, exit status, stderr's last line) of one refused command."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, os.path.join(ROOT, "run_fast_dqn.py"), *flags],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    lines = done.stderr.strip().splitlines() or [""]
    return time.perf_counter() - start, done.returncode, lines[-1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each case (3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        for name, flags in cases(scratch):
            runs = [time_refusal(flags) for _ in range(args.repeats)]
            walls = [wall for wall, _, _ in runs]
            _, status, said = runs[-1]
            print(f"{name:<32} {statistics.median(walls):6.2f} s (min {min(walls):.2f}, "
                  f"max {max(walls):.2f})  exit {status}  {said[:70]}", flush=True)


if __name__ == "__main__":
    main()
