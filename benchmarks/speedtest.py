"""The speed test of Daley & Amato (2021), on this machine.

Workload: Pong at Nature ratios (one minibatch of 32 per 4 agent steps), replay 100k, warm-up
5k uniform-random steps, then N measured agent steps (default 20k). Each configuration runs in
its own process, so TF thread pools and peak RSS are its own, and reports steady-state agent
steps/s, CPU% (of one core) and peak RSS:

- run_dqn.py's loop (Nature);
- run_fast_dqn.py's loop for W in {1, 2, 4, 8} x concurrent {off, on} x synchronize {off, on};
- two ceilings: the learner alone (updates/s x train_freq, no env, the fast loop's trainer
  in calls of --updates-per-call) and the samplers alone at each W (acting through the
  target network at epsilon 0.1 or --epsilon, no training; replay written at each sync
  point, as in the loop: before 2026-11-28 it was written every round).

Epsilon follows the Nature schedule unless --epsilon holds it fixed. Both loops query the
network only for greedy steps, so the schedule's ~0.98 in this window spares them most
inference; --epsilon 0.1 measures the steady state that fills most of a 50M-step run.

Steady state: the Nature loop is timed from the end of warm-up. The fast loop trains, at its
first sync point after warm-up, the minibatches of the warm-up's tail too (so totals match the
Nature loop); it is therefore timed from the sync point after that one. The rate shown is the
median over the window's segments (5k steps for the Nature loop, one 10k target period for the
fast loop); min and max are in the CSV.

    python -m benchmarks.speedtest                 # the full grid (about an hour here)
    python -m benchmarks.speedtest --quick         # a smoke run of about a minute (CI)
    python -m benchmarks.speedtest --only nature,fast-8-on-on,learner --repeats 3
    python -m benchmarks.speedtest --workers 8,16,32,64 --epsilon 0.1 --repeats 3 \
        --only nature,fast-8-on-on,fast-16-on-on,fast-32-on-on,fast-64-on-on,learner,\
samplers-8,samplers-16,samplers-32,samplers-64                    # the GPU table: docs/gpu.md

The Keras backend is KERAS_BACKEND's (docs/options.md); the table's header names it and the
device that trained.
"""

import argparse
import csv
import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------- the measured side

class TimingMonitor:
    """Stands in for fast_dqn.run.logs.monitor.Monitor: records (step, wall, cpu) at segment
    marks."""

    def __init__(self, start, segment, end, busy=None):
        """busy(): the trainer's seconds in train steps so far, or None (no trainer)."""
        self.marks = list(range(start, end + 1, segment))
        self.points = []
        self.busy = busy or (lambda: 0.0)

    def tick(self, step, epsilon):
        if self.marks and step >= self.marks[0]:
            wall = time.perf_counter()
            busy = self.busy()
            # The busy reading lies between `wall` and the clock after it, so a window from one
            # mark's `wall` to a later mark's clock-after spans all the busy time it charges.
            self.points.append((step, wall, _cpu_seconds(), busy, time.perf_counter()))
            while self.marks and step >= self.marks[0]:
                self.marks.pop(0)

    def record_game(self, *args):
        pass

    def record_train(self, loss, mean_q=None):
        pass

    def follow(self, schedule):
        pass

    def record_eval(self, *args):
        pass

    def sync_point(self, step):
        pass

    def message(self, text):
        print(text, flush=True)

    def rates(self):
        return [(b[0] - a[0]) / (b[1] - a[1]) for a, b in zip(self.points, self.points[1:])]

    def cpu_percent(self):
        (_, w0, c0, _, _), (_, w1, c1, _, _) = self.points[0], self.points[-1]
        return 100 * (c1 - c0) / (w1 - w0)

    def busy_fraction(self):
        """The share of the window's wall time the trainer spent in train steps."""
        (_, w0, _, b0, _), (_, _, _, b1, w1) = self.points[0], self.points[-1]
        return (b1 - b0) / (w1 - w0)


def _cpu_seconds():
    times = os.times()
    return times.user + times.system


