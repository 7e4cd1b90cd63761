"""`fast-dqn suite`: the Atari benchmark in one command.

    fast-dqn suite --games GAMES --seeds N --timesteps T [--loop fast|nature] [--preset P]
                   [--parallel K] [--runs-per-process G] [--backend local|ray] --logdir DIR
                   [-- RUN FLAGS...]

Each game × seed is an ordinary run directory, DIR/GAME/seed-S, made and resumed by the
training command itself (`fast-dqn fast` or `fast-dqn nature`), so --resume, evaluate and
plot work on each. The same command again continues the unfinished runs and skips the
finished ones. `fast-dqn plot DIR --aggregate` scores the suite.

The main thread parses, checks, draws the table and takes the signals; the runs go on in
fast_dqn.suite.local_runs' lanes or as Ray tasks (fast_dqn.suite.ray_runs).
"""

import argparse
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from fast_dqn.errors import ConfigError
from fast_dqn.run.logs.progress import counted
from fast_dqn.run.settings.presets import PRESETS
from fast_dqn.suite.plan import (
    DAMAGED,
    FINISHED,
    NEW,
    Suite,
    check_logdir,
    check_parallel,
    check_run_flags,
    damaged_note,
    run_state,
    write_suite_file,
)

# The plan holds one run per game × seed, built before anything starts: 100 million seeds
# took a minute and 6 GB before a word was said. Each seed is a whole training run of every
# game, and benchmarks use a handful (Dopamine's published curves are of 5): 1,000 is ample.
MOST_SEEDS = 1_000


