"""Learning speed on a real game: agent steps and wall-clock minutes to each score threshold.

    python -m benchmarks.learning --preset pong-quick --loop fast --minutes 120 [-- FLAGS...]
    python -m benchmarks.learning --preset pong-fastest --seeds 0 1 2 [--parallel 3]
    python -m benchmarks.learning --preset pong-fastest --seeds 0 1 2 --resume --minutes 150
    python -m benchmarks.learning --summarize RUN_DIR [RUN_DIR ...] [--plot curve.png]

--seeds runs one seed after another (each with the whole --minutes), or --parallel of them
side by side where the cores allow; `python -m fast_dqn.tools.plot RUN_DIR... --aggregate`
then gives their mean with a bootstrap band, and the IQM and optimality gap. --resume carries
each seed's run on from its last checkpoint, for another --minutes (a seed with no run yet
starts), so seeds too long for one sitting add up over several; without it, a seed whose
run directory exists is refused before anything runs.

The first form runs run_fast_dqn.py (or run_dqn.py) exactly as a user would, in its own run
directory, and watches its episodes.csv. It stops the run with SIGINT (which writes a
checkpoint, so `--resume RUN_DIR` can carry it on) when the wall-clock budget is spent or the
last threshold is reached, then prints the table and writes the curve. Flags after `--` go to
the training script unchanged. Evaluation is off unless such a flag turns it on: the score here
is the mean of the last 100 training games, and evaluating would only cost wall time.

The score at a step is the mean of the last 100 games (episodes.csv's mean_100); a threshold
counts only once 100 games have ended, so a few lucky early games cannot meet it. Minutes are
the run's own training hours (episodes.csv), so start-up and a resume's reload are not counted.
"""

import argparse
import csv
import os
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {"fast": "run_fast_dqn.py", "nature": "run_dqn.py"}
POLL_SECONDS = 10
# The scripts' exit statuses after a stop by SIGINT (the watch's own included) or SIGTERM:
# a checkpoint was written, so it is a stop, not a failure.
STOPPED_BY_SIGNAL = (128 + signal.SIGINT, 128 + signal.SIGTERM)
# Set when the benchmark itself is asked to stop (Ctrl-C, SIGTERM, a closed terminal): each
# watch then stops its run with SIGTERM, and no seed that has not started starts. SIGTERM,
# because the run may have had the terminal's SIGINT already (it is in the benchmark's
# process group): a second SIGINT a second later would abort its checkpoint, a SIGTERM never
# does. STOP_SIGNAL[0] is the signal the benchmark got.
STOPPING = threading.Event()
STOP_SIGNAL = [signal.SIGINT]


def read_games(run_dir):
    """[(game number, agent step, mean_100, hours, return)] from episodes.csv, in order."""
    path = os.path.join(run_dir, "episodes.csv")
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        return [(int(r["episode"]), int(r["agent_step"]), float(r["mean_100"]),
                 float(r["hours"]), float(r["return"])) for r in csv.DictReader(f)
                if r.get("hours")]


def first_reaching(games, threshold, window=100):
    """(agent step, minutes) when the mean of the last `window` games first reached
    `threshold`, counting only once `window` games have ended; None if never."""
    for number, step, mean_100, hours, _ in games:
        if number >= window and mean_100 >= threshold:
            return step, hours * 60
    return None


def summary_rows(run_dir, thresholds):
    games = read_games(run_dir)
    rows = []
    for threshold in thresholds:
        hit = first_reaching(games, threshold)
        rows.append((threshold, *(hit if hit else (None, None))))
    last = games[-1] if games else None
    return rows, last


def print_summary(run_dir, thresholds):
    rows, last = summary_rows(run_dir, thresholds)
    print(f"\n{run_dir}")
    print("| mean-of-100 >= | agent steps | minutes |")
    print("|---|---|---|")
    for threshold, step, minutes in rows:
        if step is None:
            print(f"| {threshold:g} | not reached | not reached |")
        else:
            print(f"| {threshold:g} | {step:,} | {minutes:.1f} |")
    if last:
        number, step, mean_100, hours, _ = last
        best = max((g[2] for g in read_games(run_dir) if g[0] >= 100), default=None)
        print(f"end: {number:,} games, agent step {step:,}, {hours * 60:.1f} minutes, "
              f"mean-of-100 {mean_100:.2f}"
              + (f", best mean-of-100 {best:.2f}" if best is not None else ""))
    return rows


