"""--resume: a run's saved settings reconciled with the flags typed, and its checkpoint."""

import dataclasses
import json
import os
import shlex

from fast_dqn.errors import ConfigError
from fast_dqn.run.settings import hyperparameters as hp
from fast_dqn.run.settings.flags import flag_name
from fast_dqn.run.settings.validation import (
    check_budget,
    check_saved_types,
    check_without_backend,
    resolve,
    saved_value_error,
)
from fast_dqn.run.storage.run_directory import (
    CHECKPOINT_RECORD,
    RunLock,
    check_writable,
    checkpoint_record,
    load_run_config,
)


def hold_run(run_dir):
    """Lock a run directory for --resume (its RunLock), once load_run_config finds it a run.

    Nothing is written into a directory that is not one.
    """
    load_run_config(run_dir, "resume")
    return RunLock(run_dir, "resume")


def resume_config(run_dir, explicit, kind):
    """The saved config of RUN_DIR with the allowed overrides, and its latest checkpoint.

    `explicit` is the flags typed with --resume, {setting: value}; `kind` the RunKind of the
    script resuming it. Raises ConfigError for anything that would make the resumed run not
    the same run. Returns (config, checkpoint, kept): the resolved config; the latest
    checkpoint, None when the run stopped before writing its first one (it then starts again
    at step 0); and the RUN_PLAN settings taken from that checkpoint rather than config.json.
    """
    return check_resume(run_dir, explicit, kind).resolve()


def check_resume(run_dir, explicit, kind):
    """Every check of `resume_config` that needs no Keras backend, which imports in seconds.

    The command line runs it before loading Keras, so that a bad --resume is refused at once;
    the CheckedResume's `resolve` does the rest. The checkpoint is read and verified here, once.
    """
    from fast_dqn.run.storage.checkpoint import latest_checkpoint
    saved = load_run_config(run_dir, "resume")
    loops = (hp.Config.LOOP, hp.FastConfig.LOOP)
    if saved.get("loop") not in loops:
        raise ConfigError("resume", f"{os.path.join(run_dir, 'config.json')} has \"loop\": "
                          f"{json.dumps(saved.get('loop'))}, which is no loop of fast-dqn: it "
                          "was edited; put back the loop that made the run, "
                          + " or ".join(f'"{loop}"' for loop in loops))
    if saved["loop"] != kind.loop:
        from fast_dqn.run.run_kinds import RUN_KINDS
        maker = RUN_KINDS[saved["loop"]]
        raise ConfigError("resume", f"'{run_dir}' is a run of {maker.script}, which resumes "
                          f"it: python {maker.script} --resume {shlex.quote(run_dir)}")
    check_saved_types(saved, run_dir, kind.config_class)
    values = saved_values(saved, kind.config_class)
    checkpoint = latest_checkpoint(run_dir, "resume", missing_ok=True)
    if checkpoint is None:
        check_dead_start(run_dir, values)
    kept = kept_plan(checkpoint, values, explicit, kind.config_class)
    values.update(kept)
    apply_flags(values, explicit, run_dir)
    try:
        config = check_without_backend(kind.config_class(**values))
    except ConfigError as error:
        raise _named(error, saved, run_dir, explicit, checkpoint, kept) from None
    check_writable(run_dir, "resume")
    check_budget(config, checkpoint, typed="timesteps" in explicit)
    return CheckedResume(run_dir, explicit, saved, config, checkpoint, kept)


@dataclasses.dataclass(frozen=True)
class CheckedResume:
    """A resume that passed `check_resume`: what `resolve` needs to finish it.

    `config` is a CheckedConfig; `kept` the RUN_PLAN settings from the checkpoint (kept_plan).
    """

    run_dir: str
    explicit: dict
    saved: dict
    config: object
    checkpoint: object
    kept: dict

    def resolve(self):
        """The checks that need the Keras backend, then what `resume_config` returns.

        A refusal (a compute type, replay's room) is named as `check_resume` names its own.
        """
        try:
            return resolve(self.config), self.checkpoint, self.kept
        except ConfigError as error:
            raise _named(error, self.saved, self.run_dir, self.explicit, self.checkpoint,
                         self.kept) from None


