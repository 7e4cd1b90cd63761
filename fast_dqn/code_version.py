"""Which code made a run: the package version and, where the package is a git checkout, its
commit. config.json and every checkpoint record both, so two runs' curves can be told apart
by the code that drew them, and `--version` prints them."""

import functools
import os
import subprocess

from fast_dqn import __version__

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_GIT_SECONDS = 10  # a slow network file system must not stall a run's start


def _git(*args):
    """git's output in the package's checkout, or None: no git, not a checkout, too slow."""
    try:
        # --no-optional-locks: a status never takes .git/index.lock, so a git killed by the
        # timeout cannot leave one behind to fail the user's next commit.
        done = subprocess.run(["git", "--no-optional-locks", "-C", _PACKAGE_ROOT, *args],
                              capture_output=True, timeout=_GIT_SECONDS,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    # Bytes decoded as the file system's names are: a checkout under a path that is not
    # UTF-8 (/tmp/caf\xe9) comes back as the same str that _PACKAGE_ROOT holds.
    return os.fsdecode(done.stdout).strip() if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def commit():
    """The commit of the checkout the package runs from, or None where it is not one.

    Cached: the code a process runs is the code it loaded, so a run asks once, at its start.
    Only a checkout whose top is the package's parent counts: a wheel installed inside some
    other repository (a virtual environment in a project) must not record that project.

    Returns:
        The commit id, with "-dirty" where tracked files differ from it (as `git describe
        --dirty` marks it) and "-unknown" where git could not say; None for an installed
        wheel or a copy without .git.
    """
    top = _git("rev-parse", "--show-toplevel")
    if top is None or os.path.realpath(top) != os.path.realpath(_PACKAGE_ROOT):
        return None
    head = _git("rev-parse", "HEAD")
    if not head:
        return None
    changed = _git("status", "--porcelain", "--untracked-files=no")
    if changed is None:
        return head + "-unknown"
    return head + ("-dirty" if changed else "")


def code_record():
    """What config.json and each checkpoint's manifest record of the code.

    Returns:
        {"version": the package version, "commit": `commit()`, which may be None}.
    """
    return {"version": __version__, "commit": commit()}


def version_line(prog):
    """What `--version` prints.

    Args:
        prog: the command's name, as its usage line gives it.

    Returns:
        "prog version", with " (commit id)" where the package is a git checkout.
    """
    found = commit()
    return f"{prog} {__version__}" + (f" (commit {found})" if found else "")
