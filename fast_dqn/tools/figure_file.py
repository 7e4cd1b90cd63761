"""Writing a tool's figure: the -o path checked before any log is read, and the image
written whole or not at all."""

import contextlib
import os
import sys

from fast_dqn.errors import ConfigError


def check_output(output):
    """Refuse, before a log is read, an -o that cannot be the image written (ConfigError "-o").

    Its extension picks the format, so one matplotlib cannot write (a run's config.json or
    episodes.csv among them) or none (which matplotlib would write as NAME.png) is refused,
    and so are a directory and a path in a directory that does not exist.
    """
    from matplotlib.backend_bases import FigureCanvasBase
    formats = ", ".join(sorted(FigureCanvasBase.get_supported_filetypes()))
    if os.path.isdir(output):
        raise ConfigError("-o", f"'{output}' is a directory; give an image file, e.g. "
                          f"{os.path.join(output, 'curves.png')}")
    directory = os.path.dirname(output) or "."
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise ConfigError("-o", f"'{directory}' {what}; create it, or give an image file in "
                          "an existing directory")
    extension = os.path.splitext(output)[1]
    if not extension:
        raise ConfigError("-o", f"'{output}' has no extension; give -o {output}.png; the "
                          f"extension picks the format ({formats})")
    if extension[1:].lower() not in FigureCanvasBase.get_supported_filetypes():
        raise ConfigError("-o", f"'{extension}' is not an image format matplotlib writes; "
                          f"give an image file such as curves.png ({formats})")


@contextlib.contextmanager
def missing_glyphs_said(prog):
    """A block whose warnings of glyphs missing from the font are said once, in one line.

    matplotlib warns once per missing glyph per layout and draw, each warning with a source
    line: a run named in a script the font lacks got a screenful. Inside, those warnings are
    caught and said when the figure is done, in one line that starts with `prog`.
    """
    import re
    import warnings
    missing = []

    def show(message, category, filename, lineno, file=None, line=None):
        # "Glyph 128640 (\N{ROCKET}) missing from font(s) DejaVu Sans."
        found = re.match(r"Glyph \d+ \((?:\\N\{)?(.*?)\}?\) missing from font\(s\) (.*)\.$",
                         str(message))
        if found:
            missing.append(found.groups())
        else:
            shown(message, category, filename, lineno, file, line)
    with warnings.catch_warnings():
        shown = warnings.showwarning
        warnings.showwarning = show
        warnings.filterwarnings("always", message="Glyph .* missing from font")
        try:
            yield
        finally:
            if missing:
                names = list(dict.fromkeys(name for name, _ in missing))
                fonts = missing[0][1]
                print(f"{prog}: note: the font ({fonts}) lacks {len(names)} character"
                      f"{'s' * (len(names) > 1)} of the labels ({', '.join(names[:5])}"
                      f"{', ...' if len(names) > 5 else ''}); they are drawn as boxes",
                      file=sys.stderr)


def save_figure(fig, plt, output):
    """Write `fig` to `output` (returned) whole, through a hidden file beside it, then close it.

    The hidden file is renamed over `output` once written, so an interrupted plot leaves the
    last image as it was and no partial file. An existing image is replaced: a run's figure is
    drawn again to the same path as the run goes on (the training scripts' `next:` line).

    Raises:
        ConfigError: ("-o") `output` cannot be written, but for a full, over-quota or read-only
            disk: its OSError, with `output` named.
    """
    from fast_dqn.tools.partial_file import new_partial, writing
    partial = None
    try:
        with writing(output):
            partial = new_partial(output)
            fig.savefig(partial, dpi=120)
            os.replace(partial, output)
    except OSError as error:
        from fast_dqn.errors import STORAGE_ERRORS
        if error.errno in STORAGE_ERRORS:  # a full disk: tool_exits's one line, status 1
            raise OSError(error.errno, error.strerror, output) from None
        raise ConfigError("-o", f"cannot write '{output}' ({error.strerror}); give a writable "
                          "path")
    finally:
        plt.close(fig)
        if partial is not None:
            with contextlib.suppress(OSError):  # gone (renamed), or a read-only disk's error
                os.remove(partial)
    return output
