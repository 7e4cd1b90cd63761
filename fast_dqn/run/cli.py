"""Command-line front end shared by run_dqn.py and run_fast_dqn.py.

Flags are generated from fast_dqn.run.hyperparameters.Config, so every option shows its default and
unit in --help. Everything the user typed is validated before anything is created; a problem
ends the run with one line naming the flag and the fix, and exit status 2.
"""

import argparse
import dataclasses
import errno
import json
import math
import os
import sys
import traceback

from fast_dqn.errors import ConfigError
from fast_dqn.loops.fast_loop import budget_end
from fast_dqn.run import hyperparameters as hp
from fast_dqn.run.run_directory import (
    RunLock,
    check_logdir,
    check_writable,
    create_run_directory,
    default_logdir,
    discard_dead_start,
    load_run_config,
)

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class OneLineParser(argparse.ArgumentParser):
    """argparse prints its usage block before errors; ours are one line that names the flag."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_count(text):
    """An integer, also written 50_000_000 or 5e7."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'")
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'")
    return int(value)


def parse_real(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got '{text}'")
    return value


class BoolFlag(argparse.Action):
    """--flag, --no-flag, and the original fast-dqn's --flag=False / --flag=0 forms."""

    def __init__(self, option_strings, dest, default=None, help=None, **kwargs):
        negatives = [f"--no-{s[2:]}" for s in option_strings if s.startswith("--")]
        super().__init__(option_strings + negatives, dest, nargs="?", default=default,
                         help=help, metavar="BOOL")

    def __call__(self, parser, namespace, value, option_string=None):
        if option_string.startswith("--no-"):
            if value is not None:
                parser.error(f"argument {option_string}: takes no value")
            setattr(namespace, self.dest, False)
            return
        if value is None:
            setattr(namespace, self.dest, True)
        elif value.lower() in TRUE_WORDS:
            setattr(namespace, self.dest, True)
        elif value.lower() in FALSE_WORDS:
            setattr(namespace, self.dest, False)
        else:
            parser.error(f"argument {option_string}: expected true/false or 1/0, got '{value}'")


def flag_name(setting):
    """The flag of a Config field; a tool's own argument names ("-o", "RUN_DIR") stay."""
    if setting.startswith("-") or setting.isupper():
        return setting
    return "--" + setting.replace("_", "-")


# --help shows the flags by topic, in this order; every Config field belongs to one.
HELP_TOPICS = {
    "protocol: the game and its preprocessing": (
        "preset", "game", "env", "episodic_life", "sticky_actions", "full_action_space",
        "interp", "max_episode_steps", "noop_max", "action_repeat", "history_length"),
    "budget and evaluation": ("timesteps", "evaluate", "eval_episodes", "eval_epsilon"),
    "training": (
        "replay_capacity", "prepopulate", "batch_size", "train_freq", "target_update_freq",
        "discount", "optimizer", "optimizer_epsilon", "loss_reduction", "lr", "eps_start",
        "eps_end", "eps_decay_steps"),
    "DQN extensions (all off: the Nature DQN)": ("double", "dueling", "n_step"),
    "fast loop": ("workers", "concurrent", "synchronize", "env_backend", "env_threads",
                  "prefetch"),
    "Ray (--backend ray)": ("backend", "num_samplers", "envs_per_sampler", "rollout_steps",
                            "requests_in_flight", "ray_address", "ray_object_store_mb"),
    "run: directory, checkpoints, resources": (
        "seed", "logdir", "checkpoint_freq", "save_replay", "xla", "threads", "precision",
        "mixed_precision"),
}


def add_config_flags(parser, config_class=hp.Config):
    """One flag per Config field, grouped by topic, its help ending in the default and unit."""
    defaults = config_class()
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    groups = {}
    for topic, names in HELP_TOPICS.items():
        if any(name in fields for name in names):
            group = parser.add_argument_group(topic)
            groups.update((name, group) for name in names)
    for f in fields.values():
        _add_flag(groups[f.name], f, getattr(defaults, f.name))
    return groups


def _add_flag(parser, f, default):
    meta = f.metadata
    unit = f" {meta['unit']}" if meta.get("unit") else ""
    shown = f"{default:_}" if f.type is int else default
    text = f"{meta['help']} (default: {shown}{unit})"
    kwargs = dict(meta.get("argparse", {}))
    if f.type is bool:
        parser.add_argument(flag_name(f.name), action=BoolFlag, help=text)
        return
    convert = {int: parse_count, float: parse_real}.get(f.type, str)
    parser.add_argument(flag_name(f.name), type=convert, help=text, **kwargs)


def build_parser(prog, description, config_class=hp.Config):
    """Every default is SUPPRESS, so parse_args returns only what the user typed.

    The defaults are shown in each flag's help instead; knowing the explicit flags is what
    lets a preset sit between the defaults and the command line, and --resume spot conflicts.
    """
    parser = OneLineParser(prog=prog, description=description, usage="%(prog)s [options]",
                           argument_default=argparse.SUPPRESS)
    run = add_config_flags(parser, config_class)["logdir"]
    run.add_argument("--resume", metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its latest complete checkpoint, "
                     "with its saved config; only " + ", ".join(
                         flag_name(n) for n in hp.RESUME_OVERRIDES
                         if n in {f.name for f in dataclasses.fields(config_class)})
                     + " may change")
    run.add_argument("--list-games", action="store_true",
                     help="print the Atari games of the installed ROMs and exit")
    return parser


def explicit_values(args, config_class=hp.Config):
    names = {f.name for f in dataclasses.fields(config_class)}
    return {k: v for k, v in vars(args).items() if k in names}


def build_config(explicit, config_class=hp.Config):
    """Defaults, then the preset, then the explicit flags."""
    from fast_dqn.run.presets import preset_values
    if explicit.get("env") is not None and "game" in explicit:
        raise ConfigError("env", "--env and --game are exclusive; give only one of them")
    preset = explicit.get("preset") or ("classic" if explicit.get("env") else "nature")
    names = {f.name for f in dataclasses.fields(config_class)}
    values = {k: v for k, v in preset_values(preset).items() if k in names}
    if explicit.get("optimizer", values.get("optimizer")) != values.get("optimizer"):
        # A preset's epsilon and loss reduction belong to its optimizer: another optimizer
        # typed on the command line takes its own source's values.
        for name in ("optimizer_epsilon", "loss_reduction"):
            values.pop(name, None)
    values.update(explicit)
    values["preset"] = preset
    if values.get("backend") == "ray" and "workers" in explicit:
        raise ConfigError("workers", "counts the games of --backend threads; with --backend "
                          "ray give --num-samplers and --envs-per-sampler instead")
    if values.get("env") is not None:
        if "game" in preset_values(preset):
            raise ConfigError("preset", f"'{preset}' is for Atari games; use --game with it, "
                              "or another --preset with --env")
        values["game"] = None
        if "env_backend" in names:
            if explicit.get("env_backend", "python") != "python":
                raise ConfigError("env_backend", "the vector backend runs Atari games only; "
                                  "drop it with --env (the python backend is used)")
            values["env_backend"] = "python"
    return config_class(**values)


def config_from_args(args, config_class=hp.Config):
    return build_config(explicit_values(args, config_class), config_class)


def validate_fast(config):
    """The fast loop's own rules, on top of validate_numbers."""
    check_ranges(config, hp.FAST_POSITIVE, hp.FAST_NON_NEGATIVE)
    vector = config.backend == "ray" or config.env_backend == "vector"
    if vector and config.env is None and config.interp != "area":
        raise ConfigError("interp", f"{config.interp} cannot be honoured by ale-py's vector "
                          "env, which resizes with area only; drop --interp or add "
                          "--env-backend python")
    if config.target_update_freq % config.train_freq:
        raise ConfigError("target_update_freq", f"{config.target_update_freq} is not a "
                          f"multiple of --train-freq {config.train_freq}; each training period "
                          "must hold whole minibatches")
    if config.backend == "ray":
        validate_ray(config)
        games, flags = config.num_samplers * config.envs_per_sampler, \
            "--num-samplers × --envs-per-sampler"
    else:
        games, flags = config.workers, "--workers"
        if config.synchronize and config.target_update_freq % config.workers:
            raise ConfigError("target_update_freq", f"{config.target_update_freq} is not a "
                              f"multiple of --workers {config.workers}; synchronized rounds "
                              "must fill each period exactly (or use --no-synchronize)")
    need = games * (config.history_length + config.n_step + 1)
    if config.replay_capacity < need:
        raise ConfigError("replay_capacity", f"must be at least {need} ({flags} × "
                          "(--history-length + --n-step + 1)) so every game's share holds a "
                          "transition")
    need = games * (config.history_length + config.n_step)
    if config.prepopulate < need:
        raise ConfigError("prepopulate", f"must be at least {need} ({flags} × "
                          "(--history-length + --n-step)) so the first minibatch can be drawn")


def validate_ray(config):
    """--backend ray's flags; finds ray without importing it, unless --ray-address is given."""
    import importlib.util
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("backend", "ray is not installed; pip install -r requirements.txt "
                          "(or drop --backend ray)")
    if config.ray_address is not None:
        if not config.ray_address.strip():
            raise ConfigError("ray_address", "is empty; give 'auto', HOST:PORT, or drop it "
                              "to start a private cluster")
        from fast_dqn.loops.ray_backend import check_reachable
        check_reachable(config.ray_address)


def check_ranges(config, positive, non_negative):
    for name in positive:
        if getattr(config, name) < 1:
            raise ConfigError(name, f"must be a positive whole number, "
                              f"got {getattr(config, name)}")
    for name in non_negative:
        if getattr(config, name) < 0:
            raise ConfigError(name, f"must be 0 or more, got {getattr(config, name)}")


def validate_numbers(config):
    """Sizes, probabilities and their relations; raises ConfigError naming the flag."""
    check_ranges(config, hp.POSITIVE, hp.NON_NEGATIVE)
    for name in hp.PROBABILITIES:
        if not 0.0 <= getattr(config, name) <= 1.0:
            raise ConfigError(name, f"must be in [0, 1], got {getattr(config, name)}")
    if not 0.0 <= config.discount <= 1.0:
        raise ConfigError("discount", f"must be in [0, 1], got {config.discount}")
    if config.lr <= 0:
        raise ConfigError("lr", f"must be positive, got {config.lr}")
    if config.optimizer_epsilon is not None and config.optimizer_epsilon <= 0:
        raise ConfigError("optimizer_epsilon", f"must be positive, got "
                          f"{config.optimizer_epsilon}; drop it for the optimizer's own value")
    from fast_dqn.envs.environment import SEED_RANGE
    if config.seed >= SEED_RANGE:
        raise ConfigError("seed", f"must be below {SEED_RANGE:,} (2^31: ALE takes its seeds as "
                          f"C ints), got {config.seed:,}")
    if config.action_repeat < 2:
        raise ConfigError("action_repeat", "must be at least 2: the last two frames are "
                          "max-pooled")
    if config.batch_size > config.replay_capacity:
        raise ConfigError("batch_size", f"{config.batch_size} is larger than "
                          f"--replay-capacity {config.replay_capacity}; lower it or raise "
                          "the capacity")
    if config.prepopulate > config.replay_capacity:
        raise ConfigError("prepopulate", f"warm-up of {config.prepopulate} steps is larger "
                          f"than --replay-capacity {config.replay_capacity}; lower it")
    if config.prepopulate < config.history_length + config.n_step - 1:
        raise ConfigError("prepopulate", f"must be at least --history-length + --n-step - 1 "
                          f"({config.history_length + config.n_step - 1}) so the first "
                          "minibatch can be drawn")


def validate_and_resolve(config, loop_name, validate_extra=None):
    """Full validation in order of cheapness; returns the config with game and logdir resolved.

    `validate_extra` holds a loop's own rules; it runs after the basic number checks, so it may
    divide by any size. Creates nothing: the caller makes the run directory afterwards.
    """
    validate_numbers(config)
    if validate_extra:
        validate_extra(config)
    config = resolve_precision(config)
    config = resolve_environment(config)
    logdir = config.logdir or default_logdir(config.game or config.env.replace("/", "_"),
                                             loop_name)
    check_logdir(logdir)
    return dataclasses.replace(hp.resolve_optimizer(config), logdir=logdir)


def resolve_precision(config):
    """--mixed-precision is the older name of --precision float16, and wins over a preset's
    auto; auto becomes the type the hardware computes fastest, and config.json records that;
    bfloat16 only where the hardware computes it (elsewhere it is emulated, several times
    slower than float32)."""
    if config.mixed_precision:
        if config.precision not in ("float32", "float16", "auto"):
            raise ConfigError("mixed_precision", f"means --precision float16, which conflicts "
                              f"with --precision {config.precision}; give only --precision")
        return dataclasses.replace(config, precision="float16")
    if config.precision == "auto":
        from fast_dqn.agent.tf_setup import fastest_precision
        return dataclasses.replace(config, precision=fastest_precision())
    if config.precision == "bfloat16":
        from fast_dqn.agent.tf_setup import computes_bfloat16
        if not computes_bfloat16():
            raise ConfigError("precision", "bfloat16 needs a GPU from Ampere on, or without a "
                              "GPU a CPU with AVX512-BF16 or AMX; TensorFlow sees neither here; "
                              "use float32 or auto")
    return config


def resolve_environment(config):
    """Check the game or env exists and its replay fits in RAM; returns the resolved config."""
    from fast_dqn.agent.replay_memory import check_fits_in_memory
    from fast_dqn.envs.environment import check_gym_env
    from fast_dqn.envs.games import resolve_game

    if config.env is not None:
        shape, dtype = check_gym_env(config.env)
        check_fits_in_memory(config.replay_capacity, shape, dtype)
        return config
    game = resolve_game(config.game)
    check_fits_in_memory(config.replay_capacity, (84, 84))
    return dataclasses.replace(config, game=game)


_KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


def _has_type(value, kind):
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    return isinstance(value, kind)


def check_saved_types(saved, run_dir, config_class=hp.Config):
    """config.json is edited by hand at times: each saved setting must have its field's type
    (or be null where the default is), and a choice must be one of its choices. Its numbers
    are then checked by the same validation as the command line's."""
    defaults = config_class()
    # Unset: a field whose default is None, or the game of a run of a gymnasium --env.
    may_be_none = {f.name for f in dataclasses.fields(config_class)
                   if getattr(defaults, f.name) is None}
    if saved.get("env") is not None:
        may_be_none.add("game")
    for f in dataclasses.fields(config_class):
        if f.name not in saved or (saved[f.name] is None and f.name in may_be_none):
            continue
        value, choices = saved[f.name], f.metadata.get("argparse", {}).get("choices")
        if not _has_type(value, f.type) or (choices and value not in choices):
            expected = f"one of {', '.join(choices)}" if choices else _KINDS[f.type]
            raise ConfigError("resume", f"{os.path.join(run_dir, 'config.json')} has "
                              f"\"{f.name}\": {json.dumps(value)}, which is not {expected}; "
                              "put back the value the run was started with")


def chunk_size(config):
    """The agent steps a loop plays at once; a run ends at --timesteps rounded up to them."""
    if not isinstance(config, hp.FastConfig):
        return 1
    if config.backend == "ray":
        return config.envs_per_sampler * config.rollout_steps
    return config.workers


def resume_config(run_dir, explicit, loop_name, config_class=hp.Config, validate_extra=None):
    """The saved config of RUN_DIR with the allowed overrides, and its latest checkpoint: None
    when the run stopped before writing its first one, which then starts again at step 0.

    Raises ConfigError for anything that would make the resumed run not the same run.
    """
    from fast_dqn.run.checkpoint import latest_checkpoint

    saved = load_run_config(run_dir, "resume")
    if saved.get("loop") != loop_name:
        raise ConfigError("resume", f"'{run_dir}' is a {saved.get('loop')!r} run; resume it "
                          f"with the script that made it, not this one ({loop_name!r})")
    check_saved_types(saved, run_dir, config_class)
    names = {f.name for f in dataclasses.fields(config_class)}
    values = {k: v for k, v in saved.items() if k in names}
    if "loss_reduction" not in saved and saved.get("optimizer") in hp.LEGACY_OPTIMIZER:
        # A run from before 2026-11-22: keep its update rule. Its --interp (then "linear" by
        # default) never applied to ale-py's vector env, which resized with area all along.
        values.update(hp.LEGACY_OPTIMIZER[saved["optimizer"]])
        if saved.get("backend") == "ray" or saved.get("env_backend") == "vector":
            values["interp"] = "area"
    if "logdir" in explicit and os.path.abspath(explicit["logdir"]) != os.path.abspath(run_dir):
        raise ConfigError("logdir", "a resumed run stays in its own directory; drop --logdir")
    for name, value in explicit.items():
        if name in hp.RESUME_OVERRIDES or name == "logdir":
            values[name] = value
            continue
        if name == "game" and values.get("game") is not None:
            from fast_dqn.envs.games import resolve_game
            value = resolve_game(value)
        if values.get(name) != value:
            raise ConfigError(name, f"{value} conflicts with this run's saved "
                              f"{values.get(name)}; drop {flag_name(name)} to resume, or start "
                              "a new run to change it")
    values["logdir"] = run_dir
    config = hp.resolve_optimizer(config_class(**values))
    validate_numbers(config)
    if validate_extra:
        validate_extra(config)
    config = resolve_precision(config)
    config = resolve_environment(config)
    check_writable(run_dir, "resume")
    checkpoint = latest_checkpoint(run_dir, "resume", missing_ok=True)
    if checkpoint is not None and budget_end(config.timesteps, chunk_size(config)) \
            < checkpoint.step:
        raise ConfigError("timesteps", f"{config.timesteps:,} is below the checkpoint's step "
                          f"{checkpoint.step:,}; raise it or drop it")
    return config, checkpoint


def _last_checkpoint(run_dir):
    from fast_dqn.run.checkpoint import CheckpointStore
    steps = CheckpointStore(run_dir).steps()
    if not steps:
        return f"no checkpoint was written: --resume {run_dir} starts it again from step 0"
    return (f"the last checkpoint is at step {steps[-1]:,}: --resume {run_dir} continues "
            "from it")


def fail(prog, error):
    """Print a ConfigError as one line in the command line's words (its flags); exit status 2."""
    print(f"{prog}: error: {error.worded(flag_name)}", file=sys.stderr)
    return 2


def main(prog, loop_name, description, train, argv=None, config_class=hp.Config,
         validate_extra=None, script=False):
    """Parse, validate, create (or reopen) and lock the run directory, then `train(config,
    ...)`; the lock is held until train returns.

    script: true when main is the whole process, whose last moments then ignore Ctrl-C and
    SIGTERM (see StopSignals); false in-process, which gets its own handlers back.
    Returns the process exit status: 0 when the budget is done, 2 for bad input or a run
    directory another process holds, 128 + the
    signal number when a signal stopped the run after a checkpoint, 130 when a second Ctrl-C
    aborted it, 1 when the run failed: a thread's exception (its traceback is printed),
    divergence to NaN/Inf, or a checkpoint that could not be written.
    """
    parser = build_parser(prog, description, config_class)
    args = parser.parse_args(argv)
    if getattr(args, "list_games", False):
        from fast_dqn.envs.games import available_games
        print("\n".join(available_games()))
        return 0
    explicit = explicit_values(args, config_class)
    checkpoint = lock = None
    try:
        if getattr(args, "resume", None):
            lock = hold_run(args.resume)
            config, checkpoint = resume_config(args.resume, explicit, loop_name, config_class,
                                               validate_extra)
            lock.sign()
            if checkpoint is None:
                # Nobody holds the lock, so no process will ever write that first checkpoint:
                # the dead start's logs describe steps that are now played again.
                discard_dead_start(args.resume)
                print(f"{prog}: {args.resume} stopped before its first checkpoint; starting it "
                      "again from step 0 with its saved settings", flush=True)
        else:
            config = validate_and_resolve(build_config(explicit, config_class), loop_name,
                                          validate_extra)
            lock = create_run_directory(config.logdir, {"loop": loop_name, **config.to_dict()})
    except ConfigError as error:
        if lock:
            lock.release()
        return fail(prog, error)
    with lock:
        return _train(prog, config, train, checkpoint, script)


def hold_run(run_dir):
    """Lock a run directory for --resume, once it is known to be a run: nothing is written
    into a directory that is not one."""
    load_run_config(run_dir, "resume")
    return RunLock(run_dir, "resume")


# What a storage that is full, over quota, read-only or failing answers a write.
_STORAGE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}


