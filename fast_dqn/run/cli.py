"""Command-line front end shared by run_dqn.py and run_fast_dqn.py: the run's life from the
typed flags to its exit status.

Everything the user typed is validated (fast_dqn.run.settings, fast_dqn.run.resume) before
anything is created; a problem ends the run with one line naming the flag and the fix, and
exit status 2.
"""

import dataclasses
import errno
import os
import shlex
import sys
import traceback

from fast_dqn.code_version import code_record
from fast_dqn.errors import STORAGE_ERRORS, ConfigError
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.run.resume import check_resume, describe_kept, hold_run
from fast_dqn.run.run_kinds import kind_of
from fast_dqn.run.settings import hyperparameters as hp
from fast_dqn.run.settings.flags import build_parser, explicit_values, fail
from fast_dqn.run.settings.precedence import build_config
from fast_dqn.run.settings.validation import check_without_backend, resolve, run_is_finished
from fast_dqn.run.storage.run_directory import (
    check_logdir,
    create_run_directory,
    default_logdir,
    discard_dead_start,
    run_name,
)


def validate_and_resolve(config):
    """A new run's settings resolved, its run directory chosen and checked; creates nothing.

    The directory is chosen first, so that train_* receives the very config resolved. Raises
    ConfigError where a setting breaks a rule, the run would not train, or the directory is unfit.
    """
    return resolve(check_new_run(config))


def check_new_run(config):
    """Every check of `validate_and_resolve` that needs no Keras backend; its run directory chosen.

    `prepare` runs it before loading Keras, which takes seconds, so that a typo is refused at
    once. Returns a CheckedConfig whose logdir is set.
    """
    if not config.logdir:
        from fast_dqn.envs.games import resolve_game
        game = config.env.replace("/", "_") if config.env else resolve_game(config.game)
        name = run_name(game, kind_of(config).loop, config.preset)
        config = dataclasses.replace(config, logdir=default_logdir(name))
    config = check_without_backend(config)
    check_trains(config)
    check_logdir(config.logdir)
    return config


