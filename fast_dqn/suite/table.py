"""The suite's progress: a table of its runs, and the whole suite's agent steps/s and ETA.

A run's figures come from its progress line (the training command prints one every 10 s to
its log) and its episodes.csv: the suite measures nothing itself, so it shows what each run
would show in a terminal of its own.
"""

import csv
import os
import re

from fast_dqn.suite.plan import DAMAGED, FINISHED, NEW, log_tail, run_state

_PROGRESS = re.compile(r"step (?P<step>[\d,]+)/(?P<total>[\d,]+) \([^)]*\) \| "
                       r"(?P<phase>[^|]+?) \|(?: (?P<rate>[\d,]+) steps/s \|)?"
                       r".*\| ETA (?P<eta>\S+)")
_DURATION = re.compile(r"^(?:(?P<d>\d+)d(?P<dh>\d+)h|(?P<h>\d+)h(?P<hm>\d+)m|"
                       r"(?P<m>\d+)m(?P<ms>\d+)s)$")


# The state of a run the suite leaves alone: its config.json is damaged (plan.DAMAGED).
LEFT_OUT = "config.json damaged"


class RunRow:
    """One run's row of the table.

    Args:
        run: the suite's Run that the row shows.
        state: "queued", "running", "to resume", "finished" or LEFT_OUT.
        step: the last agent step the run showed.
        mean_100: the mean score of its last 100 games, or None before it has played one.
        phase: the phase its progress line shows (training, warm-up...), or None.
        eta: its progress line's ETA, in seconds; None where unknown.
        rate: its progress line's agent steps/s, or None.
    """

    def __init__(self, run, state, step=0, mean_100=None, phase=None, eta=None, rate=None):
        self.run, self.state, self.step, self.mean_100 = run, state, step, mean_100
        self.phase, self.eta, self.rate = phase, eta, rate


def read_row(run, timesteps, running):
    """The run's RunRow, read from its files, in a suite of `timesteps` agent steps.

    `running` holds the names of the runs whose process is running now.
    """
    state = run_state(run, timesteps)
    row = RunRow(run, "finished" if state == FINISHED else
                 LEFT_OUT if state == DAMAGED else
                 "running" if run.name in running else
                 "queued" if state == NEW else "to resume")
    row.mean_100, logged_step = _mean_100(run.run_dir)
    line = _last_progress_line(run.log) if os.path.exists(run.log) else None
    if line:
        row.step = int(line["step"].replace(",", ""))
        row.phase = line["phase"].strip()
        row.eta = parse_duration(line["eta"])
        row.rate = int(line["rate"].replace(",", "")) if line["rate"] else None
    row.step = max(row.step, logged_step)
    if row.state == "finished":
        row.step, row.eta = timesteps, 0
    return row


def _mean_100(run_dir):
    """(mean of the last 100 games, agent step of the last game) from episodes.csv, reading only
    its header and last whole row: the table is redrawn every few seconds, the log is long."""
    path = os.path.join(run_dir, "episodes.csv")
    try:
        with open(path, newline="") as f:
            header = f.readline()
        tail = log_tail(path, 4096)
    except OSError:
        return None, 0
    rows = [line for line in (tail or []) if line.strip() and line != header.strip()]
    if not rows:
        return None, 0
    for line in reversed(rows):  # the last may be a row being written
        try:
            last = next(csv.DictReader([header, line]))
            return float(last["mean_100"]), int(last["agent_step"])
        except (StopIteration, TypeError, KeyError, ValueError):
            continue
    return None, 0


def _last_progress_line(log):
    for line in reversed(log_tail(log) or []):
        match = _PROGRESS.search(line)
        if match:
            return match
    return None


