"""`fast-dqn group`: several fast-loop runs of one protocol trained in one process, as a run group.

    fast-dqn group --run="--game=pong --seed=0 --logdir=runs/pong-0" \\
                   --run="--game=breakout --seed=0 --logdir=runs/breakout-0"
    fast-dqn group --run=--resume=runs/pong-0 --run=--resume=runs/breakout-0

Each --run is one run's flags, as `fast-dqn fast` takes them, and each run is an ordinary run
directory: --resume, evaluate and plot work on it alone. The group trains the runs in
lockstep, one compiled call for all their updates and one for all their acting
(fast_dqn.run.group_training); it needs JAX. Each run's console goes to RUN_DIR.log beside
its directory; this command prints the group's start-up lines and each run's end.

A --run that argparse cannot read (an unknown flag, a value of the wrong type) refuses the group
in one line, before anything is made. A run refused otherwise (a value out of range, a damaged
config.json or checkpoint) is named in one line and left out, and the others go on; one finished
already is left out too. Exit status: 0 when every run trained to its budget, 1 when one failed
(training diverged; its last good checkpoint is kept) or the group did, 2 when a run was refused,
128 + the signal after Ctrl-C or SIGTERM (every run checkpointed), 130 after a second Ctrl-C.
"""

import argparse
import contextlib
import os
import shlex
import sys

from fast_dqn.errors import ConfigError
from fast_dqn.run.settings.flags import fail


def build_parser(prog):
    """The group's parser: one --run per run, each that run's flags as one argument."""
    parser = argparse.ArgumentParser(
        prog=prog, usage=f'{prog} --run="RUN FLAGS" --run="RUN FLAGS" [--run=...]',
        description="Train fast-loop runs of one protocol (any games and seeds) in one "
        "process, one compiled call for all of them (KERAS_BACKEND=jax). Each run is an "
        "ordinary run directory; its console goes to RUN_DIR.log.")
    parser.error = lambda message: _refuse(prog, message)
    parser.add_argument("--run", action="append", required=True, metavar='"RUN FLAGS"',
                        help="one run's flags, as `fast-dqn fast` takes them, quoted as one "
                        "argument (--run=\"--game=pong --seed=1 --logdir=runs/p1\", or "
                        "--run=--resume=runs/p1); two or more")
    return parser


def _refuse(prog, message):
    print(f"{prog}: error: {message} (see --help)", file=sys.stderr)
    sys.exit(2)


def main(argv=None, prog="fast-dqn group", script=False):
    """Run `fast-dqn group`: prepare every run, check them as one group, train them.

    Args:
        argv: the group's flags; None reads sys.argv's.
        prog: the command's name in its messages.
        script: true when this is the whole process (see fast_dqn.run.cli.main).

    Returns:
        The exit status (the module docstring).

    Raises:
        SystemExit: a --run argparse cannot read (after its one line, status 2).
    """
    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import FAST

    args = build_parser(prog).parse_args(argv)
    if len(args.run) < 2:
        return fail(prog, ConfigError("run", "a group holds two runs or more; train one run "
                                      "alone with `fast-dqn fast`"))
    refused = _backend_refused(prog)
    if refused:
        return refused
    if script:
        from fast_dqn.run.logs.progress import OutlivesConsole
        sys.stdout, sys.stderr = OutlivesConsole(sys.stdout), OutlivesConsole(sys.stderr)
    with contextlib.ExitStack() as held:  # the resumed runs' locks, released on any exit
        ready = _prepare_each(prog, args.run, held)
        if isinstance(ready, int):
            return ready
        prepared, refused = ready
        if not prepared:
            if not refused:
                print(f"{prog}: every run finished already; give a larger --timesteps to go "
                      "on", flush=True)
            return 2 if refused else 0
        checked = _checked(prog, prepared)
        if isinstance(checked, int):
            return checked
        for config, checkpoint, lock in prepared:
            if lock is None:
                held.enter_context(cli.make_run(FAST, config))
        status = _train(prog, prepared, script)
    return 2 if refused and status == 0 else status


def _backend_refused(prog):
    """2, after one line, unless Keras runs on JAX; else None."""
    try:
        from fast_dqn.agent.backend_setup import keras_backend
        backend = keras_backend()
    except ConfigError as error:  # UnsupportedBackend: a KERAS_BACKEND we do not run on
        return fail(prog, error)
    if backend == "jax":
        return None
    print(f"{prog}: error: a run group trains on JAX only; run it with KERAS_BACKEND=jax "
          "(pip install -e '.[jax]'), or train each run alone with `fast-dqn fast`",
          file=sys.stderr)
    return 2


