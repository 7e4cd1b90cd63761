"""Runs beside published curves: `plot RUN --reference dopamine`.

A reference is a folder of fast_dqn/reference_data/ with one CSV per game (snake_case name):
`iteration,agent_steps_end,run_returns`, one row per iteration, the published runs' values
separated by spaces. Dopamine's iteration is 250,000 agent steps of training, played as
whole games (run_experiment.py, _run_one_phase: the game that reaches 250k is finished and
counted), and its value is the mean return of those games (epsilon-greedy, as trained, whole
games, unclipped). Ours is counted the same way from episodes.csv (run_iterations).

A run's value is judged only for iterations it finished; one it is still in is shown as
partial. The run's progress is its newest checkpoint's step, or, for logs copied without
their checkpoints, its last game's step, taken as the iteration's end when that game ended
in the iteration's last tenth.
"""

import csv
import os
import sys
from dataclasses import dataclass
from importlib import resources

from fast_dqn.errors import ConfigError
from fast_dqn.run.storage.checkpoint import CheckpointStore
from fast_dqn.tools.run_logs import read_rows

REFERENCE_PACKAGE = "fast_dqn.reference_data"


@dataclass(frozen=True)
class ReferenceIteration:
    """One iteration, numbered from 0, of a published curve: each published run's mean return."""

    iteration: int
    agent_steps_end: int
    returns: tuple

    @property
    def mean(self):
        """The mean of the published runs' values."""
        return sum(self.returns) / len(self.returns)

    def inside(self, value):
        """Whether `value`, a mean return, lies within the published runs' range."""
        return min(self.returns) <= value <= max(self.returns)


def available_references():
    """The names of the references fast-dqn ships, sorted."""
    root = resources.files(REFERENCE_PACKAGE)
    return sorted(entry.name for entry in root.iterdir()
                  if entry.is_dir() and not entry.name.startswith("_"))


def reference_games(name):
    """The games the reference `name` has data for, snake_case, sorted."""
    root = resources.files(REFERENCE_PACKAGE) / name
    return sorted(entry.name[:-4] for entry in root.iterdir() if entry.name.endswith(".csv"))


def _listed(games):
    """The games a reference has, named where they are few, counted where they are many."""
    return ", ".join(games) if len(games) <= 5 else f"{len(games)} games"


def check_reference(name):
    """Refuse a reference `name` fast-dqn does not ship (ConfigError "--reference")."""
    if name not in available_references():
        raise ConfigError("--reference", f"no reference named '{name}'; the references are: "
                          f"{', '.join(available_references())}")


