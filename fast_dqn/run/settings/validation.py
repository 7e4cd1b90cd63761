"""Every check a run's settings pass, and their resolution into what the run really uses.

`validate(config)` is the one validation: the command line, --resume (on config.json) and the
train_* entry points all call it, so a Python caller gets the same checks as a user. Each check
raises ConfigError naming the setting; the command line words it as its flag. `resolve(config)`
validates, then makes explicit what the run uses; its part that needs no Keras backend,
`check_without_backend`, runs before Keras loads (seconds of imports), so a typo is refused at once.
"""

import dataclasses
import json
import math
import os

import numpy as np

from fast_dqn.agent.optimizer_defaults import OPTIMIZER_DEFAULTS
from fast_dqn.agent.replay_memory import (
    check_fits_in_memory,
    min_capacity,
    records_to_sample,
)
from fast_dqn.errors import ConfigError
from fast_dqn.loops.fast_loop import budget_end
from fast_dqn.run.settings import hyperparameters as hp


def validate(config):
    """Check a Config against all its rules, and a FastConfig against the fast loop's too."""
    validate_numbers(config)
    if isinstance(config, hp.FastConfig):
        validate_fast(config)


class _HeldConfig:
    """A Config held as a private copy that reads as the Config and cannot be changed.

    A change makes a new Config, checked again: a changed Config never passes for a checked one.
    """

    __slots__ = ("_config",)
    _changed = "a held config cannot change"

    def __init__(self, config):
        # A private copy: the caller's Config stays theirs to change.
        object.__setattr__(self, "_config", dataclasses.replace(config))

    def __getattr__(self, name):  # called only for names the class itself lacks
        if name == "_config":
            raise AttributeError(name)
        return getattr(self._config, name)

    def __setattr__(self, name, value):
        raise AttributeError(f"{self._changed} ({name})")

    def __repr__(self):
        return f"{type(self).__name__}({self._config!r})"

    def as_config(self):
        """A copy of the Config it holds, free to change (and to check again)."""
        return dataclasses.replace(self._config)


class ResolvedConfig(_HeldConfig):
    """A Config that passed `validate`, with every setting the run uses made explicit.

    The parts are built from it alone (fast_dqn.run.components refuses anything else). It reads
    as its Config (`resolved.game`, `resolved.to_dict()`); `replace` resolves a change again.

    Args:
        config: the resolved Config or FastConfig; a copy is held.
        precision_chosen: --precision auto picked the compute type (the start-up line says so).
    """

    __slots__ = ("precision_chosen",)
    _changed = "a resolved config cannot change; resolve config.replace(...) instead"

    def __init__(self, config, precision_chosen=False):
        super().__init__(config)
        object.__setattr__(self, "precision_chosen", precision_chosen)

    def __reduce__(self):  # pickled to Ray actors inside the network builder
        return ResolvedConfig, (self._config, self.precision_chosen)

    def __eq__(self, other):
        return isinstance(other, ResolvedConfig) and self._config == other._config

    def replace(self, **changes):
        """The Config with `changes`, resolved.

        Args:
            **changes: {setting: new value}, each checked again.

        Returns:
            A new ResolvedConfig; this one is unchanged.
        """
        return resolve(dataclasses.replace(self._config, **changes))


def resolve(config, replay=True):
    """The validated config with every setting the run uses made explicit.

    The optimizer's epsilon and loss reduction, the compute type, the game's canonical name and
    where replay is gathered are resolved here alone. A ResolvedConfig comes back as it is, a
    CheckedConfig is finished unchecked: the probing checks (Ray, gymnasium, hardware) run once.

    Args:
        config: the run's Config or FastConfig, or a CheckedConfig or ResolvedConfig of one.
        replay: False where no replay is built (evaluate), which need not fit this RAM.

    Returns:
        A ResolvedConfig.

    Raises:
        ConfigError: a setting breaks a rule, or the machine cannot run it (no such game or env,
            a compute type the hardware lacks, a replay larger than RAM).
    """
    if isinstance(config, ResolvedConfig):
        return config
    if not isinstance(config, CheckedConfig):
        config = check_without_backend(config, replay)
    chosen = config.precision == "auto" and not config.mixed_precision
    shape, dtype = config.observation
    settings = resolve_precision(config.as_config())
    if replay:
        settings, copies = resolve_replay_device(settings, shape, dtype)
        check_fits_in_memory(settings.replay_capacity, shape, dtype, copies=copies)
    return ResolvedConfig(settings, precision_chosen=chosen)