def check_trains(config):
    """Refuse (ConfigError on "timesteps") a new run whose budget ends before its first minibatch.

    Args:
        config: the new run's Config or FastConfig, with its budget and warm-up in agent steps.
    """
    if config.timesteps <= config.prepopulate:
        # Valid for the library (a resume may cut a budget there), but as a new run it would
        # only play random games and evaluate an untrained network, silently.
        raise ConfigError("timesteps", f"{config.timesteps:,} steps end before training "
                          f"starts, after the --prepopulate warm-up of {config.prepopulate:,} "
                          "steps; raise --timesteps or lower --prepopulate")
    if not minibatches_due(0, config.timesteps, config.prepopulate, config.train_freq):
        first = (config.prepopulate // config.train_freq + 1) * config.train_freq
        raise ConfigError("timesteps", f"{config.timesteps:,} steps end before the first "
                          f"minibatch, at step {first:,} (one every --train-freq "
                          f"{config.train_freq} steps after the --prepopulate warm-up of "
                          f"{config.prepopulate:,}); raise --timesteps to {first:,} or more")


def check_applies(explicit):
    """Refuse a setting of the Atari protocol typed beside --env, which would be ignored."""
    if explicit.get("env") is None:
        return
    for name in hp.ATARI_ONLY:
        if name in explicit:
            raise ConfigError(name, "is a setting of the Atari protocol, which a gymnasium "
                              "${env} run does not use; drop it")


def resume_command(prog, run_dir):
    """The command that resumes a run, as the user can paste it (run_dir quoted for the shell).

    `prog` is a script (run_dqn.py) or an installed command (fast-dqn fast).
    """
    command = f"python {prog}" if prog.endswith(".py") else prog
    return f"{command} --resume {shlex.quote(run_dir)}"


def tool_command(prog, tool):
    """The command of a tool (evaluate, plot) as the user would type it beside `prog`."""
    words = prog.split()
    if len(words) > 1:  # fast-dqn fast, python -m fast_dqn fast: the same command's tool
        return " ".join(words[:-1] + [tool])
    return f"python -m fast_dqn.tools.{tool}"


def _count(n):
    """A step count as a flag takes it, short: 2M, 500k, 1_234_567."""
    for unit, size in (("M", 10**6), ("k", 10**3)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return f"{n:_}"


def next_commands(prog, config, best):
    """What a finished run's owner does next: "next:", then one command to paste a line."""
    run_dir = shlex.quote(config.logdir)
    which = " --best" if best else ""
    return "\n".join([
        "next:",
        f"  {tool_command(prog, 'evaluate')} {run_dir}{which}   # play "
        + ("its best evaluation's weights" if best else "its last checkpoint"),
        f"  {tool_command(prog, 'plot')} {run_dir} -o curves.png   # its learning curves",
        f"  {resume_command(prog, config.logdir)} --timesteps {_count(2 * config.timesteps)}"
        "   # train it on, to twice the budget"])


def last_checkpoint(prog, run_dir):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    steps = CheckpointStore(run_dir).steps()
    if not steps:
        return (f"no checkpoint was written: {resume_command(prog, run_dir)} starts it again "
                "from step 0")
    return (f"the last checkpoint is at step {steps[-1]:,}: {resume_command(prog, run_dir)} "
            "continues from it")


def last_good_checkpoint(prog, run_dir, resumed=None):
    """What a diverged run leaves to go on from, and the fix, in one sentence.

    Its newest checkpoint is a good one: the learner checks every weight and optimizer slot
    finite before a checkpoint is written, and before a resume loads one; nothing after the
    divergence was saved. Only the one it resumed from (`resumed`), if still the newest, may
    hold an edit that no check can see (a learning rate), so it is not called good.
    """
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    fix = "a new run with a lower --lr (or, for --env, smaller rewards) is the fix"
    newest = CheckpointStore(run_dir).newest()
    if newest is None:
        return f"nothing was saved before it: {fix}"
    step, path = newest
    if resumed is not None and os.path.normpath(path) == os.path.normpath(resumed.path):
        return (f"nothing diverged was saved: the newest checkpoint is still {path} (step "
                f"{step:,}), the one this run resumed from; {resume_command(prog, run_dir)} "
                f"continues from it, but with the same settings it may diverge again: {fix}; "
                f"if that checkpoint was edited, move it out of {os.path.dirname(path)} to "
                "resume from the one before it")
    return (f"nothing diverged was saved: the last good checkpoint is {path} (step {step:,}); "
            f"{resume_command(prog, run_dir)} continues from it, but with the same settings "
            f"it may diverge again: {fix}")


def main(kind, argv=None, train=None, script=False, prog=None):
    """Run a training command: parse, validate, make or reopen the run directory, and train.

    The run directory is locked until training returns.

    Args:
        kind: the RunKind to train.
        argv: the command line's arguments, without the program's name; None for sys.argv's.
        train: a function `train(config, resume=, stop=)` to call in place of the kind's, or None.
        script: true when main is the whole process, whose last moments then ignore Ctrl-C
            and SIGTERM (see StopSignals); false in-process, which gets its own handlers back.
        prog: the command's name in its messages (`fast-dqn fast`); None for the kind's script.

    Returns:
        The process exit status: 0 when the budget is done, 2 for bad input or a run
        directory another process holds, 128 + the signal number when a signal stopped the
        run after a checkpoint, 130 when a second Ctrl-C aborted it, 1 when the run failed:
        a thread's exception (its traceback is printed), divergence to NaN/Inf, or a
        checkpoint that could not be written.
    """
    prog, train = prog or kind.script, train or _trainer(kind)
    if script:
        from fast_dqn.run.logs.progress import OutlivesConsole
        sys.stdout, sys.stderr = OutlivesConsole(sys.stdout), OutlivesConsole(sys.stderr)
    prepared = prepare(kind, argv, prog)
    if isinstance(prepared, int):
        return prepared
    config, checkpoint, lock = prepared
    with lock:
        return _train(prog, config, train, checkpoint, script)


def _trainer(kind):
    """The kind's train function, imported on use: training loads Keras, which --help and
    bad input never need."""
    def train(config, **kwargs):
        from fast_dqn.run import training
        return getattr(training, kind.train_name)(config, **kwargs)
    return train


def prepare(kind, argv, prog, make=True):
    """A run's command line up to training: parsed, validated, its run directory made or held.

    With `make` False a new run's directory is left to make_run (a run group checks its runs
    together first). Returns (config, checkpoint, lock): the resolved config, the Checkpoint it
    resumes from (or None), and the run directory's lock, held (None for a new run not made);
    or, where there is nothing to train, the exit status, its line printed (0: the games
    listed, or the run finished already; 2: bad input; 130: Ctrl-C).
    """
    config_class = kind.config_class
    parser = build_parser(prog, kind.description, config_class)
    args = parser.parse_args(argv)
    if getattr(args, "list_games", False):
        from fast_dqn.envs.games import available_games
        print("\n".join(available_games()))
        return 0
    explicit = explicit_values(args, config_class)
    checkpoint = lock = None
    try:
        # Asked now, at the start, so that every checkpoint names the code this process
        # loaded (a `git pull` during a run changes the checkout, not the run).
        from fast_dqn.code_version import commit
        commit()
        # Every check that needs no Keras comes before it: importing Keras and its backend
        # takes seconds, and a typo's refusal should not wait for them. An unusable
        # KERAS_BACKEND is refused next, before anything is made or signed.
        from fast_dqn.agent.backend_setup import keras_backend
        if getattr(args, "resume", None):
            # Held while it is checked, so that no other process changes what is checked;
            # taking it changes nothing on disk (but makes run.lock where it is missing).
            lock = hold_run(args.resume)
            checked = check_resume(args.resume, explicit, kind)
            if run_is_finished(checked.config, checked.checkpoint):
                # Nothing to do, so nothing written: no lock signed, no log, no checkpoint.
                lock.release()
                print(f"{prog}: {args.resume} finished at step {checked.checkpoint.step:,}; "
                      "give a larger --timesteps to go on", flush=True)
                return 0
            keras_backend()
            config, checkpoint, kept = checked.resolve()
            lock.sign()
            if kept:
                print(f"{prog}: {describe_kept(kept)}", flush=True)
            if checkpoint is None:
                # Nobody holds the lock, so no process will ever write that first checkpoint:
                # the dead start's logs describe steps that are now played again.
                discard_dead_start(args.resume)
                print(f"{prog}: {args.resume} stopped before its first checkpoint; starting it "
                      "again from step 0 with its saved settings", flush=True)
        else:
            check_applies(explicit)
            config = check_new_run(build_config(explicit, config_class))
            keras_backend()
            config = resolve(config)
            if make:
                lock = make_run(kind, config)
    except ConfigError as error:
        if lock:
            lock.release()
        return fail(prog, error)
    except KeyboardInterrupt:
        # Ctrl-C while TensorFlow imports or the run directory is made: no training began.
        if lock:
            lock.release()
        if getattr(args, "resume", None):
            then = f"{resume_command(prog, args.resume)} continues it"
        elif lock is not None:
            then = f"{resume_command(prog, config.logdir)} starts it"
        else:
            then = "nothing was made"
        print(f"{prog}: interrupted before training began; {then}", file=sys.stderr)
        return 130
    return config, checkpoint, lock


def make_run(kind, config):
    """Make a new run's directory with its config.json, and hold it: the lock returned."""
    return create_run_directory(config.logdir, {"loop": kind.loop, **hp.recorded(config),
                                                "code": code_record()})


def _failed(prog, config):
    """An unexpected failure: its traceback, then one line with what to do."""
    traceback.print_exc()
    print(f"{prog}: error: the run failed (traceback above); "
          f"{last_checkpoint(prog, config.logdir)}", file=sys.stderr)
    return 1


def _train(prog, config, train, checkpoint, script):
    from fast_dqn.run.interrupts import StopSignals
    from fast_dqn.run.storage.checkpoint import CheckpointError

    with StopSignals(then_ignore=script) as stop:
        # Printed once signals are handled: from this line on, Ctrl-C checkpoints.
        print(f"{prog}: run directory {os.path.abspath(config.logdir)}", flush=True)
        try:
            train(config, resume=checkpoint, stop=stop)
        except KeyboardInterrupt:
            print(f"{prog}: aborted; logs so far are in {config.logdir}, and "
                  f"{resume_command(prog, config.logdir)} continues from its last checkpoint",
                  file=sys.stderr)
            return 130
        except ConfigError as error:  # found only once the checkpoint is read
            return fail(prog, error)
        except CheckpointError as error:
            cause = getattr(error.__cause__, "errno", None)
            when = ("once there is space" if cause in (errno.ENOSPC, errno.EDQUOT)
                    else "once that is fixed")
            print(f"{prog}: error: {error}; {last_checkpoint(prog, config.logdir)}, {when}",
                  file=sys.stderr)
            return 1
        except OSError as error:
            if error.errno not in STORAGE_ERRORS:
                return _failed(prog, config)
            # A full disk between checkpoints (a log row, a TensorBoard event): the run cannot
            # go on, and its last checkpoint is intact, so one line says what to do.
            where = f" {error.filename}" if error.filename else ""
            when = ("once there is space" if error.errno in (errno.ENOSPC, errno.EDQUOT)
                    else "once that is fixed")  # space mends no read-only or failing disk
            print(f"{prog}: error: cannot write{where} ({error.strerror}); "
                  f"{last_checkpoint(prog, config.logdir)}, {when}", file=sys.stderr)
            return 1
        except FloatingPointError as error:  # the learner's TrainingDiverged
            print(f"{prog}: error: {error}; "
                  f"{last_good_checkpoint(prog, config.logdir, resumed=checkpoint)}",
                  file=sys.stderr)
            return 1
        except Exception:
            # Any thread's failure ends up here: the trainer's and the prefetcher's are
            # re-raised in the main thread with their own tracebacks.
            return _failed(prog, config)
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    if stop.requested and not CheckpointStore(config.logdir).newest_is_finished():
        print(f"{prog}: stopped after a checkpoint; continue with: "
              f"{resume_command(prog, config.logdir)}", file=sys.stderr)
        return 128 + stop.signum
    from fast_dqn.run.storage.best_weights import best_store
    print(next_commands(prog, config, best=bool(best_store(config.logdir).steps())),
          flush=True)
    return 0
