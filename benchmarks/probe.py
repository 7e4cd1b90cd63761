"""Many questions in one short call: the update's variants, a profile of one call, and the
fast loop's acting and training side by side (benchmarks/gpu_probe.sh runs it on a GPU).

    KERAS_BACKEND=jax python -m benchmarks.probe --out runs/probe        # a GPU: ~4 minutes
    KERAS_BACKEND=jax python -m benchmarks.probe --tiny --out runs/probe # any CPU: seconds
    KERAS_BACKEND=jax python -m benchmarks.probe --parts samplers        # a CPU's Python cost

Parts, in order, each within what is left of --seconds (a part that does not fit is listed
as not measured):
  variants  the learner alone, batch 32, replay on the device: updates/s of the default
            (K = 64) and of one change at a time: K = 16 and 256; GPU kernels free to be
            non-deterministic; the scan unrolled by 2, 4 and 8 (1 on a CPU); convolutions
            and products in exact float32, in TF32, and in bfloat16 with float32 master
            weights; the optimizer's step fused over all weights
  profile   one K = 64 call under JAX's profiler: the kernels (XLA's thunks on a CPU) per
            update, the ten costliest with their µs and share, and how much of the call's
            wall time the device was busy
  loop      the fast loop at W = 32 in two sampler groups, at K = 8, 16, 32 and 64: agent
            steps/s over 4 target periods, each round's acting call (p50, p99) while the
            trainer trains and while it does not, and the trainer's call length; at K = 64
            again acting on the CPU (--act-on-cpu)
  samplers  the samplers alone (replay written at sync points, nothing trained): the acting
            call with no training beside it at W = 32, and at W = 64 the main thread's CPU
            per round outside the acting call (its Python cost)

--tiny measures CartPole's MLP and a fast loop of 4 CartPole games instead, in seconds, so
that a test keeps every part working on any machine. The table names the device, the
backend and the commit; `--out` also keeps every figure in probe.json.
"""

import argparse
import contextlib
import dataclasses
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What a probe measures with: the GPU's sizes, or --tiny's."""
    network: str          # "cnn" (Nature, 84x84 frames) or "mlp" (CartPole)
    replay: int           # the learner part's replay, transitions
    call_seconds: float   # timed seconds per variant
    loop_game: dict       # FastConfig's game or env
    workers: int          # W in the loop
    groups: int           # sampler groups in the loop
    python_workers: int   # W where the main thread's Python cost is measured
    period: int           # the target period C, agent steps
    warmup: int           # the loop's warm-up, agent steps
    loop_replay: int
    periods: int          # target periods measured per K (after one that compiles)
    ks: tuple             # K of the loop part
    k: int                # K of the variants and the profile
    other_ks: tuple       # the variants' other K


GPU = Sizes("cnn", 50_000, 1.0, {"game": "pong"}, 32, 2, 64, 10_000, 20_000, 100_000, 4,
            (8, 16, 32, 64), 64, (16, 256))
# A CPU unrolls all K of a call, and compiles for seconds per update: small K.
TINY = Sizes("mlp", 2_000, 0.2, {"env": "CartPole-v1", "network": "nature"}, 4, 1, 8, 200,
             400, 4_000, 4, (8, 16), 8, (4, 16))


def variants(sizes, cpu):
    """(name, CompileOptions fields, --matmul-precision, --precision, K), the default first."""
    k = sizes.k
    unrolls = (1, 2, 4) if cpu else (2, 4, 8)  # a CPU unrolls all K by default, a GPU by 1
    return ([("default", {}, "default", "float32", k)]
            + [(f"K = {other}", {}, "default", "float32", other) for other in sizes.other_ks]
            + [("kernels not deterministic", {"deterministic": False}, "default", "float32", k)]
            + [(f"scan unrolled by {u}", {"scan_unroll": u}, "default", "float32", k)
               for u in unrolls]
            + [("exact float32 products", {}, "float32", "float32", k),
               ("TF32 products", {}, "tf32", "float32", k),
               ("bfloat16, float32 master weights", {}, "default", "bfloat16", k),
               ("optimizer step fused", {"fused_optimizer": True}, "default", "float32", k)])


@contextlib.contextmanager
def matmul_precision(name):
    import jax

    from fast_dqn.agent.backend_setup import JAX_MATMUL
    if JAX_MATMUL[name] is None:
        yield
        return
    with jax.default_matmul_precision(JAX_MATMUL[name]):
        yield


class Learners:
    """One variant's learner at a time on one full replay, mirrored on the device."""

    def __init__(self, sizes):
        from benchmarks.learner import filled_replay
        self.sizes = sizes
        self.replay = filled_replay(np.random.default_rng(0), sizes.network, sizes.replay)

    def build(self, fields, precision):
        from benchmarks.learner import build
        from fast_dqn.agent.compile_options import CompileOptions
        learner = build(self.sizes.network, precision, CompileOptions(**fields))
        return learner, learner.mirror_replay(self.replay)

    def draws(self, k, count=4):
        return [self.replay.sample_indices_many(k, 32) for _ in range(count)]