def check_without_backend(config, replay=True):
    """Every check of `resolve` that needs no Keras backend, which imports in seconds.

    Args:
        config: the run's settings (a Config or FastConfig), not yet checked.
        replay: False where no replay is built, as for `resolve`.

    Returns:
        A CheckedConfig, its optimizer settings and game name made explicit, for `resolve`.

    Raises:
        ConfigError: as `resolve`, but for what only the backend tells (a compute type, an
            accelerator's room for replay, a replay beyond `ulimit -v`).
    """
    from fast_dqn.envs.environment import check_gym_env
    from fast_dqn.envs.games import resolve_game

    validate(config)
    check_compile_choices(config, precision_asked(config))
    config = resolve_optimizer(config)
    if config.env is not None:
        shape, dtype = check_gym_env(config.env)
    else:
        shape, dtype = (84, 84), np.uint8
        config = dataclasses.replace(config, game=resolve_game(config.game))
    if replay:
        # One copy in RAM is the least any run needs, so this refuses only what `resolve`
        # would. Address space waits for the backend: TensorFlow maps 2.3 GiB of it, and
        # keras_backend refuses, in its own words, a limit TensorFlow aborts under.
        check_fits_in_memory(config.replay_capacity, shape, dtype, address_space=math.inf)
    return CheckedConfig(config, (shape, dtype))


class CheckedConfig(_HeldConfig):
    """A Config that passed `check_without_backend`; `observation` is its (shape, numpy dtype)."""

    __slots__ = ("observation",)
    _changed = "a checked config cannot change; check config.as_config() changed instead"

    def __init__(self, config, observation):
        super().__init__(config)
        object.__setattr__(self, "observation", observation)


def resolve_replay_device(config, shape, dtype):
    """Make --replay-device auto, --updates-per-call 0 and --sampler-groups 0 explicit.

    The two zeros become what the device measured fastest. Only the fast loop's background
    trainer gathers on the device (fast_dqn.agent.replay_mirror): lockstep training and the
    Nature loop keep replay on the host. `shape` is one stored frame's, (84, 84) for Atari.
    Returns (the config with all three made explicit, the copies of replay RAM holds: 1 or 2).
    """
    from fast_dqn.agent.backend_setup import accelerator_memory
    from fast_dqn.agent.replay_memory import estimate_bytes
    if config.LOOP != "fast":
        return config, 1
    accelerator = accelerator_memory()
    if not config.updates_per_call:
        config = dataclasses.replace(config, updates_per_call=hp.UPDATES_PER_CALL[
            "cpu" if accelerator is None else "accelerator"])
    if not config.sampler_groups:
        # Two groups measured 1.27 times one on an H200 and 0.83 to 1.03 on 2 CPU cores.
        groups = 2 if accelerator is not None and groups_can_play(config) else 1
        config = dataclasses.replace(config, sampler_groups=groups)
    if not config.concurrent:
        return dataclasses.replace(config, replay_device="host"), 1
    if config.replay_device == "host":
        return config, 1
    if accelerator is None:  # the device is the CPU: the mirror is a second copy in RAM
        if config.replay_device == "auto":
            return dataclasses.replace(config, replay_device="host"), 1
        return config, 2
    name, free = accelerator
    need = estimate_bytes(config.replay_capacity, shape, dtype)
    if free is not None and need > 0.8 * free:
        if config.replay_device == "device":
            raise ConfigError("replay_device", f"a replay of {config.replay_capacity:,} steps "
                              f"needs {need / 2**30:.2f} GiB but {name} has "
                              f"{free / 2**30:.2f} GiB free; use ${{replay_device}} host, or lower "
                              "${replay_capacity}")
        return dataclasses.replace(config, replay_device="host"), 1
    if free is None and config.replay_device == "auto":
        return dataclasses.replace(config, replay_device="host"), 1  # its room is unknown
    return dataclasses.replace(config, replay_device="device"), 1


def check_seed(seed):
    """Refuse a seed that numpy or ALE cannot take, in one line on --seed.

    Args:
        seed: the seed given, a whole number; 0 up to 2^31 passes.
    """
    from fast_dqn.envs.environment import SEED_RANGE
    if seed < 0:
        raise ConfigError("seed", f"must be 0 or more, got {seed:,}")
    if seed >= SEED_RANGE:
        raise ConfigError("seed", f"must be below {SEED_RANGE:,} (2^31: ALE takes its seeds as "
                          f"C ints), got {seed:,}")


