"""The one table of a GPU session (benchmarks/gpu_session.sh), read from its output folder.

    python -m benchmarks.gpu_table OUT_DIR

Each row is a figure one of the session's parts printed or logged, with the goal of the
issue that set it; a part that did not run, or ran out of time, shows "not measured". The
figures are taken as printed, never recomputed: the table only gathers them. A session run
on the CPU (header.txt says so) labels every row as a CPU figure.

Damaged input: a missing folder, or a header.txt (which names the device) missing, empty or
unreadable, stops the tool with one line on stderr and exit 2, no table; a damaged figure file
shows "damaged: FILE" in each row it feeds, and after the table one line per such file on
stderr says what is wrong and which part to rerun (exit 2).
"""

import argparse
import csv
import io
import math
import os
import re
import sys

# (row, its goal): the goals docs/gpu.md sets for one H200 or H100 with 16 cores.
TARGETS = {
    "samplers": "≥ 15,000",
    "learner": "≥ 5,000",
    "fast": "≥ 10,000",
    "pong": "≤ 1 min",
    "suite": "≥ 12,000",
    "groups": "≥ 15,000",
    "suite8": "≥ 15,000",
    "days": "≤ 2",
}
MISSING = "not measured"
# The part of gpu_session.sh that writes each file the table reads: the one to rerun.
PARTS = {"learner.txt": "learner", "groups-learner.txt": "groups",
         "suite-8-processes.txt": "groups", "suite-8-groups.txt": "groups",
         "nature.csv": "loops", "speedtest.csv": "loops", "two-groups.csv": "loops",
         "suite.txt": "suite", "episodes.csv": "pong"}
# No benchmark prints a figure this long; a longer one is damage, not a measurement.
_LONGEST = 32
_NUMBER = re.compile(r"-?(\d{1,3}(,\d{3})+|\d+)(\.\d*)?([eE][-+]?\d+)?")
_WHOLE = re.compile(r"\d{1,3}(,\d{3})+|\d+")


class Damaged(Exception):
    """A file a part wrote that cannot be read as the part writes it."""

    def __init__(self, path, what):
        super().__init__(f"{path}: {what}")
        self.path, self.what = path, what


class Unread(str):
    """The cell of a row whose file is damaged: "damaged: FILE"."""


def _show(text):
    """`text` quoted for a one-line message: cut, with its length when long."""
    return repr(text) if len(text) <= 24 else f"{text[:20]!r}... ({len(text):,} characters)"


def _number(text, path, where, whole=False):
    """The figure `text` as printed ("2,399.4", "437", "-21.0"); Damaged if it is none."""
    text = text.strip()
    if len(text) > _LONGEST:
        raise Damaged(path, f"{where}: {_show(text)}, longer than any figure a benchmark "
                      "prints")
    if not (_WHOLE if whole else _NUMBER).fullmatch(text):
        raise Damaged(path, f"{where}: {_show(text)} is not a"
                      f"{' whole number' if whole else ' number'}")
    value = (int if whole else float)(text.replace(",", ""))
    if not math.isfinite(value):
        raise Damaged(path, f"{where}: {_show(text)} is not a finite number")
    return value