def load_reference(name, game):
    """The published curve of `game` (snake_case) in reference `name`: [ReferenceIteration].

    Raises:
        ConfigError: ("--reference") the reference is unknown, has no data for `game`, or
            its file has a bad row.
    """
    check_reference(name)
    path = resources.files(REFERENCE_PACKAGE) / name / f"{game}.csv"
    if not path.is_file():
        raise ConfigError("--reference", f"'{name}' has no data for {game}; it has "
                          f"{_listed(reference_games(name))} (fast_dqn/reference_data/"
                          f"{name}/README.md says how to add a game)")
    rows = []
    with path.open(newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                rows.append(ReferenceIteration(
                    int(row["iteration"]), int(row["agent_steps_end"]),
                    tuple(float(v) for v in row["run_returns"].split())))
            except (KeyError, TypeError, ValueError, AttributeError):
                raise ConfigError("--reference", f"{path}, line {line}: not an "
                                  "'iteration,agent_steps_end,run_returns' row") from None
    return rows


def iteration_length(reference):
    """The agent steps of each iteration of a published curve ([ReferenceIteration])."""
    return reference[0].agent_steps_end // (reference[0].iteration + 1)


def read_games(run_dir):
    """The run's training games from episodes.csv: [(agent step at the game's end, return)].

    Rows that are not numbers are skipped with a warning (fast_dqn.tools.run_logs), and so
    are rows without both values. A run without episodes.csv raises ConfigError ("RUN_DIR").
    """
    path = os.path.join(run_dir, "episodes.csv")
    if not os.path.isfile(path):
        raise ConfigError("RUN_DIR", f"'{run_dir}' has no episodes.csv; give run "
                          "directories made by run_dqn.py or run_fast_dqn.py")
    rows = read_rows(path, ("agent_step", "return"))
    return sorted((int(row["agent_step"]), row["return"]) for row in rows
                  if len(row) == 2)


def steps_reached(run_dir, games, length):
    """The agent steps the run is known to have played (see the module's docstring)."""
    last_game = max((step for step, _ in games), default=0)
    # The names are enough: a checkpoint is renamed into place only once it is whole.
    checkpoints = CheckpointStore(run_dir).steps()
    if checkpoints:
        return max(last_game, checkpoints[-1])
    # Logs without checkpoints: a game that ended in an iteration's last tenth stands for
    # the iteration's end, since a game in progress at a stop is never logged.
    tenth = length // 10
    return (last_game + tenth) // length * length if last_game % length >= length - tenth \
        else last_game


def run_iterations(run_dir, length):
    """The run's iterations of `length` agent steps, as Dopamine's Runner cuts them.

    An iteration plays whole games until it has played `length` agent steps, so the game
    that reaches its length is its last, and the next one starts where that game ended.

    The run's last iteration, which no game has closed yet, is finished when the run reached
    the iteration's nominal end ((k + 1) x length) having played at least nine tenths of it:
    a run stopped at 1M has finished four iterations, the last short only of the overshoot
    of the games that closed the three before it.

    Returns:
        {iteration: (mean return, games, finished)}, the iterations from 0.
    """
    games = read_games(run_dir)
    reached = steps_reached(run_dir, games, length)
    iterations, start, current = [], 0, []
    for step, value in games:
        current.append(value)
        if step >= start + length:
            iterations.append((current, True))
            start, current = step, []
    if current:
        nominal_end = (len(iterations) + 1) * length
        finished = reached >= nominal_end and reached - start >= 0.9 * length
        iterations.append((current, finished))
    return {k: (sum(values) / len(values), len(values), finished)
            for k, (values, finished) in enumerate(iterations)}


@dataclass(frozen=True)
class Comparison:
    """Our runs against a published curve in one iteration, numbered from 0.

    `ours` holds one mean return per run that has games in the iteration; `finished` says
    whether every one of those runs finished it.
    """

    iteration: int
    agent_steps_end: int
    ours: tuple
    finished: bool
    reference: ReferenceIteration

    @property
    def mean(self):
        """The mean of our runs' values."""
        return sum(self.ours) / len(self.ours)

    @property
    def inside(self):
        """How many of our runs lie within the published runs' range."""
        return sum(self.reference.inside(value) for value in self.ours)


def compare(run_dirs, name, game):
    """Our runs against the published curve, per iteration in which any of them ended a game.

    All of `run_dirs` are runs of `game` (snake_case); `name` is the reference's.

    Returns:
        [Comparison], in iteration order.
    """
    reference = load_reference(name, game)
    length = iteration_length(reference)
    by_run = [run_iterations(run_dir, length) for run_dir in run_dirs]
    rows = []
    for published in reference:
        k = published.iteration
        present = [found[k] for found in by_run if k in found]
        if not present:
            continue
        rows.append(Comparison(k, published.agent_steps_end,
                               tuple(value for value, _, _ in present),
                               all(done for _, _, done in present), published))
    return rows


def print_comparison(rows, label, runs, out=None):
    """Print a setting's [Comparison] of `runs` runs as a Markdown table, an iteration a row."""
    out = out or sys.stdout
    many = runs > 1
    ours = "ours: mean [range] of the runs" if many else "ours"
    length = rows[0].agent_steps_end // (rows[0].iteration + 1) if rows else 0
    print(f"{label}: the mean training return of each {length:,}-step iteration", file=out)
    print(f"| iteration | agent steps | {ours} | Dopamine mean | Dopamine range | inside |",
          file=out)
    print("|---|---|---|---|---|---|", file=out)
    for row in rows:
        ref = row.reference
        # An iteration only some of the runs reached is judged on those alone.
        several = len(row.ours) > 1
        if not row.finished:
            verdict = "partial: not judged"
        elif several:
            verdict = f"{row.inside} of {len(row.ours)} runs"
        else:
            verdict = ("yes" if row.inside else "no") + (" (1 run)" if many else "")
        value = f"{row.mean:.2f}"
        if several:
            value += f" [{min(row.ours):.2f}, {max(row.ours):.2f}]"
        print(f"| {row.iteration} | {row.agent_steps_end:,} | {value} | {ref.mean:.2f} | "
              f"{min(ref.returns):.2f} – {max(ref.returns):.2f} | {verdict} |", file=out)


def runs_label(label, rows):
    """The legend of our runs, with how many each iteration averages.

    Runs of different lengths give fewer at the end ("2 runs to 500,000 agent steps, then 1").
    """
    counts = [len(row.ours) for row in rows]
    if not counts or min(counts) == max(counts):
        n = counts[0] if counts else 0
        return f"{label} ({n} run{'s' if n != 1 else ''})"
    parts, start = [], 0
    for i in range(1, len(counts) + 1):
        if i == len(counts) or counts[i] != counts[start]:
            n = counts[start]
            runs = f"{n} run{'s' if n != 1 else ''}"
            parts.append(f"{runs} to {rows[i - 1].agent_steps_end:,} agent steps"
                         if i < len(counts) else f"then {n}")
            start = i
    return f"{label} ({', '.join(parts)})"


def _draw_band(ax, x, ref, reference):
    """The published runs' range and mean at agent steps x."""
    label = f"{reference}, {len(ref[0].returns)} runs (range)"
    if len(x) == 1:  # a band over one x has no width: its range as a bar
        ax.vlines(x, min(ref[0].returns), max(ref[0].returns), color="0.6", alpha=0.6,
                  linewidth=8, label=label)
        ax.plot(x, [ref[0].mean], "_", color="0.3", markersize=16, label=f"{reference}, mean")
        return
    ax.fill_between(x, [min(r.returns) for r in ref], [max(r.returns) for r in ref],
                    color="0.6", alpha=0.35, linewidth=0, label=label)
    ax.plot(x, [r.mean for r in ref], color="0.3", linestyle="--", label=f"{reference}, mean")


def draw_comparison(ax, rows, label, color=None, reference="Dopamine DQN", band=True):
    """Draw our runs' curve over the published band, against agent steps.

    `band` draws the published band and mean: set it once per panel, however many of our
    settings share it. The mean's line is returned; the runs' range is shaded around it where
    there are several.
    """
    import numpy as np
    x = np.array([row.agent_steps_end for row in rows], np.float64)
    ref = [row.reference for row in rows]
    if band:
        _draw_band(ax, x, ref, reference)
    line, = ax.plot(x, [row.mean for row in rows], "o-", color=color, markersize=4,
                    label=label)
    if any(len(row.ours) > 1 for row in rows):
        ax.fill_between(x, [min(row.ours) for row in rows], [max(row.ours) for row in rows],
                        color=line.get_color(), alpha=0.2, linewidth=0)
    partial = [i for i, row in enumerate(rows) if not row.finished]
    if partial:
        ax.plot(x[partial], [rows[i].mean for i in partial], "o", color="white",
                markeredgecolor=line.get_color(), label="partial iteration")
    return line