def validate_fast(config):
    vector = config.backend == "ray" or config.env_backend == "vector"
    if vector and config.env is None and config.interp != "area":
        raise ConfigError("interp", f"{config.interp} cannot be honoured by ale-py's vector "
                          "env, which resizes with area only; drop --interp or add "
                          "--env-backend python")
    if config.target_update_freq % config.train_freq:
        raise ConfigError("target_update_freq", f"{config.target_update_freq} is not a "
                          f"multiple of --train-freq {config.train_freq}; each training period "
                          "must hold whole minibatches")
    if config.sampler_groups not in (0, 1, 2):
        raise ConfigError("sampler_groups", f"{config.sampler_groups} is not 0, 1 or 2")
    if config.sampler_groups == 2 and config.env is not None:
        # Said apart: the Python backend was chosen by --env, not typed, so naming it as
        # the cause would point at a flag nobody gave.
        raise ConfigError("sampler_groups", "games given by --env play on the Python "
                          "backend, which has one sampler group; drop --sampler-groups (or "
                          "use --game for an Atari game)")
    if config.sampler_groups == 2 and not groups_can_play(config):
        raise ConfigError("sampler_groups", "2 takes an even --workers, --synchronize, "
                          "--env-backend vector and --backend threads (this run: --workers "
                          f"{config.workers}, --env-backend {config.env_backend}, --backend "
                          f"{config.backend}{', --no-synchronize' if not config.synchronize else ''}"
                          "); give 1")
    if config.backend == "ray":
        validate_ray(config)
        games, flags = config.num_samplers * config.envs_per_sampler, \
            "--num-samplers × --envs-per-sampler"
    else:
        # Any W: a period that W does not divide ends at the first round past its multiple
        # of --target-update-freq (fast_dqn.loops.period.next_sync_point).
        games, flags = config.workers, "--workers"
    need = min_capacity(games, config.history_length, config.n_step)
    if config.replay_capacity < need:
        raise ConfigError("replay_capacity", f"must be at least {need} ({flags} × "
                          "(--history-length + --n-step + 1)) so every game's share holds a "
                          "transition")
    # The first minibatch is drawn at a sync point, from what the warm-up flushed into replay.
    need = games * records_to_sample(config.history_length, config.n_step)
    if config.prepopulate < need:
        raise ConfigError("prepopulate", f"must be at least {need} ({flags} × "
                          "(--history-length + --n-step)) so the first minibatch can be drawn")


def groups_can_play(config):
    """Whether the local samplers can take turns in two groups (fast_dqn.loops.overlapped_backend).

    --sampler-groups 0 picks two on a GPU where they can: there one H200 measured 1.27 times one
    (docs/gpu.md), where 2 CPU cores measured 0.83 to 1.03 (docs/benchmarks.md).
    """
    return (config.backend == "threads" and config.env_backend == "vector"
            and config.env is None and config.synchronize and config.workers % 2 == 0)


def validate_ray(config):
    """--backend ray's flags; finds ray without importing it, unless --ray-address is given."""
    import importlib.util
    if config.act_on_cpu:
        raise ConfigError("act_on_cpu", "Ray's samplers act on their own CPUs already; drop it")
    if importlib.util.find_spec("ray") is None:
        raise ConfigError("backend", "ray is not installed; pip install -e \".[ray]\" "
                          "(or drop --backend ray)")
    if config.ray_address is not None:
        if not config.ray_address.strip():
            raise ConfigError("ray_address", "is empty; give 'auto', HOST:PORT, or drop it "
                              "to start a private cluster")
        from fast_dqn.loops.ray_cluster import check_reachable
        check_reachable(config.ray_address)


# Each field's declared limit (fast_dqn.run.settings.hyperparameters): its test, and what it says.
LIMITS = {"positive": (lambda v: v >= 1, "must be a positive whole number"),
          "non_negative": (lambda v: v >= 0, "must be 0 or more"),
          "probability": (lambda v: 0.0 <= v <= 1.0, "must be in [0, 1]")}


# Ours: more TensorFlow threads than any one machine has cores is a typo.
MAX_THREADS = 1024


def check_ranges(config):
    for f in dataclasses.fields(config):
        limit = f.metadata.get("limit")
        if limit and not LIMITS[limit][0](getattr(config, f.name)):
            raise ConfigError(f.name, f"{LIMITS[limit][1]}, got {getattr(config, f.name)}")