def _text(path):
    """The text of the file at `path`, or None when there is none; Damaged when it is not a
    readable text file (a folder, binary bytes)."""
    if not os.path.lexists(path):
        return None
    if os.path.isdir(path):
        raise Damaged(path, "is a folder, not a file")
    if not os.path.isfile(path):  # a dangling link, or a pipe that would block the read
        raise Damaged(path, "is not a regular file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Damaged(path, f"cannot be read ({e.strerror})") from None
    if b"\0" in data:
        raise Damaged(path, "holds binary bytes, not text")
    # A log keeps a stray byte that is not UTF-8, replaced; a CSV refuses it (_csv_rows).
    return data.decode("utf-8", errors="replace")


def _learner_table(path, kind=("compute", "per call", "replay"),
                   rates=("updates/s in all", "updates/s")):
    """Yield (variant, line number, {column: cell}) for each row of benchmarks.learner's tables.

    The columns are read from each table's header: older tables have no "runs" column and
    one "updates/s"; newer ones "runs", "updates/s per run" and "updates/s in all". A table
    without the `kind` columns is an older benchmark's, with no row here; one of that kind
    without a column of `rates`, or a row with another number of cells than its header, is
    Damaged.
    """
    text = _text(path)
    if text is None:
        return
    variant, header = "", None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("-- "):
            variant = line[3:].strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:1] == ["batch"]:
            header = cells if all(name in cells for name in kind) else []
            if header and not any(name in cells for name in rates):
                raise Damaged(path, f"line {number}: its table has no {rates[-1]!r} column")
        elif not header or set("".join(cells)) <= set("-: "):
            continue  # the header's rule, a row before any header, or an older table's
        elif len(cells) != len(header):
            raise Damaged(path, f"line {number}: {len(cells)} cells where its table has "
                          f"{len(header)} (cut short?)")
        else:
            _number(cells[0], path, f"line {number}, batch", whole=True)
            yield variant, number, dict(zip(header, cells))


def _rate(row, column, path, number):
    """The rate in `column` of the learner row on line `number`, checked."""
    return _number(row[column], path, f"line {number}, {column}")


def learner_rows(path):
    """{(K, variant): updates/s} of one run, batch 32, float32, replay on the device, from
    benchmarks.learner's tables in learner.txt; the variant is "" for the first tables, else
    the heading line ("-- ...") before its table."""
    rows = {}
    for variant, number, row in _learner_table(path):
        if row["batch"] == "32" and row["compute"] == "float32" and \
                row["replay"] == "device" and row.get("runs", "1") == "1":
            per_call = _number(row["per call"], path, f"line {number}, per call", whole=True)
            column = "updates/s in all" if "updates/s in all" in row else "updates/s"
            rows.setdefault((per_call, variant), _rate(row, column, path, number))
    return rows


def group_rows(path):
    """{G: updates/s in all} of G runs in one call (batch 32, float32, replay on the device)."""
    rows = {}
    for _, number, row in _learner_table(path, ("compute", "runs"), ("updates/s in all",)):
        if row["batch"] == "32" and row["compute"] == "float32":
            runs = _number(row["runs"], path, f"line {number}, runs", whole=True)
            rows.setdefault(runs, _rate(row, "updates/s in all", path, number))
    return rows


def nature_days(rate, games=49, steps=50_000_000):
    """The Nature benchmark's days at `rate` agent steps/s in all: computed, not measured."""
    return games * steps / rate / 86_400


def _csv_rows(path, columns):
    """The rows of the CSV at `path` as dicts, each checked to have every field of its header
    and the header `columns`; None when there is no file."""
    text = _text(path)
    if text is None:
        return None
    if "\ufffd" in text:
        raise Damaged(path, "is not UTF-8 text")
    try:
        lines = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise Damaged(path, f"is not CSV ({e})") from None
    if not lines:
        raise Damaged(path, "is empty: no header row")
    header, rows = lines[0], []
    missing = [name for name in columns if name not in header]
    if missing:
        raise Damaged(path, f"has no {missing[0]!r} column")
    for number, fields in enumerate(lines[1:], 2):
        if fields and len(fields) != len(header):
            raise Damaged(path, f"row {number} has {len(fields)} of {len(header)} fields "
                          "(cut short?)")
        if fields:
            rows.append((number, dict(zip(header, fields))))
    if not text.endswith("\n"):  # the CSV writers end every row with one
        raise Damaged(path, "its last row has no line break at its end (cut short?)")
    return rows


def speedtest_rows(*paths):
    """{case name: (agent steps/s, trainer busy or None)} from speedtest CSVs."""
    rows = {}
    for path in paths:
        for number, row in _csv_rows(path, ("name", "steps_per_s")) or ():
            busy = row.get("trainer_busy") or None
            rows[row["name"]] = (
                _number(row["steps_per_s"], path, f"row {number}, steps_per_s"),
                busy and _number(busy, path, f"row {number}, trainer_busy"))
    return rows