def _named(error, saved, run_dir, explicit, checkpoint, kept):
    """A check's ConfigError, reworded to name where its value came from: config.json, or
    the manifest that recorded a kept setting; one on a flag typed now stays as it is.
    """
    if error.setting not in kept:
        return saved_value_error(error, saved, run_dir, typed=explicit)
    # Nobody typed it: the checkpoint's manifest recorded it from an earlier --resume.
    return ConfigError("resume", f"{os.path.join(checkpoint.path, 'manifest.json')} "
                       f"records {flag_name(error.setting)} {kept[error.setting]!r}, as an "
                       f"earlier --resume gave it, but "
                       f"{ConfigError(None, error.message).worded(flag_name)}; give "
                       f"{flag_name(error.setting)} on this resume to replace it")


def check_dead_start(run_dir, values):
    """Refuse a restart from step 0 of a run without a checkpoint that got further than one.

    A run without a checkpoint is started again from step 0, its logs discarded
    (run_directory.discard_dead_start): right only for a run that stopped before its first
    checkpoint. The ConfigError changes nothing, where its files say it got further: something
    in checkpoints/ that is no checkpoint (renamed folders), first-checkpoint.txt, or, for a run
    made before that file, logs that reach the step its first checkpoint was due by.
    """
    folder = os.path.join(run_dir, "checkpoints")
    fix = (f"nothing was changed: put its checkpoints back in '{folder}' to resume it, or "
           "start a new run with another --logdir")
    names = _checkpoint_folder_names(folder, fix)
    record, step = checkpoint_record(run_dir)
    if record == "written":
        one = f" (one of agent step {step:,})" if step is not None else ""
        raise ConfigError("resume", f"'{run_dir}' has had checkpoints{one}, as its "
                          f"{CHECKPOINT_RECORD} records, but none is in '{folder}' now; " + fix)
    if record == "none yet":
        return
    reached, due = _last_logged_step(run_dir), _first_checkpoint_due(values)
    # At the very step the first checkpoint was due, only a stop while it was written (its
    # partial left behind) is a dead start.
    writing = any(name.startswith(".partial-") for name in names)
    if reached and (due is None or reached > due or (reached == due and not writing)):
        when = ("it writes none before it ends or is stopped (--checkpoint-freq 0)"
                if due is None else f"its first was due by agent step {due:,}")
        raise ConfigError("resume", f"'{run_dir}' has no checkpoint, but its logs reach agent "
                          f"step {reached:,} and {when}: its checkpoints were moved or deleted, "
                          "or it was killed before writing one; " + fix)