def _failed(prog, config):
    """An unexpected failure: its traceback, then one line with what to do."""
    traceback.print_exc()
    print(f"{prog}: error: the run failed (traceback above); "
          f"{_last_checkpoint(config.logdir)}", file=sys.stderr)
    return 1


def _train(prog, config, train, checkpoint, script):
    from fast_dqn.run.checkpoint import CheckpointError
    from fast_dqn.run.interrupts import StopSignals

    with StopSignals(then_ignore=script) as stop:
        # Printed once signals are handled: from this line on, Ctrl-C checkpoints.
        print(f"{prog}: run directory {os.path.abspath(config.logdir)}", flush=True)
        try:
            train(config, resume=checkpoint, stop=stop)
        except KeyboardInterrupt:
            print(f"{prog}: aborted; logs so far are in {config.logdir}, and --resume "
                  "continues from its last checkpoint", file=sys.stderr)
            return 130
        except ConfigError as error:  # found only once the checkpoint is read
            return fail(prog, error)
        except CheckpointError as error:
            print(f"{prog}: error: {error}", file=sys.stderr)
            return 1
        except OSError as error:
            if error.errno not in _STORAGE_ERRORS:
                return _failed(prog, config)
            # A full disk between checkpoints (a log row, a TensorBoard event): the run cannot
            # go on, and its last checkpoint is intact, so one line says what to do.
            where = f" {error.filename}" if error.filename else ""
            print(f"{prog}: error: cannot write{where} ({error.strerror}); "
                  f"{_last_checkpoint(config.logdir)}, once there is space", file=sys.stderr)
            return 1
        except FloatingPointError as error:  # the learner's TrainingDiverged
            print(f"{prog}: error: {error}; {_last_checkpoint(config.logdir)}; lower --lr or "
                  "check the reward scale", file=sys.stderr)
            return 1
        except Exception:
            # Any thread's failure ends up here: the trainer's and the prefetcher's are
            # re-raised in the main thread with their own tracebacks.
            return _failed(prog, config)
    if stop.requested:
        print(f"{prog}: stopped after a checkpoint; continue with: {prog} --resume "
              f"{config.logdir}", file=sys.stderr)
        return 128 + stop.signum
    return 0