def build_parser(prog):
    """The suite's argument parser, named `prog`, which refuses bad flags in one line (status 2)."""
    parser = argparse.ArgumentParser(
        prog=prog, usage=f"{prog} --games GAMES --timesteps T --logdir DIR [options] "
        "[-- RUN FLAGS...]", description="Run games × seeds of one protocol, each an "
        "ordinary run directory DIR/GAME/seed-S, K at a time here or on a Ray cluster; the "
        "same command again resumes the unfinished runs. Flags after -- go to every run.")
    parser.error = lambda message: _refuse(prog, message)
    parser.add_argument("--games", required=True, help="games separated by commas "
                        "(pong,breakout,space_invaders), or a set: atari57, dopamine60, "
                        "nature49")
    parser.add_argument("--seeds", type=_whole, default=1, metavar="N",
                        help=f"seeds 0 to N-1 of each game, at most {MOST_SEEDS:,} "
                        "(default: 1)")
    parser.add_argument("--timesteps", type=_count, required=True, metavar="T",
                        help="agent steps of each run (250k, 1M, 1e7, ...)")
    parser.add_argument("--loop", choices=("fast", "nature"), default="fast",
                        help="fast: run_fast_dqn.py (default); nature: run_dqn.py")
    parser.add_argument("--preset", default=None, choices=tuple(PRESETS),
                        help="the protocol of every run (`fast-dqn fast --help` says what "
                        "each is; default: the Nature protocol)")
    parser.add_argument("--parallel", type=_whole, default=1, metavar="K",
                        help="--backend local: runs at a time, sharing this machine's cores "
                        "and its GPU (default: 1)")
    parser.add_argument("--runs-per-process", type=_whole, default=1, metavar="G",
                        help="--loop fast, KERAS_BACKEND=jax: G runs in one process as a run "
                        "group, their updates and acting each one compiled call, so that runs "
                        "sharing a GPU add up (`fast-dqn group`); --parallel counts processes, "
                        "and on Ray a group is one task (default: 1, a process per run)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="local: on this machine (default); ray: each run a Ray task")
    parser.add_argument("--ray-address", default=None, metavar="ADDRESS",
                        help="--backend ray: the cluster's head (`ray start --head` prints "
                        "it); default: a private cluster on this machine")
    parser.add_argument("--cpus-per-run", type=_whole, default=None, metavar="C",
                        help="--backend ray: CPUs each run asks Ray for (default: 2)")
    parser.add_argument("--gpus-per-run", type=_finite, default=0.0, metavar="G",
                        help="--backend ray: GPUs each run asks for, a fraction to share one "
                        "(default: 0)")
    parser.add_argument("--logdir", required=True, metavar="DIR",
                        help="the suite's directory: new, empty, or this suite's")
    parser.add_argument("--plain", action="store_true",
                        help="print the table as lines every --interval seconds, for logs "
                        "(the default where the output is not a terminal)")
    parser.add_argument("--interval", type=_finite, default=None, metavar="SECONDS",
                        help="how often the table is shown (default: 2 live, 300 plain)")
    return parser


def _refuse(prog, message):
    print(f"{prog}: error: {message} (see --help)", file=sys.stderr)
    sys.exit(2)


def _whole(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _finite(text):
    # nan passes every comparison check after it, and Ray takes inf: both are refused here.
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _count(text):
    from fast_dqn.run.settings.flags import parse_count
    return parse_count(text)


def main(argv=None, prog="fast-dqn suite"):
    """Run `fast-dqn suite`: check everything, then run or resume each game × seed to its end.

    Args:
        argv: the suite's flags, then after "--" the flags every run gets; None: sys.argv.
        prog: the command's name, for its usage line and messages.

    Returns:
        The exit status: 0 when every run finished, 1 when some did not, 2 for bad input,
        128 + the signal's number when a signal stopped the suite, 130 when a second Ctrl-C
        aborted it.
    """
    if argv is None:  # the whole process: a closed terminal must not end the suite
        from fast_dqn.run.logs.progress import OutlivesConsole
        sys.stdout, sys.stderr = OutlivesConsole(sys.stdout), OutlivesConsole(sys.stderr)
    argv = list(sys.argv[1:] if argv is None else argv)
    run_flags = []
    if "--" in argv:
        run_flags, argv = argv[argv.index("--") + 1:], argv[:argv.index("--")]
    args = build_parser(prog).parse_args(argv)
    try:
        suite, runs, config = _checked(args, run_flags)
        lock = _hold(suite.logdir)
    except ConfigError as error:
        print(f"{prog}: error: {_worded(error)}", file=sys.stderr)
        return 2
    stopping, signals = threading.Event(), []
    previous = _take_signals(prog, stopping, signals)
    try:
        return _run(prog, args, suite, runs, config, stopping, signals)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        lock.close()


def _hold(logdir):
    """DIR/suite.lock, held while the suite runs: a second suite on DIR is refused."""
    import fcntl

    from fast_dqn.errors import STORAGE_ERRORS, storage_advice
    path = os.path.join(logdir, "suite.lock")
    try:
        os.makedirs(logdir, exist_ok=True)
        lock = open(path, "a+")
    except OSError as error:
        if error.errno not in STORAGE_ERRORS:
            raise
        # Before any run starts: a refusal (exit 2), nothing written.
        raise ConfigError("logdir", f"cannot write {path} ({error.strerror}); "
                          f"{storage_advice(error.errno)}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise ConfigError("logdir", f"{logdir} is in use by {holder}: one suite at a time "
                          "on a directory; wait for it, or stop it") from None
    lock.truncate(0)
    lock.write(f"process {os.getpid()} on {os.uname().nodename}")
    lock.flush()
    return lock


def _worded(error):
    names = {"games": "--games", "logdir": "--logdir", "parallel": "--parallel",
             "runs_per_process": "--runs-per-process",
             "run_flags": "RUN FLAGS", "ray_address": "--ray-address"}
    return error.worded(lambda setting: names.get(setting, f"--{setting.replace('_', '-')}"))


def _checked(args, run_flags):
    """The Suite and its runs, everything checked before anything is written."""
    from fast_dqn.envs.games import available_games
    from fast_dqn.suite.game_sets import parse_games
    _check_numbers(args)
    games = tuple(parse_games(args.games, available_games()))
    suite = Suite(os.path.abspath(args.logdir), games, tuple(range(args.seeds)),
                  args.timesteps, args.loop, args.preset, tuple(run_flags))
    check_logdir(suite)
    config = check_run_flags(suite)
    runs = suite.runs()
    if args.backend == "local":
        if args.runs_per_process > 1:
            _check_groups(suite, config)
        check_parallel(args.parallel, sum(run_state(r, suite.timesteps) not in (FINISHED,
                                                                                DAMAGED)
                                          for r in runs) or 1,
                       _cores(), _replay_bytes(config), _available_memory(),
                       args.runs_per_process)
    else:
        if args.runs_per_process > 1:
            _check_groups(suite, config)
        if args.parallel != 1:
            raise ConfigError("parallel", "is for --backend local; on Ray, --cpus-per-run "
                              "and --gpus-per-run decide how many runs share a machine")
        import importlib.util
        if importlib.util.find_spec("ray") is None:
            raise ConfigError("backend", "ray is not installed; pip install -e \".[ray]\" "
                              "(or use --backend local)")
        from fast_dqn.loops.ray_cluster import check_reachable
        if args.ray_address:
            check_reachable(args.ray_address)
    return suite, runs, config


def _check_groups(suite, config):
    """Runs in groups: the fast loop on JAX, in the one mode a group trains in."""
    from fast_dqn.run.group_training import check_group_mode
    if suite.loop != "fast":
        raise ConfigError("runs_per_process", "groups the fast loop's runs; drop it for "
                          "--loop nature")
    if os.environ.get("KERAS_BACKEND", "").strip() != "jax":
        raise ConfigError("runs_per_process", "a run group trains on JAX only; start the "
                          "suite with KERAS_BACKEND=jax (pip install -e '.[jax]'), or drop it")
    check_group_mode(config)


def _check_numbers(args):
    """The suite's own flags, each against what it can be."""
    if args.runs_per_process < 1:
        raise ConfigError("runs_per_process", f"must be 1 or more, not "
                          f"{args.runs_per_process}")
    if args.seeds < 1:
        raise ConfigError("seeds", f"must be 1 or more, not {args.seeds}")
    if args.seeds > MOST_SEEDS:
        raise ConfigError("seeds", f"{args.seeds:,} seeds is more than the {MOST_SEEDS:,} a "
                          "suite takes: each seed is a whole run of every game; give fewer")
    if args.timesteps < 1:
        raise ConfigError("timesteps", "must be 1 or more agent steps")
    if args.backend == "local" and (args.ray_address or args.gpus_per_run
                                    or args.cpus_per_run is not None):
        raise ConfigError("backend", "--ray-address, --cpus-per-run and --gpus-per-run are "
                          "for --backend ray")
    if args.cpus_per_run is not None and args.cpus_per_run < 1:
        raise ConfigError("cpus_per_run", f"must be 1 or more, not {args.cpus_per_run}")
    if args.gpus_per_run < 0:
        raise ConfigError("gpus_per_run", f"must be 0 or more, not {args.gpus_per_run:g}")
    if args.interval is not None and args.interval <= 0:
        raise ConfigError("interval", f"must be more than 0 seconds, not {args.interval:g}")


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _replay_bytes(config):
    from fast_dqn.agent.replay_memory import estimate_bytes
    return estimate_bytes(config.replay_capacity, (84, 84), "uint8")


def _available_memory():
    from fast_dqn.agent.replay_memory import available_memory_bytes
    return available_memory_bytes()


def gpus():
    """`nvidia-smi -L`'s line for each GPU ("GPU 0: ..."); [] where it is missing or fails."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in listed.splitlines() if line.startswith("GPU ")]


def local_plan(parallel, runs_per_process=1, replay_bytes=0):
    """How `parallel` processes share this machine's cores and its GPU.

    Args:
        parallel: how many processes go at a time (--parallel).
        runs_per_process: the runs of each process, a run group where more than 1.
        replay_bytes: one run's replay, in bytes, for the words on a group's memory.

    Returns:
        (threads, env, words): each process's --threads, the environment the processes start
        in, and the start-up line's words on how they share the machine.
    """
    cores = _cores()
    threads = max(1, cores // parallel)
    env = dict(os.environ)
    words = (f"{parallel} at a time on this machine's {cores} cores, {threads} each "
             f"(--threads {threads})")
    if runs_per_process > 1:
        size = runs_per_process * replay_bytes / 2**30
        words = (f"in groups of {runs_per_process} runs, one process each, their updates and "
                 f"acting each one compiled call; a group holds {size:.1f} GiB of replay "
                 f"(and as much again on a GPU that mirrors it); groups {words}")
    if env.get("KERAS_BACKEND", "").strip().lower() == "jax":
        words += " for the games; JAX sizes its own CPU threads"
    found = gpus()
    if not found:
        return threads, env, words + "; no GPU seen"
    if parallel > 1 and "XLA_PYTHON_CLIENT_MEM_FRACTION" not in env:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.9 / parallel:.2f}"
    return threads, env, (words + f"; they share the GPU ({found[0].split(' (')[0]}): "
                          "TensorFlow gives each the memory it grows to, JAX "
                          f"{env.get('XLA_PYTHON_CLIENT_MEM_FRACTION', 'its default')} of it "
                          "(XLA_PYTHON_CLIENT_MEM_FRACTION)")


def _take_signals(prog, stopping, signals):
    """Take the suite's signals; returns the handlers they replaced, to put back. On Ctrl-C,
    SIGTERM or a closed terminal every run checkpoints and stops, and no new one starts; a
    second Ctrl-C aborts them without a checkpoint."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    from fast_dqn.run.interrupts import SAME_REQUEST_SECONDS
    first = []

    def stop(received, frame):
        now = time.monotonic()
        if not first:
            first.append(now)
            signals.append(received)
            stopping.set()
            _say(f"{prog}: {signal.Signals(received).name}: stopping every run with a "
                 "checkpoint; Ctrl-C again (after a second) aborts them without one")
        elif received == signal.SIGINT and now - first[0] > SAME_REQUEST_SECONDS:
            # As a run's own handler: only a later Ctrl-C aborts; a repeated signal (timeout's
            # to the process group) or a SIGTERM is the same request.
            signals.append(received)

    return {signum: signal.signal(signum, stop)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
            if signum != signal.SIGHUP or signal.getsignal(signum) is not signal.SIG_IGN}


def _say(text):
    try:
        os.write(2, (text + "\n").encode())
    except OSError:
        pass


def _run(prog, args, suite, runs, config, stopping, signals):
    todo = _announce(prog, suite, runs)
    live = sys.stdout.isatty() and not args.plain
    events = []  # live: printed above the table by the main thread
    tell = events.append if live else (lambda text: print(text, flush=True))
    try:
        worker = _start_worker(prog, args, suite, todo, config, stopping, tell)
    except ConfigError as error:
        print(f"{prog}: error: {_worded(error)}", file=sys.stderr)
        return 2
    outcomes, broken, aborted = _watch(worker, suite, runs, live, events, signals,
                                       args.interval or (2.0 if live else 300.0))
    worker.close()
    for text in events:
        print(text, flush=True)
    return _ending(prog, suite, runs, outcomes, signals, aborted, broken)


def _announce(prog, suite, runs):
    """The start-up lines: the suite, and what it skips and resumes; returns the runs to do.
    A run whose config.json is damaged is named (on stderr), and left alone."""
    states = {run.name: run_state(run, suite.timesteps) for run in runs}
    todo = [run for run in runs if states[run.name] not in (FINISHED, DAMAGED)]
    of = f"`fast-dqn {suite.loop}" + (f" --preset {suite.preset}`" if suite.preset else "`")
    print(f"{prog}: {counted(len(runs), 'run')} ({counted(len(suite.games), 'game')}"
          f" × {counted(len(suite.seeds), 'seed')}) of {of}, "
          f"{suite.timesteps:,} agent steps each, in {suite.logdir}", flush=True)
    for run in runs:
        if states[run.name] == DAMAGED:
            print(f"{prog}: {damaged_note(run, suite)}", file=sys.stderr, flush=True)
    skipped = sum(state == FINISHED for state in states.values())
    resuming = sum(states[run.name] != NEW for run in todo)
    if skipped or resuming:
        print(f"{prog}: {skipped} finished already, skipped; {resuming} to resume from "
              f"{'its checkpoint' if resuming == 1 else 'their checkpoints'}", flush=True)
    return todo


def _start_worker(prog, args, suite, todo, config, stopping, tell):
    """Lanes on this machine, or Ray tasks on a cluster it joined, ready to run (suite.json is
    written once the runs have somewhere to go)."""
    if args.backend == "ray":
        from fast_dqn.suite.ray_runs import RayTasks, counted_share
        cpus = args.cpus_per_run or 2
        # Its replay, and a GiB for the rest of the process.
        memory = int(1.1 * _replay_bytes(config)) + 2**30
        worker = RayTasks(suite, todo, args.ray_address, cpus, args.gpus_per_run, stopping,
                          tell, memory=memory, runs_per_process=args.runs_per_process)
        worker.connect(gpus=len(gpus()))
        g = args.runs_per_process
        words = f"each run a Ray task of {counted(cpus, 'CPU')} and " \
            f"{counted_share(args.gpus_per_run, 'GPU')}, placed by Ray"
        if g > 1:
            words = (f"in groups of {g} runs, each group a Ray task of "
                     f"{counted(cpus * g, 'CPU')} and "
                     f"{counted_share(args.gpus_per_run * g, 'GPU')} (per run: --cpus-per-run, "
                     "--gpus-per-run), placed by Ray")
    else:
        from fast_dqn.suite.local_runs import Lanes
        threads, env, words = local_plan(args.parallel, args.runs_per_process,
                                         _replay_bytes(config))
        worker = Lanes(suite, todo, args.parallel, threads, env, stopping, tell,
                       args.runs_per_process)
    write_suite_file(suite)
    print(f"{prog}: {words}", flush=True)
    return worker


def _watch(worker, suite, runs, live, events, signals, interval):
    """Run the worker on a thread of its own and show the table until it is done; a second
    Ctrl-C kills the runs. Returns (outcomes, errors that ended the worker, aborted)."""
    from fast_dqn.suite.table import read_row, render
    outcomes, broken = {}, []

    def runs_thread():
        try:
            outcomes.update(worker.run())
        except Exception as error:  # noqa: BLE001 - said at the end, exit status 1
            broken.append(f"{type(error).__name__}: {error}")
    thread = threading.Thread(target=runs_thread, name="suite-runs", daemon=True)
    thread.start()
    shown, aborted, last = 0, False, 0.0
    while thread.is_alive():
        thread.join(0.2)
        if len(signals) > 1 and not aborted:
            aborted = True
            worker.kill_all()
        while live and events:
            _clear(shown)
            shown = 0
            print(events.pop(0), flush=True)
        if time.monotonic() - last >= interval and thread.is_alive():
            last = time.monotonic()
            rows = [read_row(run, suite.timesteps, set(worker.running())) for run in runs]
            lines = render(rows, suite.timesteps, worker.lanes())
            _clear(shown if live else 0)
            shown = len(lines)
            print("\n".join(lines), flush=True)
    rows = [read_row(run, suite.timesteps, set()) for run in runs]
    _clear(shown if live else 0)
    print("\n".join(render(rows, suite.timesteps, 1)), flush=True)
    return outcomes, broken, aborted


def _clear(lines):
    if lines:
        sys.stdout.write(f"\x1b[{lines}F\x1b[J")


def _ending(prog, suite, runs, outcomes, signals, aborted, broken):
    """The suite's last lines and exit status (0 only when every run finished), from its runs'
    files."""
    again = "the same command continues it"
    for error in broken:
        print(f"{prog}: error: the suite stopped on {error}", file=sys.stderr)
    for outcome in outcomes.values():
        if outcome.state in ("failed", "refused") and not aborted:
            what = "failed twice" if outcome.state == "failed" else "was refused"
            print(f"{prog}: {outcome.run.name} {what} (exit {outcome.status}): "
                  f"{outcome.last_line}; its log: {outcome.run.log}", file=sys.stderr)
    left = [run for run in runs if run_state(run, suite.timesteps) != FINISHED]
    for run in left:  # named at the start too, which a long suite's table scrolled away
        if run_state(run, suite.timesteps) == DAMAGED:
            print(f"{prog}: {damaged_note(run, suite)}", file=sys.stderr)
    if aborted:
        print(f"{prog}: aborted; each run resumes from its last checkpoint: {again}",
              file=sys.stderr)
        return 130
    if signals:
        by = f"{prog}: stopped by {signal.Signals(signals[0]).name}"
        print(f"{by}; {len(left)} of {counted(len(runs), 'run')} to finish: {again}" if left
              else f"{by}; every run had finished, so nothing is lost", file=sys.stderr)
        return 128 + signals[0]
    if left:
        print(f"{prog}: {len(left)} of {counted(len(runs), 'run')} did not finish "
              f"({', '.join(run.name for run in left[:5])}{', ...' if len(left) > 5 else ''});"
              f" fix the cause (the lines above), then {again}", file=sys.stderr)
        return 1
    print(f"{prog}: done; score it with: fast-dqn plot {suite.logdir} --aggregate", flush=True)
    return 0
