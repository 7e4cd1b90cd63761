"""How a tool's process ends: evaluate, export, plot, and the `fast-dqn` command's own
--help and --version. Whatever stops a tool, the user reads one line and gets a status, as
with the training scripts (fast_dqn.run.cli):

    bad input (a ConfigError: a flag, a run file, KERAS_BACKEND)   one line, status 2
    Ctrl-C                                                          one line, status 130
    SIGTERM                                                         one line, status 143
    (either says "no partial file of 'PATH' is left" where a file was being written, else
    that nothing was being written: fast_dqn.tools.partial_file.writing marks the writes)
    a full, over-quota or read-only disk                            one line, status 1
    a reader that went away (`| head`, `| true`)                    output dropped, status kept

Ctrl-C and SIGTERM are raised in the main thread as exceptions, so the `finally` of whatever
the tool was writing removes its partial file; what it finished stays (an export linked into
place just before the Ctrl-C). Anything else is a bug and keeps its traceback.
"""

import signal
import sys
import threading

from fast_dqn.errors import STORAGE_ERRORS, ConfigError, storage_advice
from fast_dqn.run.logs.progress import OutlivesConsole
from fast_dqn.run.settings.flags import fail


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, as Ctrl-C raises KeyboardInterrupt.

    It is a subclass, so that whatever cleans up after Ctrl-C cleans up after it too.
    """


def _raise_terminated(signum, frame):
    raise Terminated()


def _after(stop):
    """What a stop left on disk, as the end of the tool's last line."""
    from fast_dqn.tools.partial_file import stopped_writing
    path = stopped_writing(stop)
    if path is None:
        return "no file was being written, so nothing is lost"
    return f"no partial file of '{path}' is left"


def run_tool(prog, body, then_ignore=False):
    """Call body(), which returns the tool's exit status, and turn how it ends into one line.

    The status returned is body()'s, or the one the module's table gives; `prog`, the tool's
    name, starts the line. `then_ignore` is for a tool that is the whole process: its last
    moments ignore Ctrl-C and SIGTERM, since a signal after its work is done must not turn it
    into a traceback or exit -15.
    """
    if not isinstance(sys.stdout, OutlivesConsole):
        sys.stdout = OutlivesConsole(sys.stdout)
    if not isinstance(sys.stderr, OutlivesConsole):
        sys.stderr = OutlivesConsole(sys.stderr)
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return body()
    except ConfigError as error:
        return fail(prog, error)
    except Terminated as stop:
        print(f"{prog}: stopped by SIGTERM; {_after(stop)}", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt as stop:
        print(f"{prog}: interrupted; {_after(stop)}", file=sys.stderr)
        return 130
    except OSError as error:
        if error.errno not in STORAGE_ERRORS:
            raise
        where = f" '{error.filename}'" if error.filename else ""
        print(f"{prog}: error: cannot write{where} ({error.strerror}); no partial file is "
              f"left: {storage_advice(error.errno)}", file=sys.stderr)
        return 1
    finally:
        if main_thread and then_ignore:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif main_thread:
            # None: a handler not set from Python, which SIG_DFL stands for.
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
