"""A run's scores as the tools read them from its logs: the training return (the mean of the
last games) and the evaluations, and which of them a set of runs is scored by."""

import csv
import json
import os

from fast_dqn.tools.run_logs import read_columns, read_rows

# Each log is read with the same columns wherever it is read, so that every reader skips the
# same rows (a row with a blank cell in any of them) and the warning naming them is one line.
EPISODE_COLUMNS = ("agent_step", "hours", "return", "mean_100")
EVAL_COLUMNS = ("agent_step", "mean", "hours")


def training_curve(run_dir, window=100):
    """The run's training curve: at each game's end, the mean score of the last `window` games.

    A window of 100 reads the logged mean_100; a shorter one follows the agent's current play
    where games are long (in Pong, a hundred games of a learning agent span 500k steps).

    Returns:
        {"agent_step": [...], "hours": [...], "mean": [...]}, one value per game ended.
    """
    found = read_columns(os.path.join(run_dir, "episodes.csv"), EPISODE_COLUMNS)
    if window == 100:
        means = found["mean_100"]
    else:
        import numpy as np
        total = np.cumsum(np.concatenate([[0.0], found["return"]]))
        ends = np.arange(1, len(found["return"]) + 1)
        starts = np.maximum(ends - window, 0)
        means = list((total[ends] - total[starts]) / (ends - starts))
    return {"agent_step": found["agent_step"], "hours": found["hours"], "mean": means}


def points(curve, x):
    """The (xs, means) of a curve, {column: [values]}, against its column `x`.

    Both are read from the same rows (run_logs), so they have one length; both are empty
    where the log has no such column (older eval.csv files have no hours).
    """
    xs, means = curve[x], curve["mean"]
    return (xs, means) if len(xs) == len(means) else ([], [])


def saved_config(run_dir):
    """The run's config.json, or {} when it is missing or unreadable (a plot still draws)."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


# The columns a score is read from, in each log: a header without them is no run's.
_SCORED_COLUMNS = {"episodes.csv": ("agent_step", "return", "mean_100"),
                   "eval.csv": ("agent_step", "mean")}


def log_damage(run_dir, name):
    """Why the run's log `name` (episodes.csv, eval.csv) holds bytes but no score, or None.

    The reason is one sentence naming the file. A missing log, one with only its header, or one
    with a row that reads is no damage (its bad rows are skipped with a warning).
    """
    path = os.path.join(run_dir, name)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            text = f.read().decode()
    except OSError as error:
        return f"cannot read {path} ({error.strerror or error})"
    except UnicodeDecodeError:
        return f"{path} is damaged (not text)"
    if not text:  # the run writes its header whole before any row
        return f"{path} is damaged (empty)"
    header = next(csv.reader(text.splitlines()[:1]), [])
    missing = [column for column in _SCORED_COLUMNS[name] if column not in header]
    if missing:
        return (f"{path} is damaged (its first line is no header of a run's {name}: it has "
                f"no {missing[0]} column)")
    skipped = []
    if not read_rows(path, _SCORED_COLUMNS[name], warn=skipped.append) and skipped:
        return f"{path} is damaged (no line of it is a row of numbers)"
    return None


def scores(run_dir, evaluations, window=100):
    """The run's scores, [(agent step, score)]: its evaluations', or its training games' means.

    `evaluations` picks eval.csv's means; else each score is the mean of the last `window`
    training games at a game's end.
    """
    found = (read_columns(os.path.join(run_dir, "eval.csv"), EVAL_COLUMNS)
             if evaluations else training_curve(run_dir, window))
    return list(zip(*points(found, "agent_step")))


def scorable(members, window, notes):
    """([the runs of `members` that have a score], whether all are scored by evaluations).

    `members` are the run directories of one setting. Each run left out, and a switch to the
    means of the last `window` training games, is said in a sentence appended to `notes`.
    """
    empty = [run_dir for run_dir in members
             if not scores(run_dir, True) and not scores(run_dir, False, window)]
    for run_dir in empty:
        notes.append(f"'{run_dir}' is left out: it has no finished game and no evaluation "
                     "yet")
    members = [run_dir for run_dir in members if run_dir not in empty]
    evaluated = [run_dir for run_dir in members if scores(run_dir, True)]
    evaluations = bool(members) and len(evaluated) == len(members)
    if evaluated and not evaluations:
        without = ", ".join(f"'{r}'" for r in members if r not in evaluated)
        notes.append(f"scored by the mean of the last {window} training games, not by "
                     f"evaluation: {without} never evaluated, and runs of one setting are "
                     "scored alike")
    return members, evaluations


def evaluations(run_dir):
    """The run's eval.csv, as {"agent_step", "mean", "hours": [float, ...]}."""
    return read_columns(os.path.join(run_dir, "eval.csv"), EVAL_COLUMNS)