def parse_duration(text):
    """The progress line's ETA ('1d03h', '2h53m', '4m10s') in seconds; None for '?'."""
    match = _DURATION.match(text)
    if not match:
        return None
    g = {k: int(v) for k, v in match.groupdict().items() if v is not None}
    return (g.get("d", 0) * 86400 + g.get("dh", 0) * 3600 + g.get("h", 0) * 3600
            + g.get("hm", 0) * 60 + g.get("m", 0) * 60 + g.get("ms", 0))


def format_duration(seconds):
    """A duration in seconds as the table shows it ('1d03h', '2h53m'); '?' for None."""
    if seconds is None:
        return "?"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours:02d}h"
    return f"{hours}h{minutes:02d}m"


def suite_eta(rows, timesteps, parallel):
    """How long until every run of the suite is done, and whether that is only a lower bound.

    The running runs' own ETAs come first, known from a run's first measured rates whatever
    its phase. The runs left (queued, to resume, running with an ETA of '?') are each their
    steps left at the agent steps/s the training runs show; until such a rate is known they are
    left out, and the ETA is a lower bound: no earlier than the longest running run, nor the
    known work over the lanes. A warm-up's or refill's rate, many times training's, would
    promise too early an end and is not used; catching up's, a little slower, is.

    Args:
        rows: the RunRow of every run of the suite.
        timesteps: the suite's budget, in agent steps.
        parallel: the most runs at a time (K).

    Returns:
        (seconds, whole): whole is False where seconds is only a lower bound, and seconds
        is None where not even that is known.
    """
    left = [row for row in rows if row.state not in ("finished", LEFT_OUT)]
    if not left:
        return 0, True
    rate = _training_rate(rows)
    known = [row.eta for row in left if row.state == "running" and row.eta is not None]
    unknown = [row for row in left if row.state != "running" or row.eta is None]
    if not known and rate is None:
        return None, False
    work = sum(known)
    if rate is not None:
        work += sum((timesteps - row.step) / rate for row in unknown)
    seconds = max(work / max(1, min(parallel, len(left))), max(known, default=0))
    return seconds, rate is not None or not unknown


def _training_rate(rows):
    """The mean agent steps/s of the rows training or catching up, or None."""
    rates = [row.rate for row in rows
             if row.rate and (row.phase == "training" or
                              (row.phase or "").startswith("catching up"))]
    return sum(rates) / len(rates) if rates else None


def suite_rate(rows):
    """The agent steps/s of the running runs added up, or None where none shows a rate.

    The sum is what the whole machine plays, the figure to compare between --parallel settings.
    """
    rates = [row.rate for row in rows if row.state == "running" and row.rate]
    return sum(rates) if rates else None


def render(rows, timesteps, parallel):
    """The table's lines, without line ends, then the summary line; arguments as suite_eta's."""
    lines = [f"{'game':<18} {'seed':>4}  {'agent step':>23}  {'steps/s':>7}  {'mean 100':>9}  "
             f"{'state':<22} {'ETA':>7}"]
    for row in rows:
        mean = "-" if row.mean_100 is None else f"{row.mean_100:.2f}"
        state = row.phase if row.state == "running" and row.phase else row.state
        eta = "" if row.state in ("finished", "queued", LEFT_OUT) else format_duration(row.eta)
        rate = f"{row.rate:,}" if row.state == "running" and row.rate else ""
        lines.append(f"{row.run.game:<18} {row.run.seed:>4}  "
                     f"{f'{row.step:,}/{timesteps:,}':>23}  {rate:>7}  {mean:>9}  "
                     f"{state[:22]:<22} {eta:>7}")
    done = sum(row.state == "finished" for row in rows)
    running = sum(row.state == "running" for row in rows)
    total = suite_rate(rows)
    rate = f"{total:,} agent steps/s in all; " if total else ""
    seconds, whole = suite_eta(rows, timesteps, parallel)
    eta = format_duration(seconds) if whole or seconds is None else \
        f"at least {format_duration(seconds)}"
    lines.append(f"suite: {done} of {len(rows)} finished, {running} running; {rate}ETA {eta}")
    return lines