def measure_variant(learners, variant):
    """updates/s, µs an update and the first call's seconds (its compile) of one variant."""
    name, fields, matmul, precision, k = variant
    with matmul_precision(matmul):
        learner, mirror = learners.build(fields, precision)
        draws = learners.draws(k)
        t = time.perf_counter()
        learner.train_from_replay(mirror, *draws[0])
        first = time.perf_counter() - t
        learner.train_from_replay(mirror, *draws[1])
        calls, t = 0, time.perf_counter()
        while calls < 2 or time.perf_counter() - t < learners.sizes.call_seconds:
            learner.train_from_replay(mirror, *draws[calls % len(draws)])
            calls += 1
        seconds = time.perf_counter() - t
    rate = calls * k / seconds
    return {"variant": name, "k": k, "updates_per_s": rate, "us_per_update": 1e6 / rate,
            "first_call_s": first}


def _kernel_lines(profile, on_gpu):
    """(device, [events]) of the profile's kernels: GPU streams, else XLA:CPU's thunks."""
    if on_gpu:  # none where the profiler could not trace the GPU (no CUPTI): said so
        return "GPU", [e for plane in profile.planes if plane.name.startswith("/device:GPU")
                       for line in plane.lines if line.name.startswith("Stream")
                       for e in line.events]
    # XLA:CPU's threads hold its thunks (named for their HLO instructions) and the
    # executor's own scopes (C++ names), which are not kernels.
    return "CPU", [e for plane in profile.planes if plane.name == "/host:CPU"
                   for line in plane.lines if line.name.startswith("tf_XLA")
                   for e in line.events
                   if not e.name.startswith("end: ") and "::" not in e.name]


def profile_call(learners, k):
    """One K-update call of the default variant under JAX's profiler, summarised.

    Returns:
        {"kernels_per_update", "busy_share", "call_us", "top": [(name, count, µs, share)]}.
    """
    import jax
    learner, mirror = learners.build({}, "float32")
    draws = learners.draws(k)
    for drawn in draws[:2]:
        learner.train_from_replay(mirror, *drawn)  # compiled and warm
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder)
        t = time.perf_counter()
        learner.train_from_replay(mirror, *draws[2])
        call_us = (time.perf_counter() - t) * 1e6
        jax.profiler.stop_trace()
        files = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        profile = jax.profiler.ProfileData.from_file(files[0])
        where, events = _kernel_lines(profile, jax.default_backend() == "gpu")
        totals = {}
        for event in events:
            count, ns = totals.get(event.name, (0, 0.0))
            totals[event.name] = (count + 1, ns + event.duration_ns)
    busy_us = sum(ns for _, ns in totals.values()) / 1e3
    top = sorted(totals.items(), key=lambda item: -item[1][1])[:10]
    return {"where": where, "kernels": len(events), "kernels_per_update": len(events) / k,
            "call_us": call_us, "busy_us": busy_us, "busy_share": busy_us / call_us,
            "top": [(name[:70], count, ns / 1e3, ns / 1e3 / busy_us if busy_us else 0.0)
                    for name, (count, ns) in top]}


