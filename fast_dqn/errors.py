"""The one exception type that means "this setting cannot work": bad input, not a bug. The
command line prints it as one line (run/settings/flags.py, `fail`); anything else that escapes
is a bug and keeps its traceback."""

import errno
import re

_OTHER_SETTING = re.compile(r"\$\{(\w+)\}")


class ConfigError(ValueError):
    """A setting that cannot work, with what would.

    Args:
        setting: the Config field (or a tool's argument) to change; None where no one
            setting is at fault.
        message: why it cannot work, and what would; it names other settings as ${field}.
    """

    def __init__(self, setting, message):
        self.setting, self.message = setting, message
        super().__init__(self.worded())

    def worded(self, name_of=lambda setting: setting):
        """The error as one line, "setting: message", each setting named by `name_of`.

        Args:
            name_of: renders a field's name as the reader knows it (the flag, on the command line).

        Returns:
            The line, without the program's name.
        """
        text = _OTHER_SETTING.sub(lambda match: name_of(match.group(1)), self.message)
        return f"{name_of(self.setting)}: {text}" if self.setting else text


# What a storage that is full, over quota, read-only or failing answers a write: the run or
# tool cannot go on, and says so in one line (not a bug's traceback).
STORAGE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}


def storage_advice(code):
    """What to do about a storage error (space frees nothing on a read-only file system).

    Args:
        code: the error's errno, one of STORAGE_ERRORS.

    Returns:
        A clause the caller appends to its own line: lower case, without a final full stop.
    """
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "free some space, or give a path on another disk"
    if code == errno.EROFS:
        return "the file system is mounted read-only: give a path on a writable disk"
    return "the disk failed a write: check it, or give a path on another disk"
