"""What a tool writes appears whole or not at all: it is written to a partial file beside
its path, then linked or renamed into place (evaluate --export and --video, plot -o)."""

import contextlib
import os
import secrets


@contextlib.contextmanager
def writing(path):
    """A block that writes `path`, whole or not at all; a stop inside it is marked with `path`.

    The mark (`stopped_writing`) lets the tool's last line (fast_dqn.tools.tool_exits) say
    that no partial file of it is left only where one was being written.
    """
    try:
        yield
    except KeyboardInterrupt as stop:  # SIGTERM too: tool_exits.Terminated subclasses it
        if stopped_writing(stop) is None:
            stop.fast_dqn_writing = path
        raise


def stopped_writing(stop):
    """The path a Ctrl-C or SIGTERM, `stop`, stopped the writing of, or None."""
    return getattr(stop, "fast_dqn_writing", None)


def new_partial(path):
    """Create a new, empty, hidden file beside `path`, with its extension, and return its path.

    The extension picks the format Keras or matplotlib writes. The file is created
    exclusively, so it is no one else's (another tool's, one a killed tool of a reused PID
    left, or a link's target), with the usual permissions.
    """
    directory, name = os.path.split(os.path.abspath(path))
    extension = os.path.splitext(name)[1]
    while True:
        partial = os.path.join(directory, f".{name}.partial-{os.getpid()}-"
                               f"{secrets.token_hex(4)}{extension}")
        try:
            os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return partial
        except FileExistsError:
            continue