class Timed:
    """The acting calls and the trainer's calls of one loop, timed where they run.

    Each acting call is marked as made while a train call ran or not; its main-thread CPU
    seconds are summed, so the main thread's Python cost is its CPU less theirs.
    """

    def __init__(self):
        self.training = threading.Event()
        self.acting = {True: [], False: []}   # seconds, by whether the trainer trained
        self.acting_cpu = 0.0
        self.emulator_cpu = 0.0   # main-thread CPU inside the emulators' send, recv and step
        self.train_calls = []
        self.recording = False

    def emulator_call(self, call):
        """`call` with the main thread's CPU in it counted (ale-py's recv may spin)."""
        def timed(*args):
            cpu = time.thread_time()
            try:
                return call(*args)
            finally:
                if self.recording:
                    self.emulator_cpu += time.thread_time() - cpu
        return timed

    def acting_call(self, q_values):
        def timed(states):
            during = self.training.is_set()
            t, cpu = time.perf_counter(), time.thread_time()
            q = q_values(states)
            if self.recording:
                self.acting[during].append(time.perf_counter() - t)
                self.acting_cpu += time.thread_time() - cpu
            return q
        return timed

    def train_call(self, train):
        def timed(drawn):
            self.training.set()
            t = time.perf_counter()
            try:
                return train(drawn)
            finally:
                self.training.clear()
                if self.recording:
                    self.train_calls.append(time.perf_counter() - t)
        return timed


def _ms(values, q):
    if not values:
        return None
    return 1e3 * float(np.percentile(values, q))