def validate_numbers(config):
    check_ranges(config)
    if config.lr <= 0:
        raise ConfigError("lr", f"must be positive, got {config.lr}")
    if config.optimizer_epsilon is not None and config.optimizer_epsilon <= 0:
        raise ConfigError("optimizer_epsilon", f"must be positive, got "
                          f"{config.optimizer_epsilon}; drop it for the optimizer's own value")
    if config.optimizer != "rmsprop" and config.rmsprop_init:
        raise ConfigError("rmsprop_init", f"is RMSProp's; --optimizer {config.optimizer} has "
                          "no mean square to start; drop it")
    if config.env is not None and config.network != "nature":
        raise ConfigError("network", "shapes the Atari CNN, and --env runs an MLP; drop it")
    if config.threads > MAX_THREADS:
        # TensorFlow takes a C int and was a ValueError traceback at 10^12.
        raise ConfigError("threads", f"must be at most {MAX_THREADS:,} (0 lets TensorFlow "
                          f"choose), got {config.threads:,}")
    check_seed(config.seed)
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
    # The Nature loop draws its first minibatch once the step after the warm-up is stored.
    need = records_to_sample(config.history_length, config.n_step) - 1
    if config.prepopulate < need:
        raise ConfigError("prepopulate", f"must be at least --history-length + --n-step - 1 "
                          f"({need}) so the first minibatch can be drawn")


# Each optimizer's epsilon and loss reduction as in the code it comes from.
def resolve_optimizer(config):
    """The config with its optimizer epsilon and loss reduction made explicit, for config.json."""
    defaults = OPTIMIZER_DEFAULTS[config.optimizer]
    return dataclasses.replace(
        config,
        optimizer_epsilon=(defaults["epsilon"] if config.optimizer_epsilon is None
                           else config.optimizer_epsilon),
        loss_reduction=config.loss_reduction or defaults["loss_reduction"])


def precision_asked(config):
    """The compute type the settings ask for: --mixed-precision is --precision float16."""
    if not config.mixed_precision:
        return config.precision
    if config.precision not in ("float32", "float16", "auto"):
        raise ConfigError("mixed_precision", f"means --precision float16, which conflicts "
                          f"with --precision {config.precision}; give only --precision")
    return "float16"


# The choices JAX alone compiles, and the flag that turns each off.
JAX_ONLY = {"scan_unroll": "--scan-unroll 0", "fused_optimizer": "--no-fused-optimizer",
            "act_on_cpu": "--no-act-on-cpu"}


def check_compile_choices(config, precision):
    """Refuse compile choices this backend or compute type cannot take.

    --scan-unroll, --fused-optimizer and --act-on-cpu are JAX's alone (TensorFlow's loop has no
    unroll, its optimizer steps weight by weight, its acting calls are its own); --fused-optimizer
    cannot take float16's loss scaling (Keras's own step).
    """
    from fast_dqn.agent.backend_setup import configured_backend
    jax_only = [name for name in JAX_ONLY if getattr(config, name, None)]
    if jax_only and configured_backend() != "jax":
        error = ConfigError(jax_only[0], "is JAX's alone, and the Keras backend here is "
                            f"TensorFlow; run with KERAS_BACKEND=jax, or give "
                            f"{JAX_ONLY[jax_only[0]]} (speed only: a resume may change it)")
        error.fix_given = True  # a resumed run's value need not be put back
        raise error
    if config.fused_optimizer and precision == "float16":
        raise ConfigError("fused_optimizer", "does not scale the loss, which float16 needs; "
                          "drop it, or use --precision bfloat16 or float32")


def resolve_precision(config):
    """The config with the compute type the run uses, checked against the hardware.

    --mixed-precision wins over a preset's auto (precision_asked refuses it beside another type);
    auto becomes the type the hardware computes fastest, which config.json records; bfloat16 and
    float16 pass only where the hardware computes them (elsewhere they are emulated, slower).

    Args:
        config: the run's settings (a Config or FastConfig), precision auto or not.

    Returns:
        A config whose precision is float32, bfloat16 or float16, and not auto.
    """
    config = dataclasses.replace(config, precision=precision_asked(config))
    if config.precision == "float16":
        from fast_dqn.agent.backend_setup import computes_float16
        if not computes_float16():
            raise ConfigError("mixed_precision" if config.mixed_precision else "precision",
                              "float16 needs a GPU, or a CPU with AVX512-FP16 or AMX-FP16 under "
                              "TensorFlow; this CPU would convert every operation to float32 "
                              "and back, slower than float32 itself; use float32 or auto")
        return config
    if config.precision == "auto":
        from fast_dqn.agent.backend_setup import fastest_precision
        return dataclasses.replace(config, precision=fastest_precision())
    if config.precision == "bfloat16":
        from fast_dqn.agent.backend_setup import computes_bfloat16
        if not computes_bfloat16():
            raise ConfigError("precision", "bfloat16 needs a GPU from Ampere on, or without a "
                              "GPU a CPU with AVX512-BF16 or AMX under TensorFlow; neither is here; "
                              "use float32 or auto (a resumed run keeps its precision: resume "
                              "it on such a machine)")
    return config


_KINDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


