"""The run directory: where a run's config and logs live. Never overwrites anything, and is
written by one process at a time."""

import errno
import fcntl
import json
import os
import socket
import stat
import sys
import tempfile
import time

from fast_dqn.errors import ConfigError

LOCK_FILE = "run.lock"
# What a filesystem without locks answers (Lustre without -o flock, some FUSE mounts).
_NO_LOCKS = {errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL}


def run_name(game, loop, preset):
    """What a run directory is named after: the game and the loop, or a preset of its own.

    Under a preset other than the defaults, the name is the preset's (the game first where the
    preset does not name it), so that `runs/pong-fastest-*` finds the runs of that preset.

    Args:
        game: the game's snake_case name, or a gymnasium env id.
        loop: the loop config.json names: "dqn" or "fast".
        preset: the --preset the run uses.

    Returns:
        The name's first part, such as "pong-fast" or "pong-fastest".
    """
    if preset in ("nature", "classic"):
        return f"{game}-{loop}"
    return preset if preset.startswith(f"{game}-") else f"{game}-{preset}"


def default_logdir(name, now=None):
    """runs/<name>-<YYYYmmdd-HHMMSS>, with a numeric suffix if that name is taken.

    Args:
        name: the name's first part, as run_name gives it.
        now: the time to stamp, in seconds since the epoch; None for now.

    Returns:
        A path, relative to the working directory, that does not exist yet.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = os.path.join("runs", f"{name}-{stamp}")
    path, n = base, 1
    while os.path.exists(path):
        path, n = f"{base}-{n}", n + 1
    return path


def check_logdir(path):
    """Raise ConfigError unless `path` can become a fresh run directory. Creates nothing.

    Args:
        path: the --logdir asked for.
    """
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise ConfigError("logdir", f"'{path}' is a file, not a directory; "
                              "choose another ${logdir}")
        if not is_unborn_run(path):
            raise ConfigError("logdir", f"'{path}' already holds files; runs are never "
                              "overwritten, so choose a new or empty ${logdir}")
        existing = path
    else:
        existing = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise ConfigError("logdir", f"'{existing}' is a file, so '{path}' cannot be "
                              "created; choose another ${logdir}")
    check_writable(existing, "logdir")


CONFIG_FILE = "config.json"
_CONFIG_TEMPORARY = ".config.json.partial-"


def is_unborn_run(path):
    """Whether a directory holds nothing but what a run stopped while being created leaves.

    That is a run.lock, a config.json being written, or an empty config.json that older
    versions could leave: nothing in it is lost when a run is started there.

    Args:
        path: a directory, which must exist.

    Returns:
        True where a run may be started in it.
    """
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if name == LOCK_FILE or name.startswith(_CONFIG_TEMPORARY):
            continue
        if name == CONFIG_FILE and os.path.isfile(full) and os.path.getsize(full) == 0:
            continue
        return False
    return True


def check_writable(directory, setting):
    """Check a file can be made in `directory` by making one, and removing it.

    A real write, not os.access: root passes access checks on read-only mounts and /proc.

    Args:
        directory: a directory, which must exist.
        setting: the setting the error names ("logdir", "resume").
    """
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise ConfigError(setting, f"cannot write in '{directory}' ({error.strerror}); "
                                   "it needs a directory you can write to")


class RunLock:
    """The one process that may write a run directory: it holds flock() on RUN_DIR/run.lock.

    The kernel drops the lock when its process dies, kill -9 included, so a crashed run can always
    be resumed; the file stays (deleting a lock file races with the next taker) and names its last
    holder, for the refusal message. Why flock and not fcntl locks: an fcntl lock is released when
    the process closes *any* descriptor of the file, and flock descriptors are opened close-on-exec,
    so no child process keeps a lock alive. Linux's NFS client turns flock into NFS byte-range
    locks, so two machines sharing the run see each other. Without locks: a warning, no protection.

    Args:
        run_dir: the run directory, which exists.
        setting: the setting an error names ("logdir" for a new run, "resume").
        warn: a function that prints a warning line; None prints it on stderr.

    Raises:
        ConfigError: on `setting`: another process holds the lock, or run.lock is no plain file.
    """

    def __init__(self, run_dir, setting, warn=None):
        warn = warn or (lambda message: print(message, file=sys.stderr, flush=True))
        self.fd = None
        self.run_dir, self.setting = run_dir, setting
        path = os.path.join(run_dir, LOCK_FILE)
        try:
            # O_NOFOLLOW: sign() would write through a symbolic link into whatever file it
            # names. O_NONBLOCK: opening a FIFO must not wait for a writer.
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK,
                              0o644)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise ConfigError(setting, f"'{path}' is a symbolic link, not a lock file; "
                                  "remove it (the run recreates it) and try again")
            if error.errno == errno.EISDIR:
                raise self._not_a_file(setting, path)
            raise ConfigError(setting, f"cannot write in '{run_dir}' ({error.strerror}); it "
                              "needs a directory you can write to")
        if not stat.S_ISREG(os.fstat(self.fd).st_mode):
            self.release()
            raise self._not_a_file(setting, path)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in _NO_LOCKS:
                holder = os.pread(self.fd, 512, 0).decode(errors="replace").strip()
                holder = holder or "another process"
                self.release()
                if setting == "logdir":
                    raise ConfigError(setting, f"'{run_dir}' was just taken by {holder}; choose "
                                      "another --logdir")
                raise ConfigError(setting, f"'{run_dir}' is in use by {holder}; one process per "
                                  "run: wait for it to end, or stop it (Ctrl-C or kill, it "
                                  "checkpoints) and resume then")
            warn(f"warning: {run_dir} is on a filesystem without file locks "
                 f"({error.strerror}): nothing stops a second process from writing this run")

    @staticmethod
    def _not_a_file(setting, path):
        return ConfigError(setting, f"'{path}' is not a plain file (a directory, FIFO or "
                           "device); remove it (the run recreates it) and try again")

    def sign(self):
        """Write this process's name into run.lock as the holder.

        Apart from making the file, taking the lock changes nothing on disk, so a run refused
        for another reason is left as it was; only a signed lock writes.
        """
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"process {os.getpid()} on {socket.gethostname()}, since "
                               f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        except OSError as error:
            self.release()
            raise ConfigError(self.setting, f"cannot write in '{self.run_dir}' "
                                                f"({error.strerror}); it needs a directory you can "
                                                "write to")

    def release(self):
        """Let the lock go by closing its file; a second call does nothing."""
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    __del__ = release  # a lock nobody keeps is let go


def create_run_directory(path, config_dict):
    """Make the directory, lock it, and write config.json.

    The lock comes first, so a --resume racing this sees no config and touches nothing;
    config.json is then written only where none exists, never over a run made meanwhile.

    Args:
        path: the run directory, checked by check_logdir.
        config_dict: the settings config.json records.

    Returns:
        The held RunLock, which the caller releases when the run ends.

    Raises:
        ConfigError: on "logdir": it cannot be made or written, or another run took it meanwhile.
    """
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise ConfigError("logdir", f"cannot create '{path}' ({error.strerror}); "
                          "choose a ${logdir} you can write to")
    lock = RunLock(path, "logdir")
    lock.sign()
    try:
        _write_config_once(path, config_dict)
        record_no_checkpoint_yet(path)
    except FileExistsError:
        lock.release()
        raise ConfigError("logdir", f"'{path}' was just taken by another run; choose another")
    except OSError as error:
        lock.release()
        raise ConfigError("logdir", f"cannot create '{path}' ({error.strerror}); "
                          "choose a ${logdir} you can write to")
    return lock


def _write_config_once(path, config_dict):
    """Write config.json whole or not at all, and never over one: written under a temporary
    name, linked to its own (a link fails where the name exists), the temporary removed."""
    final = os.path.join(path, CONFIG_FILE)
    temporary = os.path.join(path, f"{_CONFIG_TEMPORARY}{os.getpid()}")
    with open(temporary, "w") as f:
        json.dump(config_dict, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    try:
        if os.path.isfile(final) and os.path.getsize(final) == 0:
            os.remove(final)  # the empty config.json of an older version's unborn run
        try:
            os.link(temporary, final)
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV,
                                   errno.EMLINK):
                raise
            # A filesystem without hard links: the lock already keeps other runs out.
            if os.path.lexists(final):
                raise FileExistsError(errno.EEXIST, "exists", final)
            os.replace(temporary, final)
    finally:
        if os.path.lexists(temporary):
            os.remove(temporary)


def load_run_config(run_dir, setting):
    """The saved config.json of a run, as a dict.

    Args:
        run_dir: the run directory, whose config.json is read.
        setting: the setting an error names ("resume", or a tool's "RUN_DIR").

    Returns:
        config.json's settings, a dict with at least "loop".

    Raises:
        ConfigError: on `setting`: no run, an unborn one, or an unreadable config.json.
    """
    path = os.path.join(run_dir, CONFIG_FILE)
    if os.path.isdir(run_dir) and os.listdir(run_dir) and is_unborn_run(run_dir):
        raise ConfigError(setting, f"'{run_dir}' holds no run: one was stopped while it was "
                          "being created, before its settings were written, so nothing was "
                          "trained; start it again with the command that created it (its "
                          f"--logdir {run_dir} is accepted)")
    if not os.path.isfile(path):
        raise ConfigError(setting, f"'{run_dir}' is not a fast-dqn run (it has no config.json); "
                          "give the run directory printed when the run started")
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError) as error:
        raise ConfigError(setting, f"cannot read {path} ({error}); it is not a usable run")
    if not isinstance(saved, dict) or "loop" not in saved:
        raise ConfigError(setting, f"{path} is not a fast-dqn config; it is not a usable run")
    return saved


# Beside checkpoints/: written "none yet" as the run directory is made, then, once the run's
# first checkpoint is complete, the step of one it had; never removed. A run without a
# checkpoint is started again from step 0, its logs discarded, only where this file says
# none was ever written: one whose checkpoints/ was moved away is refused (resume.py).
CHECKPOINT_RECORD = "first-checkpoint.txt"
_NONE_YET = "No checkpoint yet."
_RECORD_TEMPORARY = f".{CHECKPOINT_RECORD}.partial-"


def _write_record(run_dir, text):
    """Replace the record whole: a stop leaves the old one or the new one."""
    temporary = os.path.join(run_dir, f"{_RECORD_TEMPORARY}{os.getpid()}")
    with open(temporary, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, os.path.join(run_dir, CHECKPOINT_RECORD))


def record_no_checkpoint_yet(run_dir):
    _write_record(run_dir, f"{_NONE_YET} fast-dqn writes here the step of the run's first "
                  "checkpoint once it is complete. Until then, --resume starts the run again "
                  "from step 0 (its logs are of steps played again); after, it never does.\n")


def mark_checkpointed(run_dir, step):
    """Record, once, that the run has had a checkpoint; a disk's error is let pass.

    Args:
        run_dir: the run directory, where first-checkpoint.txt is written.
        step: the checkpoint's step, in agent steps.
    """
    if checkpoint_record(run_dir)[0] == "written":
        return
    try:
        _write_record(run_dir, f"The run had a checkpoint of agent step {step:,} on "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')}. While this file says so, "
                      "--resume never starts the run again from step 0 (which would discard "
                      "its logs): if checkpoints/ is missing, it was moved or deleted.\n")
    except OSError:
        # The checkpoint itself is complete; without the record, --resume still reads the
        # logs' steps (resume.check_dead_start), and the disk's trouble ends the run soon.
        pass


def checkpoint_record(run_dir):
    """What first-checkpoint.txt says of the run's first checkpoint, and the step it names.

    Args:
        run_dir: the run directory, where first-checkpoint.txt is read.

    Returns:
        ("written", its agent step, or None where the file was edited past reading), ("none
        yet", None), or ("unrecorded", None): a run older than the file, or whose file was deleted.
    """
    path = os.path.join(run_dir, CHECKPOINT_RECORD)
    if not os.path.lexists(path):
        return "unrecorded", None
    try:
        with open(path) as f:
            text = f.read(4096)
    except (OSError, UnicodeDecodeError):
        return "written", None
    if text.startswith(_NONE_YET):
        return "none yet", None
    words = text.split()
    try:
        return "written", int(words[words.index("step") + 1].replace(",", ""))
    except (ValueError, IndexError):
        return "written", None


# What a run writes before its first checkpoint; checkpoints/ holds at most a .partial-*.
DEAD_START_LOGS = ("episodes.csv", "eval.csv", "tensorboard", "best")


def discard_dead_start(run_dir):
    """Remove the logs of a run that stopped before its first checkpoint.

    It restarts at step 0, its logs of steps it plays again; its config.json and lock stay.

    Args:
        run_dir: the run directory, locked by this process.
    """
    import shutil
    for name in os.listdir(run_dir):
        # A stop between linking config.json and removing its temporary, or while the
        # checkpoint record was written.
        if name.startswith((_CONFIG_TEMPORARY, _RECORD_TEMPORARY)):
            os.remove(os.path.join(run_dir, name))
    for name in DEAD_START_LOGS:
        path = os.path.join(run_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