def _peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _config(case, args):
    from fast_dqn.run.settings.hyperparameters import FastConfig
    config = FastConfig(game="pong", replay_capacity=args.replay, prepopulate=args.warmup,
                        target_update_freq=args.period, evaluate=0, seed=0,
                        workers=case.get("workers", 1), concurrent=case.get("concurrent", True),
                        synchronize=case.get("synchronize", True), threads=args.threads,
                        updates_per_call=args.updates_per_call,
                        replay_device=args.replay_device,
                        sampler_groups=args.sampler_groups)
    if args.epsilon is not None:
        config = dataclasses.replace(config, eps_start=args.epsilon, eps_end=args.epsilon)
    from fast_dqn.run.settings.validation import resolve
    return resolve(config)


def measure(case, args):
    """Run one configuration in this process; return its figures as a dict."""
    import numpy as np

    from fast_dqn.agent.backend_setup import configure_backend, device_line
    from fast_dqn.run import components

    config = _config(case, args)
    args.device = device_line(*configure_backend(config.seed, config.threads))
    kind = case["kind"]
    shape = (config.history_length, 84, 84)
    if kind == "learner":
        return _measure_learner(config, args, shape)

    if kind == "nature":
        from fast_dqn.envs.environment import make_atari_env
        from fast_dqn.loops.nature_loop import run_nature_loop
        start, segment = args.warmup, args.nature_segment
        config = config.replace(timesteps=start + args.steps)
        env = make_atari_env(components.env_settings(config), seed=0)
        learner = components.build_learner(config, shape, env.action_space.n)
        replay = components.build_replay(config, shape[1:])
        monitor = TimingMonitor(start, segment, start + args.steps)
        run_nature_loop(components.loop_settings(config), env, learner, replay, monitor,
                        np.random.default_rng(0))
    else:
        from fast_dqn.agent.train_calls import TrainCalls
        from fast_dqn.loops.background_trainer import BackgroundTrainer
        from fast_dqn.loops.fast_loop import FastLoop
        samplers_only = kind == "samplers"
        if samplers_only:
            start, segment = config.workers * 50, args.samplers_segment
        else:
            first_sync = -(-args.warmup // args.period) * args.period
            start, segment = first_sync + args.period, args.period
        config = config.replace(timesteps=start + args.steps)
        settings = components.loop_settings(config)
        if samplers_only:
            # Act through the network every round (epsilon 0.1 throughout), never train: no
            # run could ask that, so the loop's settings are made here, past validation.
            from fast_dqn.agent.schedules import LinearSchedule
            eps = 0.1 if args.epsilon is None else args.epsilon
            settings = dataclasses.replace(settings, prepopulate=0, train_freq=10**9,
                                           exploration=LinearSchedule(eps, eps, 1))
        samplers = components.build_local_backend(config)
        learner = components.build_learner(config, shape, samplers.num_actions)
        replay = components.build_replay(config, shape[1:], num_shards=config.workers)
        trainer = None
        if config.concurrent:
            # Alone, the samplers' trainer has nothing to train: it is there so that replay
            # is written at sync points, as in the loop (without one, the loop trains in
            # lockstep and writes replay every round).
            calls = TrainCalls(learner, replay, config.batch_size,
                               on_device=config.replay_device == "device")
            trainer = BackgroundTrainer(calls.train, calls.draw,
                                        prefetch=calls.mirror is None,
                                        per_call=config.updates_per_call)
        monitor = TimingMonitor(start, segment, start + args.steps,
                                busy=trainer and trainer.busy_seconds)
        try:
            samplers.start(np.random.default_rng(0))
            FastLoop(settings, samplers, learner, replay, trainer, monitor).run()
        finally:
            if trainer is not None:
                trainer.close()
            samplers.close()
    rates = monitor.rates()
    return {"steps_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "segments": len(rates), "cpu_percent": monitor.cpu_percent(),
            "trainer_busy": monitor.busy_fraction() if kind == "fast" and config.concurrent
            else None,
            "peak_rss_mb": _peak_rss_mb()}


def _measure_learner(config, args, shape):
    """The learner's ceiling: the fast loop's trainer with prefetch, on a full replay."""
    import numpy as np

    from fast_dqn.agent.train_calls import TrainCalls
    from fast_dqn.loops.background_trainer import BackgroundTrainer
    from fast_dqn.run import components
    replay = components.build_replay(config, shape[1:])
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (1000, 84, 84), dtype=np.uint8)
    for start in range(0, args.replay, 1000):
        ends = rng.random(1000) < 1e-3
        replay.add_batch(frames, rng.integers(0, 6, 1000), rng.normal(size=1000), ends, ends)
    learner = components.build_learner(config, shape, 6)
    calls = TrainCalls(learner, replay, config.batch_size,
                       on_device=config.replay_device == "device")
    trainer = BackgroundTrainer(calls.train, calls.draw, prefetch=calls.mirror is None,
                                per_call=config.updates_per_call)
    trainer.start(20)  # compile and warm up
    trainer.wait()
    updates = args.steps // config.train_freq
    per_segment = max(1, updates // 5)
    rates, cpu0, t0 = [], _cpu_seconds(), time.perf_counter()
    for _ in range(5):
        t = time.perf_counter()
        trainer.start(per_segment)
        trainer.wait()
        rates.append(per_segment * config.train_freq / (time.perf_counter() - t))
    cpu = 100 * (_cpu_seconds() - cpu0) / (time.perf_counter() - t0)
    trainer.close()
    return {"steps_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "segments": len(rates), "cpu_percent": cpu, "peak_rss_mb": _peak_rss_mb()}


# --------------------------------------------------------------------------- the driving side

def cases(quick, worker_counts=(1, 2, 4, 8)):
    worker_counts = (2,) if quick else worker_counts
    modes = ((True, True), (False, False)) if quick else (
        (False, False), (False, True), (True, False), (True, True))
    out = [{"name": "nature", "kind": "nature", "label": "run_dqn.py (Nature loop)"}]
    for w in worker_counts:
        for concurrent, synchronize in modes:
            flag = lambda b: "on" if b else "off"
            out.append({"name": f"fast-{w}-{flag(concurrent)}-{flag(synchronize)}",
                        "kind": "fast", "workers": w, "concurrent": concurrent,
                        "synchronize": synchronize,
                        "label": f"run_fast_dqn.py W={w} concurrent={flag(concurrent)} "
                                 f"synchronize={flag(synchronize)}"})
    out.append({"name": "learner", "kind": "learner",
                "label": "ceiling: learner only (updates/s x 4)"})
    for w in (2,) if quick else worker_counts:
        out.append({"name": f"samplers-{w}", "kind": "samplers", "workers": w,
                    "concurrent": False, "label": f"ceiling: samplers only, W={w}"})
    return out


def warn_short_window(args):
    """The fast loop is timed over whole target periods, and its first ones hold the compiles
    of a GPU's first calls: a window of under 3 periods reads far below the steady state (one
    H200: 1,067 agent steps/s over one period, 4,337 over four)."""
    periods = args.steps // args.period
    if periods < 3 and not args.quick:
        print(f"speedtest: warning: --steps {args.steps:,} times the fast loop over "
              f"{periods} target period{'' if periods == 1 else 's'} of {args.period:,}; "
              "its rows are not steady state below 3 (give --steps of at least "
              f"{3 * args.period:,})", file=sys.stderr, flush=True)
    return periods


def run_case(case, args):
    command = [sys.executable, "-m", "benchmarks.speedtest", "--case", json.dumps(case)]
    command += [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                if k in ("steps", "warmup", "replay", "period", "threads", "nature_segment",
                         "samplers_segment", "epsilon", "updates_per_call", "replay_device",
                         "sampler_groups")
                and v is not None]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-4000:])
        raise SystemExit(f"speedtest: case {case['name']} failed")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (CI)")
    parser.add_argument("--steps", type=int, default=20_000, help="measured agent steps")
    parser.add_argument("--warmup", type=int, default=5_000, help="warm-up agent steps")
    parser.add_argument("--replay", type=int, default=100_000, help="replay capacity")
    parser.add_argument("--period", type=int, default=10_000, help="target update period")
    parser.add_argument("--threads", type=int, default=0, help="TF intra-op threads (0 = auto)")
    parser.add_argument("--epsilon", type=float, default=None,
                        help="hold epsilon at this value after warm-up (default: the Nature "
                             "schedule, about 0.98 in the measured window; 0.1 is the steady "
                             "state of a long run)")
    parser.add_argument("--nature-segment", type=int, default=5_000, help=argparse.SUPPRESS)
    parser.add_argument("--samplers-segment", type=int, default=5_000, help=argparse.SUPPRESS)
    parser.add_argument("--workers", default="1,2,4,8",
                        help="the W of the fast loop's cases, comma-separated (the samplers' "
                        "ceiling takes the largest)")
    parser.add_argument("--updates-per-call", type=int, default=0,
                        help="the fast loop's and the learner's minibatches per compiled call "
                        "(0: the run's default for the device that trains)")
    parser.add_argument("--replay-device", choices=("auto", "device", "host"), default="auto",
                        help="where their trainer gathers minibatches (docs/options.md)")
    parser.add_argument("--sampler-groups", type=int, default=1,
                        help="the fast loop's sampler groups (--sampler-groups: 1 or 2)")
    parser.add_argument("--repeats", type=int, default=1, help="times to run the whole list")
    parser.add_argument("--only", help="comma-separated case names (see the table)")
    parser.add_argument("--csv", default=None, help="CSV path (default benchmarks/results/)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        figures = measure(json.loads(args.case), args)
        print(json.dumps({**figures, "device": args.device}))
        return
    if args.quick:
        # One measured target period per fast case and two segments of the Nature loop:
        # enough to show that every case runs and reports its figures.
        args.steps, args.warmup, args.replay, args.period = 500, 250, 5_000, 500
        args.nature_segment, args.samplers_segment = 250, 250

    selected = cases(args.quick, tuple(int(w) for w in args.workers.split(",")))
    if args.only:
        wanted = set(args.only.split(","))
        selected = [c for c in selected if c["name"] in wanted]
    if any(case["kind"] == "fast" for case in selected):
        warn_short_window(args)
    rows = []
    for repeat in range(args.repeats):
        for case in selected:
            figures = run_case(case, args)
            rows.append({"repeat": repeat, "name": case["name"], "label": case["label"],
                         **figures})
            print(f"  {case['name']}: {figures['steps_per_s']:.1f} agent steps/s",
                  file=sys.stderr, flush=True)
    print_table(rows, args)
    write_csv(rows, args)


def print_table(rows, args):
    learner = [r["steps_per_s"] for r in rows if r["name"] == "learner"]
    nature = [r["steps_per_s"] for r in rows if r["name"] == "nature"]
    ceiling = statistics.median(learner) if learner else None
    baseline = statistics.median(nature) if nature else None
    print(f"\nspeedtest {datetime.date.today()} on {platform.node() or 'this machine'}: "
          f"{os.cpu_count()} CPUs, Pong, replay {args.replay:,}, warm-up {args.warmup:,}, "
          f"{args.steps:,} measured agent steps, repeats {args.repeats}, epsilon "
          f"{'Nature schedule' if args.epsilon is None else args.epsilon}; "
          f"{rows[0].get('device', 'device not recorded')}\n")
    print("| configuration | agent steps/s | × learner ceiling | × run_dqn.py | trainer busy | "
          "CPU % | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(r["name"] for r in rows):
        group = [r for r in rows if r["name"] == name]
        rate = statistics.median(r["steps_per_s"] for r in group)
        vs_ceiling = f"{rate / ceiling:.2f}" if ceiling and name != "learner" else "—"
        vs_nature = f"{rate / baseline:.2f}" if baseline and name != "nature" else "—"
        busy = [r["trainer_busy"] for r in group if r.get("trainer_busy") is not None]
        busy = f"{statistics.median(busy):.2f}" if busy else "—"
        print(f"| {group[0]['label']} | {rate:,.1f} | {vs_ceiling} | {vs_nature} | {busy} | "
              f"{statistics.median(r['cpu_percent'] for r in group):.0f} | "
              f"{max(r['peak_rss_mb'] for r in group):,.0f} |")


def write_csv(rows, args):
    path = args.csv or os.path.join(
        ROOT, "benchmarks", "results",
        f"speedtest-{'quick-' if args.quick else ''}{time.strftime('%Y%m%d-%H%M%S')}.csv")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