def has_type(value, kind):
    """Whether a value read from JSON is of a setting's type (a bool is no int, nor a float).

    Args:
        value: the value config.json gives.
        kind: the field's type: bool, int, float or str.

    Returns:
        True where `value` is a `kind` (a float also finite).
    """
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    return isinstance(value, kind)


def check_saved_types(saved, run_dir, config_class=hp.Config):
    """Check each setting config.json saved has its field's type, and a choice its choices.

    Hand edits are caught here (a ConfigError on "resume"); a setting may be null where its
    default is, and the command line's validation checks its numbers after.

    Args:
        saved: config.json's settings, as a dict.
        run_dir: the run directory, which the message names.
        config_class: the Config class whose fields give the types.
    """
    defaults = config_class()
    # Unset: a field whose default is None, or the game of a run of a gymnasium --env.
    may_be_none = {f.name for f in dataclasses.fields(config_class)
                   if getattr(defaults, f.name) is None}
    if saved.get("env") is not None:
        may_be_none.update(("game",) + hp.ATARI_ONLY)
        if saved.get("game") is not None:  # a run plays a gymnasium env or a game, not both
            raise ConfigError("resume", f"{os.path.join(run_dir, 'config.json')} has "
                              f"\"game\": {json.dumps(saved['game'])} beside \"env\": "
                              f"{json.dumps(saved['env'])}; put back \"game\": null")
    for f in dataclasses.fields(config_class):
        if f.name not in saved or (saved[f.name] is None and f.name in may_be_none):
            continue
        value, choices = saved[f.name], f.metadata.get("argparse", {}).get("choices")
        if not has_type(value, f.type) or (choices and value not in choices):
            expected = f"one of {', '.join(choices)}" if choices else _KINDS[f.type]
            raise ConfigError("resume", f"{os.path.join(run_dir, 'config.json')} has "
                              f"\"{f.name}\": {json.dumps(value)}, which is not {expected}; "
                              "put back the value the run was started with")


def saved_value_error(error, saved, run_dir, typed=(), setting="resume"):
    """A ConfigError about a value config.json gave, reworded to name config.json.

    Nobody typed the flag the check names. An error about a flag typed now, or a setting
    config.json lacks, comes back as it is.

    Args:
        error: the ConfigError a check raised.
        saved: config.json's settings, as a dict.
        run_dir: the run directory, which the message names.
        typed: the settings given on this command line.
        setting: the setting the reworded error names ("resume").

    Returns:
        A ConfigError: the reworded one, or `error` itself.
    """
    from fast_dqn.run.settings.flags import flag_name
    name = error.setting
    if name in typed or not isinstance(saved, dict) or name not in saved:
        return error
    fix = "" if getattr(error, "fix_given", False) else \
        "; put back the value the run was started with"
    return ConfigError(setting, f"{os.path.join(run_dir, 'config.json')} has \"{name}\": "
                       f"{json.dumps(saved[name])}, but {flag_name(name)} "
                       f"{ConfigError(None, error.message).worded(flag_name)}{fix}")


def chunk_size(config):
    """Agent steps a loop plays at once (1 for Nature's); a run's budget is rounded up to them."""
    if config.LOOP != "fast":
        return 1
    if config.backend == "ray":
        return config.envs_per_sampler * config.rollout_steps
    # Two sampler groups hand out one group's step at a time (OverlappedBackend.round_size).
    # Before --sampler-groups 0 is resolved (it needs the backend), a round of all W.
    return config.workers // max(1, config.sampler_groups)


def run_is_finished(config, checkpoint):
    """Whether the checkpoint ended its run, and the budget asks for no step past it.

    Args:
        config: the run's Config or FastConfig, with the budget to run to.
        checkpoint: the run's latest Checkpoint, or None.

    Returns:
        True where resuming would train no further.
    """
    return (checkpoint is not None and checkpoint.finished
            and budget_end(config.timesteps, chunk_size(config)) <= checkpoint.step)


def check_budget(config, checkpoint, typed=True):
    """Check a resume's --timesteps reaches the step its checkpoint was written at.

    Args:
        config: the run's Config or FastConfig, with the budget to run to.
        checkpoint: the run's latest Checkpoint, or None.
        typed: the budget was given on this command line, not read from the run.
    """
    if checkpoint is not None and budget_end(config.timesteps, chunk_size(config)) \
            < checkpoint.step:
        raise ConfigError("timesteps", f"{config.timesteps:,}"
                          + ("" if typed else " (this run's budget)")
                          + f" is below the checkpoint's step {checkpoint.step:,}; "
                          + ("raise it or drop it" if typed else "give a larger --timesteps"))