def plot(run_dirs, output, thresholds):
    import matplotlib
    matplotlib.use("Agg")  # a file only: no display is needed
    import matplotlib.pyplot as plt

    fig, (by_steps, by_minutes) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for run_dir in run_dirs:
        games = read_games(run_dir)
        label = os.path.basename(os.path.normpath(run_dir))
        line, = by_steps.plot([g[1] for g in games], [g[2] for g in games], label=label)
        by_minutes.plot([g[3] * 60 for g in games], [g[2] for g in games], label=label)
        # Each game's own score, faintly: the mean of 100 lags behind it.
        by_steps.scatter([g[1] for g in games], [g[4] for g in games], s=3, alpha=0.3,
                         color=line.get_color())
        by_minutes.scatter([g[3] * 60 for g in games], [g[4] for g in games], s=3, alpha=0.3,
                           color=line.get_color())
    for axis, xlabel in ((by_steps, "agent steps"), (by_minutes, "training minutes")):
        for threshold in thresholds:
            axis.axhline(threshold, color="grey", linestyle=":", linewidth=1)
        axis.set_xlabel(xlabel)
        axis.grid(alpha=0.3)
    by_steps.set_ylabel("return (line: mean of 100 games; dots: each game)")
    by_steps.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    print(f"curve written to {output}")


def training_command(args, extra):
    """The script's command line: a new run, or with args.resume one that exists carried on.
    The preset and seed go with --resume too, so that the script refuses a directory of
    another preset or seed (they must equal its saved values)."""
    script = os.path.join(ROOT, SCRIPTS[args.loop])
    command = [sys.executable, script, f"--preset={args.preset}", f"--seed={args.seed}"]
    if args.resume and os.path.exists(args.logdir):
        return command + [f"--resume={args.logdir}"] + extra
    command.append(f"--logdir={args.logdir}")
    if not any(flag.startswith("--evaluate") for flag in extra):
        command.append("--evaluate=0")
    return command + extra


def run(args, extra):
    """Run one seed, watched; its exit status (0, or 130 when the watch stopped it), or None
    when the benchmark was asked to stop before this seed started."""
    if STOPPING.is_set():
        return None
    command = training_command(args, extra)
    print("running:", " ".join(command), flush=True)
    parent = os.path.dirname(os.path.abspath(args.logdir))
    os.makedirs(parent, exist_ok=True)  # a fresh clone has no runs/ yet
    # Appended, not truncated: a second call on the same run keeps the first one's output.
    log_path = os.path.join(parent, os.path.basename(os.path.normpath(args.logdir)) + ".log")
    log = open(log_path, "a")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + args.minutes * 60
    stop_at = max(args.thresholds)
    reason = None
    try:
        while process.poll() is None:
            if STOPPING.wait(POLL_SECONDS):
                reason = "the benchmark was asked to stop"
                break
            games = read_games(args.logdir)
            if first_reaching(games, stop_at) is not None:
                reason = f"mean-of-100 reached {stop_at:g}"
                break
            if time.monotonic() >= deadline:
                reason = f"the {args.minutes:g}-minute budget ended"
                break
    finally:
        if process.poll() is None:
            # Either checkpoints, then exits: resumable.
            process.send_signal(signal.SIGTERM if STOPPING.is_set() else signal.SIGINT)
            try:
                process.wait(timeout=300)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()
    status = process.returncode
    if status in (-signal.SIGINT, -signal.SIGTERM):
        # Killed by the signal before its handler was set (still importing): nothing to save,
        # and --resume starts it again. A stop, as the shell would count it.
        status = 128 - status
    if reason is None:
        # It ended without the watch: done; stopped by a signal from outside (Ctrl-C, kill
        # -INT or -TERM), which checkpoints, so --resume carries it on; or refused or failed.
        # Its log's last line says which.
        if status == 0:
            reason = "the budget of its own --timesteps ended"
        elif status in STOPPED_BY_SIGNAL:
            reason = f"a signal from outside stopped it; its last line: {last_line(log_path)}"
        else:
            reason = f"the run failed; its last line: {last_line(log_path)}"
    print(f"stopped: {reason}; exit status {status}", flush=True)
    return status


def last_line(path):
    with open(path, errors="replace") as f:
        lines = [line.strip() for line in f.read().replace("\r", "\n").splitlines()]
    return next((line for line in reversed(lines) if line), "(empty)")


