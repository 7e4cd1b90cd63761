"""The one table of a GPU session (benchmarks/gpu_session.sh), read from its output folder.

    python -m benchmarks.gpu_table OUT_DIR

Each row is a figure one of the session's parts printed or logged, with the target of the
issue that set it; a part that did not run, or ran out of time, shows "not measured". The
figures are taken as printed, never recomputed: the table only gathers them.
"""

import argparse
import csv
import os
import re

# (row, its target): the targets docs/gpu.md sets for one H200 or H100 with 16 cores.
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


def _learner_table(path):
    """Yield (variant, {column: cell}) for each row of benchmarks.learner's tables.

    The columns are read from each table's header: older tables have no "runs" column and
    one "updates/s"; newer ones "runs", "updates/s per run" and "updates/s in all".
    """
    if not os.path.exists(path):
        return
    variant, header = "", None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("-- "):
                variant = line[3:].strip()
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[:1] == ["batch"]:
                header = cells
            elif header and len(cells) == len(header) and cells[0].isdigit():
                yield variant, dict(zip(header, cells))


def _number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def learner_rows(path):
    """{(K, variant): updates/s} of one run, batch 32, float32, replay on the device, from
    benchmarks.learner's tables in learner.txt; the variant is "" for the first tables, else
    the heading line ("-- ...") before its table."""
    rows = {}
    for variant, row in _learner_table(path):
        if row.get("batch") == "32" and row.get("compute") == "float32" and \
                row.get("replay") == "device" and row.get("runs", "1") == "1" and \
                row.get("per call", "").isdigit():
            rate = _number(row.get("updates/s in all", row.get("updates/s")))
            if rate is not None:
                rows.setdefault((int(row["per call"]), variant), rate)
    return rows


def group_rows(path):
    """{G: updates/s in all} of G runs in one call (batch 32, float32, replay on the device)."""
    rows = {}
    for _, row in _learner_table(path):
        if row.get("batch") == "32" and row.get("compute") == "float32" and \
                row.get("runs", "").isdigit():
            rate = _number(row.get("updates/s in all"))
            if rate is not None:
                rows.setdefault(int(row["runs"]), rate)
    return rows


def nature_days(rate, games=49, steps=50_000_000):
    """The Nature benchmark's days at `rate` agent steps/s in all: computed, not measured."""
    return games * steps / rate / 86_400


def speedtest_rows(*paths):
    """{case name: (agent steps/s, trainer busy or None)} from speedtest CSVs."""
    rows = {}
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                busy = row.get("trainer_busy") or None
                rows[row["name"]] = (float(row["steps_per_s"]), busy and float(busy))
    return rows


def suite_rate(path):
    """The last sum of the suite's running runs' agent steps/s in its plain output."""
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        found = re.findall(r"([\d,]+) agent steps/s in all", f.read())
    return int(found[-1].replace(",", "")) if found else None


def pong_solved(path, threshold=18.0, window=100):
    """(minutes on the run's clock, agent step) where the mean of the last 100 games first
    reached `threshold`, or None."""
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                if int(row["episode"]) >= window and float(row["mean_100"]) >= threshold:
                    return float(row["hours"]) * 60, int(row["agent_step"])
            except (KeyError, TypeError, ValueError):
                continue
    return None


def table(out):
    learner = learner_rows(os.path.join(out, "learner.txt"))
    loops = speedtest_rows(os.path.join(out, "nature.csv"), os.path.join(out, "speedtest.csv"))
    two_groups = speedtest_rows(os.path.join(out, "two-groups.csv"))
    rate = lambda v: MISSING if v is None else f"{v:,.0f}"  # noqa: E731

    def loop(name, rows=loops):
        steps, busy = rows.get(name, (None, None))
        return rate(steps) + ("" if busy is None else f" (trainer busy {busy:.2f})")

    rows = [("learner, batch 32, float32, K = 1 (updates/s)", rate(learner.get((1, ""))), ""),
            ("learner, K = 64", rate(learner.get((64, ""))), ""),
            ("learner, K = 256", rate(learner.get((256, ""))), TARGETS["learner"]),
            ("learner, K = 64, no deterministic kernels",
             rate(learner.get((64, "without deterministic kernels"))), ""),
            ("learner, K = 64, scan body as a command buffer",
             rate(learner.get((64, "the scan's body as a command buffer"))), ""),
            ("Nature loop (agent steps/s)", loop("nature"), "")]
    for w in (16, 32, 64):
        rows.append((f"samplers alone, W = {w}", loop(f"samplers-{w}"),
                     TARGETS["samplers"] if w == 64 else ""))
    rows.append(("samplers alone, W = 64, two groups (--sampler-groups 2)",
                 loop("samplers-64", two_groups), TARGETS["samplers"]))
    for w in (16, 32, 64):
        rows.append((f"fast loop, Nature ratios, W = {w}", loop(f"fast-{w}-on-on"),
                     TARGETS["fast"] if w == 32 else ""))
    rows.append(("fast loop, Nature ratios, W = 32, two groups",
                 loop("fast-32-on-on", two_groups), TARGETS["fast"]))
    rows.append(("suite of 4 Dopamine runs on one GPU, in all",
                 rate(suite_rate(os.path.join(out, "suite.txt"))), TARGETS["suite"]))
    groups = group_rows(os.path.join(out, "groups-learner.txt"))
    for g in (1, 2, 4, 8, 16):
        rows.append((f"learner, K = 64, {g} runs in one call, updates/s in all",
                     rate(groups.get(g)), TARGETS["groups"] if g == 8 else ""))
    for name, words in (("suite-8-processes", "8 processes"),
                        ("suite-8-groups", "2 groups of 4 runs")):
        measured = suite_rate(os.path.join(out, f"{name}.txt"))
        rows.append((f"suite of 8 Dopamine runs, {words}, in all", rate(measured),
                     TARGETS["suite8"]))
        rows.append((f"the 49 Nature games at 50M agent steps, one seed, at {words}' rate "
                     "(computed, days)",
                     MISSING if measured is None else f"{nature_days(measured):.1f}",
                     TARGETS["days"]))
    solved = pong_solved(os.path.join(out, "episodes.csv"))
    rows.append(("pong-fastest, W = 16: mean of 100 at 18",
                 MISSING if solved is None else
                 f"{solved[0]:.2f} min, agent step {solved[1]:,}", TARGETS["pong"]))
    lines = ["| row | measured | target |", "|---|---|---|"]
    lines += [f"| {name} | {value} | {target} |" for name, value, target in rows]
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the session's output folder ($OUT)")
    args = parser.parse_args(argv)
    header = os.path.join(args.out, "header.txt")
    if os.path.exists(header):
        with open(header) as f:
            print("".join(f"<!-- {line.strip()} -->\n" for line in f if line.strip()), end="")
    print("\n".join(table(args.out)))


if __name__ == "__main__":
    main()
