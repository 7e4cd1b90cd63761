"""Learning curves: python -m fast_dqn.tools.plot RUN_DIR [RUN_DIR ...] -o curves.png

Four panels, one line per run: the training return (mean of the last 100 games) and the
evaluation mean, each against agent steps and against wall-clock hours. Runs are labelled by
their directory name and loop, so a fast run and a Nature run of the same game compare at a
glance: same curve against steps (same protocol), different against hours (the speed-up).
"""

import csv
import json
import os
import sys

from fast_dqn.errors import ConfigError
from fast_dqn.run.flags import OneLineParser, fail


def read_columns(path, names):
    """{name: [float, ...]} of the named CSV columns; missing columns and files give []."""
    columns = {name: [] for name in names}
    if not os.path.isfile(path):
        return columns
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            for name in names:
                value = row.get(name)
                if value not in (None, ""):
                    columns[name].append(float(value))
    return columns


def saved_config(run_dir):
    """The run's config.json, or {} when it is missing or unreadable (a plot still draws)."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def run_label(run_dir):
    label = os.path.basename(os.path.normpath(run_dir))
    loop = saved_config(run_dir).get("loop")
    return f"{label} ({loop})" if loop and loop not in label else label


def default_title(run_dirs):
    """The games the runs played, so that a plot without --title still says what it shows."""
    games = []
    for run_dir in run_dirs:
        saved = saved_config(run_dir)
        game = saved.get("game") or saved.get("env")
        if game and game not in games:
            games.append(game)
    return ", ".join(games) if games else None


def make_figure(run_dirs, title=None):
    """The four panels of the runs, as a matplotlib figure (the caller closes it)."""
    import matplotlib
    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    for run_dir in run_dirs:
        if not os.path.isfile(os.path.join(run_dir, "episodes.csv")):
            raise ConfigError("RUN_DIR", f"'{run_dir}' has no episodes.csv; give run "
                              "directories made by run_dqn.py or run_fast_dqn.py")
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharey="row")
    for run_dir in run_dirs:
        label = run_label(run_dir)
        train = read_columns(os.path.join(run_dir, "episodes.csv"),
                             ("agent_step", "mean_100", "hours"))
        evals = read_columns(os.path.join(run_dir, "eval.csv"), ("agent_step", "mean", "hours"))
        line, = axes[0, 0].plot(train["agent_step"], train["mean_100"], label=label)
        axes[0, 1].plot(train["hours"], train["mean_100"], color=line.get_color())
        axes[1, 0].plot(evals["agent_step"], evals["mean"], "o-", color=line.get_color(),
                        markersize=3)
        if len(evals["hours"]) == len(evals["mean"]):  # older eval.csv files have no hours
            axes[1, 1].plot(evals["hours"], evals["mean"], "o-", color=line.get_color(),
                            markersize=3)
    axes[0, 0].set_ylabel("training return (mean of last 100 games)")
    axes[1, 0].set_ylabel("evaluation mean return")
    for row in axes:
        row[0].set_xlabel("agent steps")
        row[1].set_xlabel("wall-clock hours")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize="small")
    title = title or default_title(run_dirs)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig, plt


def plot_runs(run_dirs, output, title=None):
    fig, plt = make_figure(run_dirs, title)
    try:
        fig.savefig(output, dpi=120)
    except OSError as error:
        raise ConfigError("-o", f"cannot write '{output}' ({error.strerror}); give a writable "
                          "path")
    finally:
        plt.close(fig)
    return output


def main(argv=None):
    parser = OneLineParser(prog="python -m fast_dqn.tools.plot",
                           description="Plot the learning curves of one or more runs.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    parser.add_argument("-o", "--output", default="curves.png",
                        help="image file to write; its extension picks the format "
                        "(default: curves.png)")
    parser.add_argument("--title", help="a title above the panels (default: the runs' games)")
    args = parser.parse_args(argv)
    try:
        path = plot_runs(args.run_dirs, args.output, args.title)
    except ConfigError as error:
        return fail(parser.prog, error)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
