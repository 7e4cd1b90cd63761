"""Reading a run's CSV logs (episodes.csv, eval.csv) for the tools that draw and compare them.

The tools read logs that a user may have edited, and that a training run may be writing at
that moment, so a reader here never fails on a row: a row with a cell that is not a number
is skipped and named in one warning line, and a last line without its newline is a row being
written, left for the next read.
"""

import csv
import math
import os
import sys


def _warn(message):
    print(message, file=sys.stderr)


def _number(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def read_rows(path, names, warn=_warn):
    """[{name: float}] of the CSV's rows, with the named cells that have a value. A missing
    file gives []; a row with a named cell that is not a finite number is skipped and named
    in one warning."""
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
    rows, skipped = [], []
    for line, row in enumerate(csv.DictReader(lines), start=2):
        try:
            rows.append({name: _number(row[name]) for name in names
                         if row.get(name) not in (None, "")})
        except (TypeError, ValueError):
            skipped.append(line)
    if skipped:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        warn(f"warning: {path}, line {skipped[0]}{more}: not a row of numbers; skipped "
             "(remove the line to silence this)")
    return rows


def read_columns(path, names, warn=_warn):
    """{name: [float, ...]} of the named CSV columns. A missing file or column gives [];
    an empty cell is skipped in its column alone (older logs have no value there)."""
    columns = {name: [] for name in names}
    for row in read_rows(path, names, warn):
        for name, value in row.items():
            columns[name].append(value)
    return columns