def run_loop(sizes, workers, k, train=True, act_on_cpu=False):
    """One fast loop (or, train=False, the samplers alone), timed over `sizes.periods`."""
    from benchmarks.speedtest import TimingMonitor
    from fast_dqn.agent.schedules import LinearSchedule
    from fast_dqn.agent.train_calls import TrainCalls
    from fast_dqn.loops.background_trainer import BackgroundTrainer
    from fast_dqn.loops.fast_loop import FastLoop
    from fast_dqn.run import components
    from fast_dqn.run.settings.hyperparameters import FastConfig
    from fast_dqn.run.settings.validation import resolve

    period = sizes.period
    first_sync = -(-sizes.warmup // period) * period
    start = first_sync + period if train else workers * 50
    end = start + sizes.periods * period
    config = resolve(FastConfig(**sizes.loop_game, workers=workers, timesteps=end,
                                sampler_groups=sizes.groups if workers % 2 == 0 else 1,
                                replay_capacity=sizes.loop_replay, prepopulate=sizes.warmup,
                                target_update_freq=period, train_freq=4, evaluate=0,
                                eps_start=0.1, eps_end=0.1, updates_per_call=k,
                                replay_device="device", act_on_cpu=act_on_cpu, seed=0))
    settings = components.loop_settings(config)
    if not train:  # act every round, never train: past validation, as speedtest's samplers
        settings = dataclasses.replace(settings, prepopulate=0, train_freq=10**9,
                                       exploration=LinearSchedule(0.1, 0.1, 1))
    backend = components.build_local_backend(config)
    shape = backend.observation_space.shape
    learner = components.build_learner(config, shape, backend.num_actions)
    replay = components.build_replay(config, shape[1:] if sizes.network == "cnn" else shape[1:],
                                     num_shards=config.workers,
                                     frame_dtype=backend.observation_space.dtype)
    # Touched once first, as a run's replay is after its first fill: the window then times
    # the writes of the steady state, not the first touch of each page.
    for array in replay.arrays().values():
        array.fill(0)
    timed = Timed()
    learner.acting_q_values = timed.acting_call(learner.acting_q_values)
    for games in getattr(backend, "groups", None) or [backend.samplers]:
        for name in ("send", "recv", "step"):
            if hasattr(games, name):
                setattr(games, name, timed.emulator_call(getattr(games, name)))
    # Alone, a trainer with nothing to train: replay is written at sync points as in the
    # loop (without one, the loop trains in lockstep and writes replay every round).
    calls = TrainCalls(learner, replay, config.batch_size, on_device=True)
    trainer = BackgroundTrainer(timed.train_call(calls.train), calls.draw, prefetch=False,
                                per_call=k)

    class Monitor(TimingMonitor):
        cpu_marks = []

        def tick(self, step, epsilon):
            if self.marks and step >= self.marks[0]:
                timed.recording = True
                self.cpu_marks.append((time.thread_time(),
                                       timed.acting_cpu + timed.emulator_cpu,
                                       timed.emulator_cpu))
            super().tick(step, epsilon)

    monitor = Monitor(start, period if train else max(workers * 50, period), end,
                      busy=trainer.busy_seconds)
    try:
        backend.start(np.random.default_rng(0))
        FastLoop(settings, backend, learner, replay, trainer, monitor).run()
    finally:
        trainer.close()
        backend.close()
    rates = monitor.rates()
    (cpu0, calls0, emu0), (cpu1, calls1, emu1) = monitor.cpu_marks[0], monitor.cpu_marks[-1]
    rounds = (monitor.points[-1][0] - monitor.points[0][0]) / workers
    return {"workers": workers, "k": k, "train": train, "act_on_cpu": act_on_cpu,
            "steps_per_s": statistics.median(rates) if rates else None,
            "trainer_busy": monitor.busy_fraction() if train else None,
            "acting_p50_ms": {during: _ms(timed.acting[during], 50) for during in (True, False)},
            "acting_p99_ms": {during: _ms(timed.acting[during], 99) for during in (True, False)},
            "acting_calls": {during: len(timed.acting[during]) for during in (True, False)},
            "train_call_ms": _ms(timed.train_calls, 50),
            "python_ms_per_round": 1e3 * ((cpu1 - cpu0) - (calls1 - calls0)) / rounds
            if rounds else None,
            "emulator_cpu_ms_per_round": 1e3 * (emu1 - emu0) / rounds if rounds else None}


# --------------------------------------------------------------------------- the table

def _f(value, digits=0, unit=""):
    return "–" if value is None else f"{value:,.{digits}f}{unit}"


def table(header, results):
    lines = [f"# Probe: {header}", ""]
    if results.get("tiny"):
        seconds = results["sizes"]["call_seconds"]
        lines += [f"tiny sizes (--tiny: CartPole's MLP, 4 CartPole games, windows of {seconds:g} "
                  "s): a check that every part runs, not a measurement of this machine", ""]
    found = results.get("variants", [])
    if found:
        base = found[0]["updates_per_s"]
        lines += ["| update variant, batch 32 | updates/s | µs an update | vs default | "
                  "first call s |", "|---|---|---|---|---|"]
        lines += [f"| {v['variant']} | {_f(v['updates_per_s'])} | {_f(v['us_per_update'], 1)} "
                  f"| {v['updates_per_s'] / base:.2f} | {_f(v['first_call_s'], 1)} |"
                  for v in found]
        lines.append("")
    profile = results.get("profile")
    if profile:
        k = results["sizes"]["k"]
        lines += [f"One K = {k} call under the profiler: {profile['kernels']:,} kernels "
                  f"({profile['where']}), {profile['kernels_per_update']:.1f} an update; the "
                  f"call took {profile['call_us']:,.0f} µs, its kernels "
                  f"{profile['busy_us']:,.0f} µs summed over streams and threads "
                  f"({profile['busy_share']:.0%} of it).", "",
                  "| kernel | count | µs | share |", "|---|---|---|---|"]
        lines += [f"| `{name}` | {count} | {us:,.0f} | {share:.1%} |"
                  for name, count, us, share in profile["top"]]
        lines.append("")
    loops = results.get("loop", [])
    if loops:
        lines += ["| fast loop | agent steps/s | trainer busy | acting p50 / p99 ms, training "
                  "| alone | train call ms | main thread CPU ms a round: Python / in ale-py |",
                  "|---|---|---|---|---|---|---|"]
        for r in loops:
            what = (f"W = {r['workers']}, K = {r['k']}" if r["train"]
                    else f"samplers alone, W = {r['workers']}")
            if r.get("act_on_cpu"):
                what += ", acting on the CPU"
            lines.append(
                f"| {what} | {_f(r['steps_per_s'])} | {_f(r['trainer_busy'], 2)} | "
                f"{_f(r['acting_p50_ms'][True], 2)} / {_f(r['acting_p99_ms'][True], 2)} | "
                f"{_f(r['acting_p50_ms'][False], 2)} / {_f(r['acting_p99_ms'][False], 2)} | "
                f"{_f(r['train_call_ms'], 1)} | {_f(r['python_ms_per_round'], 2)} / "
                f"{_f(r.get('emulator_cpu_ms_per_round'), 2)} |")
        lines.append("")
    for part in results.get("not_measured", []):
        lines.append(f"not measured: {part}")
    return "\n".join(lines).rstrip() + "\n"


def header_line(device):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    return f"{device}; {os.cpu_count()} cores; commit {commit}"


PARTS = ("variants", "profile", "loop", "samplers")


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true",
                        help="CartPole's MLP and 4 CartPole games: seconds, on any machine")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--call-seconds", type=float,
                        help="timed seconds per update variant (default: 1, --tiny 0.2)")
    parser.add_argument("--seconds", type=float, default=220.0,
                        help="the whole probe's budget; a part that does not fit is skipped")
    parser.add_argument("--out", help="a folder for probe.md and probe.json")
    args = parser.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        parser.error(f"--parts: unknown {', '.join(sorted(unknown))}; use {', '.join(PARTS)}")
    if args.call_seconds is not None and not args.call_seconds > 0:
        parser.error(f"--call-seconds: must be above 0, got {args.call_seconds}")
    if os.environ.get("KERAS_BACKEND") != "jax":
        parser.error("the probe measures JAX's compiled calls: run it with KERAS_BACKEND=jax")
    return args