def _prepare_each(prog, runs, held):
    """Each --run prepared as `fast-dqn fast` prepares a run; the resumed runs' locks held.

    Returns:
        (the prepared runs, whether one was refused in one line); or an exit status where
        nothing may train (a --run the shell cannot split, Ctrl-C).
    """
    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import FAST
    refused, prepared = False, []
    for i, flags in enumerate(runs, 1):
        try:
            run_argv = shlex.split(flags)
        except ValueError as error:
            return fail(prog, ConfigError("run", f"--run {i}: {error}; quote it as the shell "
                                          "would"))
        if not any(arg.split("=")[0] in ("--resume", "--sampler-groups") for arg in run_argv):
            # A group acts for all its runs in one call a round: each run in one group, not
            # the two that --sampler-groups 0 picks on a GPU.
            run_argv.append("--sampler-groups=1")
        done = cli.prepare(FAST, run_argv, f"{prog} --run {i}", make=False)
        if done == 130:  # Ctrl-C while it was prepared: nothing trains
            return 130
        if isinstance(done, int):  # refused in one line (2), or finished already (0)
            refused |= done != 0
            continue
        if done[2] is not None:
            held.enter_context(done[2])
        prepared.append(done)
    return prepared, refused


def _checked(prog, prepared):
    """The runs checked as one group before any directory is made; an exit status if not."""
    from fast_dqn.run.group_training import check_group, check_group_fits
    try:
        configs = [config for config, _, _ in prepared]
        logdirs = [os.path.abspath(config.logdir) for config in configs]
        if len(set(logdirs)) < len(logdirs):
            twice = next(d for d in logdirs if logdirs.count(d) > 1)
            raise ConfigError("logdir", f"two runs of the group have the run directory "
                              f"{twice}; give each its own")
        check_group(configs)
        if configs[0].game:
            check_group_fits(configs)
    except ConfigError as error:
        return fail(prog, error)
    steps = {config.logdir: checkpoint.step if checkpoint else 0
             for config, checkpoint, _ in prepared}
    if len(set(steps.values())) > 1:
        where = ", ".join(f"{logdir} at {step:,}" for logdir, step in steps.items())
        print(f"{prog}: error: a group's runs go on from one agent step, but these are at "
              f"{where}; resume them in groups of one step each, or alone", file=sys.stderr)
        return 2
    return None


def _train(prog, prepared, script):
    from fast_dqn.run import cli
    from fast_dqn.run.group_training import train_fast_group
    from fast_dqn.run.interrupts import StopSignals

    configs = [config for config, _, _ in prepared]
    logs = [f"{config.logdir.rstrip(os.sep)}.log" for config in configs]
    print(f"{prog}: {len(configs)} runs in one process, their updates and their acting each "
          f"one compiled call{_replay_words(configs)}", flush=True)
    failures, refusals = {}, {}
    with contextlib.ExitStack() as files, StopSignals(then_ignore=script) as stop:
        consoles = [files.enter_context(open(log, "a", encoding="utf-8")) for log in logs]
        for config, log in zip(configs, logs):
            print(f"{prog}: run directory {os.path.abspath(config.logdir)} (console: {log})",
                  flush=True)
        try:
            train_fast_group(configs, [checkpoint for _, checkpoint, _ in prepared], stop,
                             on_failed=failures.__setitem__, consoles=consoles,
                             on_refused=refusals.__setitem__)
        except ConfigError as error:  # the runs cannot share one network (dueling heads)
            return fail(prog, error)
        except KeyboardInterrupt:
            print(f"{prog}: aborted; each run continues from its last checkpoint with "
                  f"{cli.resume_command('fast-dqn fast', configs[0].logdir)} (and the "
                  "others' directories)", file=sys.stderr)
            return 130
        except Exception:  # a thread's failure, re-raised here with its traceback
            import traceback
            traceback.print_exc()
            print(f"{prog}: error: the group failed (traceback above); each run goes on from "
                  "its last checkpoint", file=sys.stderr)
            return 1
    return _ending(prog, configs, failures, refusals, stop)


def _replay_words(configs):
    """The start-up line's words on the group's replays: Atari's size is known before."""
    from fast_dqn.agent.replay_memory import estimate_bytes
    if not configs[0].game:
        return ""
    where = "on the host and again on the device" if configs[0].replay_device == "device" \
        else "on the host"
    size = sum(estimate_bytes(c.replay_capacity, (84, 84), "uint8") for c in configs)
    return f"; replay {size / 2**30:.2f} GiB in all, {where}"


def _ending(prog, configs, failures, refusals, stop):
    """Each refused and failed run's line, then the group's exit status."""
    from fast_dqn.run import cli
    for run, error in refusals.items():
        print(f"{prog}: error: {configs[run].logdir} is left out: "
              f"{error.worded(_flag_name)}", file=sys.stderr)
    for run, error in failures.items():
        print(f"{prog}: error: {configs[run].logdir}: {error}; "
              f"{cli.last_good_checkpoint('fast-dqn fast', configs[run].logdir)}",
              file=sys.stderr)
    # A stop first: every run not finished checkpointed and goes on later, a diverged one
    # from its last good checkpoint.
    if stop.requested:
        print(f"{prog}: stopped after every run's checkpoint; continue with the same "
              "command, or each run alone with fast-dqn fast --resume RUN_DIR",
              file=sys.stderr)
        return 128 + stop.signum
    if failures:
        return 1
    if refusals:
        return 2
    print(f"{prog}: every run finished", flush=True)
    return 0


def _flag_name(setting):
    from fast_dqn.run.settings.flags import flag_name
    return flag_name(setting)