def run_seeds(args, extra):
    """Run each seed of args.seeds (or args.seed), args.parallel at a time; their run dirs."""
    import concurrent.futures
    import copy
    jobs = []
    for seed in args.seeds or [args.seed]:
        job = copy.copy(args)
        job.seed = seed
        default = os.path.join(ROOT, "runs", f"learning-{args.preset}-{args.loop}-seed{seed}")
        job.logdir = (f"{args.logdir}-seed{seed}" if args.logdir and args.seeds
                      else args.logdir or default)
        jobs.append(job)
    taken = [job.logdir for job in jobs if os.path.exists(job.logdir)]
    if taken and not getattr(args, "resume", False):
        sys.exit(f"benchmarks.learning: error: {', '.join(taken)} already "
                 f"{'holds a run' if len(taken) == 1 else 'hold runs'}; add --resume to carry "
                 "them on, or give another --logdir")
    # Threads only wait on the runs' processes, which do the work.
    with concurrent.futures.ThreadPoolExecutor(max(1, args.parallel)) as pool:
        statuses = list(pool.map(lambda job: run(job, extra), jobs))
    failed = [job.logdir for job, status in zip(jobs, statuses)
              if status not in (0, None) and status not in STOPPED_BY_SIGNAL]
    return [job.logdir for job, status in zip(jobs, statuses) if status is not None], failed


def stop_on_signals():
    """Turn Ctrl-C, SIGTERM and a closed terminal into STOPPING (the watches stop their runs
    with a checkpoint) instead of a traceback that leaves the runs unwatched. SIGHUP
    ignored stays ignored (nohup); SIGINT is taken even where the shell ignored it (a job
    started with `&`), as the training scripts take it, so `kill -INT` stops both alike.
    Only the main thread may set handlers; elsewhere (a test's thread) the signals keep
    their own."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def stop(received, frame):
        if STOPPING.is_set():
            return
        STOP_SIGNAL[0] = received
        STOPPING.set()  # first: the write below fails on a terminal that is gone
        try:
            os.write(2, f"benchmarks.learning: {signal.Signals(received).name}: stopping each "
                        "run after its checkpoint\n".encode())
        except OSError:
            pass

    return {signum: signal.signal(signum, stop)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
            if signum != signal.SIGHUP or signal.getsignal(signum) is not signal.SIG_IGN}


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="pong-quick")
    parser.add_argument("--loop", choices=sorted(SCRIPTS), default="fast")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="several seeds, each in its own run directory (overrides --seed)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="with --seeds: how many run side by side (default: one at a time)")
    parser.add_argument("--minutes", type=float, default=150.0,
                        help="wall-clock budget; the run is stopped with a checkpoint then")
    parser.add_argument("--logdir", default=None,
                        help="default: runs/learning-<preset>-<loop>-seed<seed>")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.0, 18.0])
    parser.add_argument("--plot", default=None, help="curve PNG (default: RUN_DIR/curve.png)")
    parser.add_argument("--resume", action="store_true",
                        help="carry each seed's existing run on for another --minutes (a "
                             "seed with no run directory yet starts)")
    parser.add_argument("--summarize", nargs="+", metavar="RUN_DIR",
                        help="only print the table (and plot) of finished runs")
    args = parser.parse_args(argv)
    STOPPING.clear()
    failed = []
    if args.summarize:
        run_dirs = args.summarize
    else:
        previous = stop_on_signals()
        try:
            run_dirs, failed = run_seeds(args, extra)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    if failed or STOPPING.is_set():
        run_dirs = [run_dir for run_dir in run_dirs if read_games(run_dir)]
    for run_dir in run_dirs:
        print_summary(run_dir, args.thresholds)
    if run_dirs:
        plot(run_dirs, args.plot or os.path.join(run_dirs[0], "curve.png"), args.thresholds)
    if failed:
        sys.exit(f"benchmarks.learning: error: {', '.join(failed)} failed; see "
                 f"{'its log' if len(failed) == 1 else 'their logs'} beside "
                 f"{'it' if len(failed) == 1 else 'them'} (RUN_DIR.log)")
    if STOPPING.is_set():
        print(f"benchmarks.learning: stopped by {signal.Signals(STOP_SIGNAL[0]).name}; each "
              "run it watched was asked to checkpoint and no new seed started; the same "
              "command with --resume carries them on", file=sys.stderr)
        sys.exit(128 + STOP_SIGNAL[0])


if __name__ == "__main__":
    main()