def suite_rate(path):
    """The last sum of the suite's running runs' agent steps/s in its plain output."""
    text = _text(path)
    found = re.findall(r"(\d[\d,]*) agent steps/s in all", text or "")
    if not found:
        return None
    rate = _number(found[-1], path, "its last sum of agent steps/s", whole=True)
    if rate == 0:  # the suite prints no sum of 0
        raise Damaged(path, "its last sum of agent steps/s is 0")
    return rate


def pong_solved(path, threshold=18.0, window=100):
    """(minutes on the run's clock, agent step) where the mean of the last 100 games first
    reached `threshold`, or None."""
    games = [(_number(row["episode"], path, f"row {number}, episode", whole=True),
              _number(row["agent_step"], path, f"row {number}, agent_step", whole=True),
              _number(row["mean_100"], path, f"row {number}, mean_100"),
              _number(row["hours"], path, f"row {number}, hours"))
             for number, row in _csv_rows(path, ("episode", "agent_step", "mean_100",
                                                 "hours")) or ()]  # every row is checked
    return next(((hours * 60, step) for episode, step, mean, hours in games
                 if episode >= window and mean >= threshold), None)


def session_device(out):
    """"CPU" when header.txt says the session ran on the CPU (GPU_SESSION_CPU=1, or an older
    session with no nvidia-smi), else "GPU". Damaged when header.txt cannot be read."""
    return _device(_text(os.path.join(out, "header.txt")) or "")


def _device(header):
    lines = header.splitlines()
    if any(line.startswith("device CPU") for line in lines):
        return "CPU"
    if "no nvidia-smi" in lines and not any(line.startswith("device GPU") for line in lines):
        return "CPU"
    return "GPU"