def _checkpoint_folder_names(folder, fix):
    """The names in a run's checkpoints/ that holds no checkpoint, all hidden (partials, .DS_Store,
    .nfs*); else ConfigError: a file there, or a name not hidden (a renamed checkpoint)."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise ConfigError("resume", f"'{folder}' is a file, not the run's checkpoints folder; "
                          + fix)
    names = os.listdir(folder) if os.path.isdir(folder) else []
    strangers = sorted(name for name in names if not name.startswith("."))
    if strangers:
        shown = ", ".join(strangers[:3]) + (f" and {len(strangers) - 3} more"
                                            if len(strangers) > 3 else "")
        raise ConfigError("resume", f"'{folder}' holds {shown}, which this fast-dqn does not "
                          "read as checkpoints (they are folders named step-NNNNNNNNNNNN): "
                          "were they renamed? " + fix)
    return names


def _first_checkpoint_due(values):
    """The agent step by which a run of these settings has written its first checkpoint (its
    logs may reach it before): the first multiple of --checkpoint-freq, or the budget's end where
    that comes first, and in the fast loop the sync point where that step falls (a period and a
    chunk later at most); None when nothing is due before a stop (--checkpoint-freq 0)."""
    freq, end = values.get("checkpoint_freq"), values.get("timesteps")
    if not freq:
        return None
    if "workers" in values:  # the fast loop: checkpoints come at sync points
        chunk = (values.get("num_samplers", 1) * values.get("envs_per_sampler", 1)
                 * values.get("rollout_steps", 1) if values.get("backend") == "ray"
                 else values.get("workers", 1))
        freq += values.get("target_update_freq", 0) + chunk
        end = (end or 0) + chunk
    return min(freq, end) if end else freq


def _last_logged_step(run_dir):
    """The largest agent step in the run's episodes.csv, eval.csv and best/ (0 if none); damaged
    rows are passed over, since this only asks how far the run got."""
    import csv

    from fast_dqn.run.storage.best_weights import best_store
    reached = 0
    for name in ("episodes.csv", "eval.csv"):
        try:
            with open(os.path.join(run_dir, name), newline="", errors="replace") as f:
                for row in csv.DictReader(f):
                    try:
                        reached = max(reached, int(float(row.get("agent_step") or 0)))
                    except (TypeError, ValueError, OverflowError):
                        continue
        except (OSError, csv.Error, ValueError):  # ValueError: NUL bytes (Python 3.10)
            continue
    try:
        reached = max([reached, *best_store(run_dir, warn=lambda message: None).steps()])
    except OSError:
        pass
    return reached


def describe_kept(kept):
    """The line that says which settings an earlier --resume gave are kept (kept_plan's)."""
    return "keeping what an earlier --resume gave: " + ", ".join(
        f"{flag_name(name)} {'on' if value else 'off'}" if isinstance(value, bool)
        else f"{flag_name(name)} {value:,}" for name, value in kept.items()) + \
        " (config.json keeps the run's first values)"


def plan_given_on_resume(config):
    """The RUN_PLAN settings of `config` that differ from config.json: what a resume changed.

    Its checkpoints record them. A run as started records nothing, so a later hand edit of
    config.json is not overridden by a value nobody gave on a resume. Empty where the run has
    no config.json (a run driven in process).
    """
    try:
        saved = load_run_config(config.logdir, "resume")
    except ConfigError:  # no config.json (a run driven in process): nothing to compare
        return {}
    return {name: getattr(config, name) for name in hp.RUN_PLAN
            if getattr(config, name) != saved.get(name)}


def kept_plan(checkpoint, values, explicit, config_class):
    """The RUN_PLAN settings the checkpoint recorded apart from config.json, not typed now.

    A recorded value of the wrong type (a hand-edited manifest) is ignored.
    """
    if checkpoint is None:
        return {}
    defaults = config_class()
    return {name: value for name, value in checkpoint.plan.items()
            if name in hp.RUN_PLAN and name not in explicit and name in values
            and type(value) is type(getattr(defaults, name)) and value != values[name]}


def saved_values(saved, config_class):
    """config.json's settings, as the run used them.

    A setting added since it was written has the default that run used (its default then,
    hp.EARLIER_DEFAULTS, where it has changed since), so typing that value on resume agrees.

    Args:
        saved: config.json as loaded, {setting: value}.
        config_class: the run's Config class, whose fields and defaults it fills in.

    Returns:
        {setting: value} for every field of config_class.
    """
    defaults = config_class()
    values = {f.name: saved.get(f.name, hp.EARLIER_DEFAULTS.get(f.name, getattr(defaults, f.name)))
              for f in dataclasses.fields(config_class)}
    # A number setting edited to a whole number ("lr": 1) is that number, as --lr 1 is:
    # Keras's optimizers take no int.
    values.update({f.name: float(values[f.name]) for f in dataclasses.fields(config_class)
                   if f.type in (float, "float") and type(values[f.name]) is int})
    if saved.get("env") is not None:  # its Atari settings, recorded as null (hp.recorded)
        values.update({name: getattr(defaults, name) for name in hp.ATARI_ONLY
                       if values.get(name) is None})
    return values


def apply_flags(values, explicit, run_dir):
    """Apply the flags typed with --resume to the saved values, in place.

    Those that may change replace the saved values; any other must equal its saved value, or
    ConfigError. The run stays in `run_dir`, its --logdir.
    """
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