def loop_runs(sizes, parts):
    """(W, K, train, act_on_cpu) of each loop the parts ask for, in order."""
    runs = []
    if "loop" in parts:
        runs += ([(sizes.workers, k, True, False) for k in sizes.ks]
                 + [(sizes.workers, sizes.ks[-1], True, True)])
    if "samplers" in parts:
        runs += [(sizes.workers, sizes.ks[-1], False, False),
                 (sizes.python_workers, sizes.ks[-1], False, False)]
    return runs


def measure(parts, sizes, cpu, results, left, tiny, save=lambda: None):
    """Run the parts into `results`; a part left() has no time for is listed not measured.

    save() is called after each measurement, so that a probe stopped from outside keeps what
    it measured.
    """
    # The least each part needs to end inside the budget, from the GPU's first call.
    needs = {} if tiny else {"variants": 8.0, "profile": 10.0, "loop": 40.0}
    if "variants" in parts or "profile" in parts:
        learners = Learners(sizes)
    if "variants" in parts:
        results["variants"] = []
        for variant in variants(sizes, cpu):
            if left() < needs.get("variants", 0) + needs.get("loop", 0) * ("loop" in parts):
                results["not_measured"].append(f"variant {variant[0]} (budget)")
                continue
            found = measure_variant(learners, variant)
            print(f"{found['variant']}: {found['updates_per_s']:,.0f} updates/s", flush=True)
            results["variants"].append(found)
            save()
    if "profile" in parts:
        if left() < needs.get("profile", 0):
            results["not_measured"].append("profile (budget)")
        else:
            results["profile"] = profile_call(learners, sizes.k)
            save()
    runs = loop_runs(sizes, parts)
    if runs:
        results["loop"] = []
    last = needs.get("loop", 0) / 2  # a loop's seconds, from the last one measured
    for workers, k, train, act_on_cpu in runs:
        what = f"loop W = {workers}, K = {k}" if train else f"samplers W = {workers}"
        what += ", acting on the CPU" if act_on_cpu else ""
        if left() < 1.2 * last:
            results["not_measured"].append(f"{what} (budget)")
            continue
        began = time.perf_counter()
        found = run_loop(sizes, workers, k, train, act_on_cpu)
        last = time.perf_counter() - began
        print(f"{what}: {_f(found['steps_per_s'])} agent steps/s", flush=True)
        results["loop"].append(found)
        save()


def main(argv=None):
    args = parse(argv)
    start = time.perf_counter()
    from fast_dqn.agent.backend_setup import configure_backend, device_line
    device = device_line(*configure_backend(0))
    import jax
    sizes = TINY if args.tiny else GPU
    if args.call_seconds:
        sizes = dataclasses.replace(sizes, call_seconds=args.call_seconds)
    header = header_line(device)
    print(header, flush=True)
    results = {"header": header, "sizes": dataclasses.asdict(sizes), "tiny": args.tiny,
               "not_measured": []}
    def save():
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "probe.md"), "w") as f:
                f.write(table(header, results))
            with open(os.path.join(args.out, "probe.json"), "w") as f:
                json.dump(results, f, indent=1, default=str)
    measure(args.parts.split(","), sizes, jax.default_backend() == "cpu", results,
            lambda: args.seconds - (time.perf_counter() - start), args.tiny, save)
    save()
    print(table(header, results), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