def table(out, device=None, problems=None):
    """The table's lines, read from the folder `out`.

    Args:
        out: the session's output folder.
        device: "GPU" or "CPU", the rows' label; None reads it from header.txt.
        problems: a dict that gets {file name: what is wrong} for each damaged file.

    Returns:
        The lines of a markdown table; on the CPU, a title line first.
    """
    device = device or session_device(out)
    problems = {} if problems is None else problems

    def read(reader, name):
        try:
            return reader(os.path.join(out, name))
        except Damaged as damaged:
            problems[name] = damaged.what
            return Unread(f"damaged: {name}")

    def get(found, key):
        return found if isinstance(found, Unread) else (found or {}).get(key)

    def rate(v):
        return v if isinstance(v, Unread) else MISSING if v is None else f"{v:,.0f}"

    learner = read(learner_rows, "learner.txt")
    nature, loops = read(speedtest_rows, "nature.csv"), read(speedtest_rows, "speedtest.csv")
    two_groups = read(speedtest_rows, "two-groups.csv")

    def loop(name, *sources):
        """The case's figure from the first source that has it; a damaged one before it
        shows as damaged."""
        for rows in sources:
            if isinstance(rows, Unread):
                return rows
            if name in rows:
                steps, busy = rows[name]
                return rate(steps) + ("" if busy is None else f" (trainer busy {busy:.2f})")
        return MISSING

    rows = [("learner, batch 32, float32, K = 1 (updates/s)", rate(get(learner, (1, ""))), ""),
            ("learner, K = 64", rate(get(learner, (64, ""))), ""),
            ("learner, K = 256", rate(get(learner, (256, ""))), TARGETS["learner"]),
            ("learner, K = 64, no deterministic kernels",
             rate(get(learner, (64, "without deterministic kernels"))), ""),
            ("learner, K = 64, scan body as a command buffer",
             rate(get(learner, (64, "the scan's body as a command buffer"))), ""),
            ("Nature loop (agent steps/s)", loop("nature", nature, loops), "")]
    for w in (16, 32, 64):
        rows.append((f"samplers alone, W = {w}", loop(f"samplers-{w}", loops, nature),
                     TARGETS["samplers"] if w == 64 else ""))
    rows.append(("samplers alone, W = 64, two groups (--sampler-groups 2)",
                 loop("samplers-64", two_groups), TARGETS["samplers"]))
    for w in (16, 32, 64):
        rows.append((f"fast loop, Nature ratios, W = {w}", loop(f"fast-{w}-on-on", loops, nature),
                     TARGETS["fast"] if w == 32 else ""))
    rows.append(("fast loop, Nature ratios, W = 32, two groups",
                 loop("fast-32-on-on", two_groups), TARGETS["fast"]))
    rows.append(("suite of 4 Dopamine runs on one GPU, in all",
                 rate(read(suite_rate, "suite.txt")), TARGETS["suite"]))
    groups = read(group_rows, "groups-learner.txt")
    for g in (1, 2, 4, 8, 16):
        rows.append((f"learner, K = 64, {g} runs in one call, updates/s in all",
                     rate(get(groups, g)), TARGETS["groups"] if g == 8 else ""))
    for name, words in (("suite-8-processes", "8 processes"),
                        ("suite-8-groups", "2 groups of 4 runs")):
        measured = read(suite_rate, f"{name}.txt")
        rows.append((f"suite of 8 Dopamine runs, {words}, in all", rate(measured),
                     TARGETS["suite8"]))
        rows.append((f"the 49 Nature games at 50M agent steps, one seed, at {words}' rate "
                     "at ε 0.1, evaluation left out (computed, days)",
                     measured if isinstance(measured, Unread) else
                     MISSING if measured is None else f"{nature_days(measured):.1f}",
                     TARGETS["days"]))
    solved = read(pong_solved, "episodes.csv")
    rows.append(("pong-fastest, W = 16: mean of 100 at 18",
                 solved if isinstance(solved, Unread) else MISSING if solved is None else
                 f"{solved[0]:.2f} min, agent step {solved[1]:,}", TARGETS["pong"]))
    if device == "CPU":
        # CPU figures must never pass for GPU ones: the title and every row say so.
        rows = [(f"CPU: {name.replace('on one GPU', 'on the CPU')}", value, target)
                for name, value, target in rows]
        lines = ["**CPU figures, not GPU ones**: measured on the CPU; the goals are the "
                 "GPU's.", "", "| row | measured on the CPU | GPU goal |"]
    else:
        lines = ["| row | measured | goal |"]
    lines.append("|---|---|---|")
    lines += [f"| {name} | {value} | {target} |" for name, value, target in rows]
    return lines


def _fail(message):
    print(f"gpu_table: {message}", file=sys.stderr)
    return 2


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the session's output folder ($OUT)")
    args = parser.parse_args(argv)
    fix = "give the folder gpu_session.sh wrote its figures to (its OUT)"
    if not os.path.isdir(args.out):
        what = "not a folder" if os.path.exists(args.out) else "no such folder"
        return _fail(f"{args.out}: {what}; {fix}")
    header = os.path.join(args.out, "header.txt")
    try:
        text = _text(header)
    except Damaged as damaged:
        return _fail(f"{damaged}; rerun bash benchmarks/gpu_session.sh into a new OUT "
                     "(header.txt names the device that measured every figure)")
    if text is None:
        return _fail(f"{header}: missing, so this is no session's folder; {fix}")
    if not text.strip():
        return _fail(f"{header}: empty, so it names no device for the figures; rerun bash "
                     "benchmarks/gpu_session.sh into a new OUT")
    print("".join(f"<!-- {line.strip()} -->\n" for line in text.splitlines() if line.strip()),
          end="")
    problems = {}
    print("\n".join(table(args.out, _device(text), problems)), flush=True)
    for name, what in problems.items():
        _fail(f"{os.path.join(args.out, name)}: {what}; its rows read 'damaged': rerun "
              f"bash benchmarks/gpu_session.sh {PARTS[name]} into a new OUT")
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
