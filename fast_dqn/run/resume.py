"""--resume: a run's saved settings reconciled with the flags typed, and its checkpoint."""

import dataclasses
import os

from fast_dqn.errors import ConfigError
from fast_dqn.run.settings import hyperparameters as hp
from fast_dqn.run.settings.flags import flag_name
from fast_dqn.run.settings.validation import check_budget, check_saved_types, resolve
from fast_dqn.run.storage.run_directory import RunLock, check_writable, load_run_config


def hold_run(run_dir):
    """Lock a run directory for --resume, once it is known to be a run: nothing is written
    into a directory that is not one."""
    load_run_config(run_dir, "resume")
    return RunLock(run_dir, "resume")


def resume_config(run_dir, explicit, kind):
    """The saved config of RUN_DIR with the allowed overrides, its latest checkpoint (None
    when the run stopped before writing its first one, which then starts again at step 0),
    and the RUN_PLAN settings taken from that checkpoint rather than config.json (see
    kept_plan). kind: the RunKind of the script resuming it.

    Raises ConfigError for anything that would make the resumed run not the same run.
    """
    from fast_dqn.run.storage.checkpoint import latest_checkpoint

    saved = load_run_config(run_dir, "resume")
    if saved.get("loop") != kind.loop:
        raise ConfigError("resume", f"'{run_dir}' is a {saved.get('loop')!r} run; resume it "
                          f"with the script that made it, not this one ({kind.loop!r})")
    check_saved_types(saved, run_dir, kind.config_class)
    values = saved_values(saved, kind.config_class)
    checkpoint = latest_checkpoint(run_dir, "resume", missing_ok=True)
    kept = kept_plan(checkpoint, values, explicit, kind.config_class)
    values.update(kept)
    apply_flags(values, explicit, run_dir)
    config = resolve(kind.config_class(**values))
    check_writable(run_dir, "resume")
    check_budget(config, checkpoint, typed="timesteps" in explicit)
    return config, checkpoint, kept


def describe_kept(kept):
    """The line that says which settings an earlier --resume gave are kept."""
    return "keeping what an earlier --resume gave: " + ", ".join(
        f"{flag_name(name)} {'on' if value else 'off'}" if isinstance(value, bool)
        else f"{flag_name(name)} {value:,}" for name, value in kept.items()) + \
        " (config.json keeps the run's first values)"


def plan_given_on_resume(config):
    """The RUN_PLAN settings of `config` that differ from its config.json: what a resume
    changed, which its checkpoints record. A run as started records nothing, so a later
    hand edit of config.json is not overridden by a value nobody gave on a resume."""
    try:
        saved = load_run_config(config.logdir, "resume")
    except ConfigError:  # no config.json (a run driven in process): nothing to compare
        return {}
    return {name: getattr(config, name) for name in hp.RUN_PLAN
            if getattr(config, name) != saved.get(name)}


def kept_plan(checkpoint, values, explicit, config_class):
    """The RUN_PLAN settings the checkpoint recorded that differ from config.json and were
    not typed now. A recorded value of the wrong type (a hand-edited manifest) is ignored."""
    if checkpoint is None:
        return {}
    defaults = config_class()
    return {name: value for name, value in checkpoint.plan.items()
            if name in hp.RUN_PLAN and name not in explicit and name in values
            and type(value) is type(getattr(defaults, name)) and value != values[name]}


def saved_values(saved, config_class):
    """config.json's settings, as the run used them: a setting added since it was written
    has its default, which is what that run used, so typing that value on resume agrees."""
    defaults = config_class()
    values = {f.name: saved.get(f.name, getattr(defaults, f.name))
              for f in dataclasses.fields(config_class)}
    if saved.get("env") is not None:  # its Atari settings, recorded as null (hp.recorded)
        values.update({name: getattr(defaults, name) for name in hp.ATARI_ONLY
                       if values.get(name) is None})
    return values


def apply_flags(values, explicit, run_dir):
    """The flags typed with --resume: those that may change replace the saved values; any
    other must equal its saved value."""
    if "logdir" in explicit and os.path.abspath(explicit["logdir"]) != os.path.abspath(run_dir):
        raise ConfigError("logdir", "a resumed run stays in its own directory; drop --logdir")
    for name, value in explicit.items():
        if name in hp.RESUME_OVERRIDES or name == "logdir":
            values[name] = value
            continue
        if values.get("env") is not None and name in hp.ATARI_ONLY:
            raise ConfigError(name, "is a setting of the Atari protocol, which a gymnasium "
                              "${env} run does not use; drop it")
        if name == "game" and values.get("game") is not None:
            from fast_dqn.envs.games import resolve_game
            value = resolve_game(value)
        if values.get(name) != value:
            raise ConfigError(name, f"{value} conflicts with this run's saved "
                              f"{values.get(name)}; drop {flag_name(name)} to resume, or start "
                              "a new run to change it")
    values["logdir"] = run_dir
