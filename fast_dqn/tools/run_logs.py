"""Reading a run's CSV logs (episodes.csv, eval.csv) for the tools that draw and compare them.

The tools read logs that a user may have edited, and that a training run may be writing at
that moment, so a reader here never fails on a row: a row with a cell that is blank or not a
number is skipped whole and named in one warning line, and a last line without its newline is
a row being written, left for the next read. A column the header lacks (older logs have no
`hours` in eval.csv) is no bad row: no row has it.
"""

import contextlib
import csv
import math
import os
import sys

_said = None  # the warnings printed so far, inside warnings_once()


@contextlib.contextmanager
def warnings_once():
    """Inside it, a warning is printed once: a tool reads a log for each panel and table."""
    global _said
    outer, _said = _said, set()
    try:
        yield
    finally:
        _said = outer


def _warn(message):
    if _said is not None:
        if message in _said:
            return
        _said.add(message)
    print(message, file=sys.stderr)


def _number(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def read_rows(path, names, warn=_warn):
    """The CSV's rows, [{name: float}], each with those of `names` that the header has.

    A missing file gives []; a bad row is skipped whole (see the top), so values of one row stay
    together. `warn` is told each warning line; by default it is printed once, to stderr.
    """
    if not os.path.isfile(path):
        return []
    try:
        with open(path, newline="") as f:
            lines = f.read().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError) as error:
        warn(f"warning: cannot read {path} ({getattr(error, 'strerror', None) or error}); "
             "drawn without it")
        return []
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines.pop()  # being written now
    reader = csv.DictReader(lines)
    present = [name for name in names if name in (reader.fieldnames or ())]
    rows, skipped = [], []
    for line, row in enumerate(reader, start=2):
        try:  # a short row's missing cells are None: a TypeError, as a blank is a ValueError
            rows.append({name: _number(row[name]) for name in present})
        except (TypeError, ValueError):
            skipped.append(line)
    if skipped:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        warn(f"warning: {path}, line {skipped[0]}{more}: not a row of numbers; skipped "
             "(remove the line to silence this)")
    return rows


def read_columns(path, names, warn=_warn):
    """The named CSV columns, {name: [float, ...]}, each column's i-th value from one row.

    A missing file or a column the header lacks (an older log's) gives []; a row with a
    blank cell is skipped in every column (read_rows, which takes the same `warn`).
    """
    columns = {name: [] for name in names}
    for row in read_rows(path, names, warn):
        for name, value in row.items():
            columns[name].append(value)
    return columns
