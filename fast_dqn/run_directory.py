"""The run directory: where a run's config and logs live. Never overwrites anything."""

import json
import os
import tempfile
import time

from fast_dqn.errors import UsageError


def default_logdir(game, loop, now=None):
    """runs/<game>-<loop>-<YYYYmmdd-HHMMSS>, with a numeric suffix if that name is taken."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = os.path.join("runs", f"{game}-{loop}-{stamp}")
    path, n = base, 1
    while os.path.exists(path):
        path, n = f"{base}-{n}", n + 1
    return path


def check_logdir(path):
    """Raise UsageError unless `path` can become a fresh run directory. Creates nothing."""
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise UsageError("--logdir", f"'{path}' is a file, not a directory; "
                             "choose another --logdir")
        if os.listdir(path):
            raise UsageError("--logdir", f"'{path}' already holds files; runs are never "
                             "overwritten, so choose a new or empty --logdir")
        existing = path
    else:
        existing = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise UsageError("--logdir", f"'{existing}' is a file, so '{path}' cannot be "
                             "created; choose another --logdir")
    check_writable(existing, "--logdir")


def check_writable(directory, flag):
    """A real write, not os.access: root passes access checks on read-only mounts and /proc."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise UsageError(flag, f"cannot write in '{directory}' ({error.strerror}); "
                         f"{flag} needs a directory you can write to")


def create_run_directory(path, config_dict):
    """Make the directory and write config.json; 'x' mode refuses to clobber a racing run."""
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "config.json"), "x") as f:
            json.dump(config_dict, f, indent=2, sort_keys=True)
            f.write("\n")
    except FileExistsError:
        raise UsageError("--logdir", f"'{path}' was just taken by another run; choose another")
    except OSError as error:
        raise UsageError("--logdir", f"cannot create '{path}' ({error.strerror}); "
                         "choose a --logdir you can write to")
    return path


def load_run_config(run_dir, flag):
    """The saved config.json of a run, as a dict; UsageError naming `flag` if it is no run."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(path):
        raise UsageError(flag, f"'{run_dir}' is not a fast-dqn run (it has no config.json); "
                         "give the run directory printed when the run started")
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError) as error:
        raise UsageError(flag, f"cannot read {path} ({error}); it is not a usable run")
    if not isinstance(saved, dict) or "loop" not in saved:
        raise UsageError(flag, f"{path} is not a fast-dqn config; it is not a usable run")
    return saved
