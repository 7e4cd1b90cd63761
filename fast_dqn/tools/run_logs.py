"""Reading a run's CSV logs (episodes.csv, eval.csv) for the tools that draw and compare them.

The tools read logs that a user may have edited, and that a training run may be writing at
that moment, so a reader here never fails on a row: a row with a cell that is not a number
is skipped and named in one warning line, and a last line without its newline is a row being
written, left for the next read.
"""

import csv
import os
import sys


def _warn(message):
    print(message, file=sys.stderr)


def read_columns(path, names, warn=_warn):
    """{name: [float, ...]} of the named CSV columns. A missing file or column gives [];
    an empty cell is skipped in its column alone (older logs have no value there)."""
    columns = {name: [] for name in names}
    if not os.path.isfile(path):
        return columns
    try:
        with open(path, newline="") as f:
            lines = f.read().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError) as error:
        warn(f"warning: cannot read {path} ({getattr(error, 'strerror', None) or error}); "
             "drawn without it")
        return columns
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines.pop()  # being written now
    skipped = []
    for line, row in enumerate(csv.DictReader(lines), start=2):
        try:
            values = {name: float(row[name]) for name in names
                      if row.get(name) not in (None, "")}
        except (TypeError, ValueError):
            skipped.append(line)
            continue
        for name, value in values.items():
            columns[name].append(value)
    if skipped:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        warn(f"warning: {path}, line {skipped[0]}{more}: not a row of numbers; skipped "
             "(remove the line to silence this)")
    return columns
