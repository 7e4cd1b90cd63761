"""Learning curves: python -m fast_dqn.tools.plot RUN_DIR [RUN_DIR ...] -o curves.png

Four panels, one line per run: the training return (mean of the last 100 games) and the
evaluation mean, each against agent steps and against wall-clock hours. Runs are labelled by
their directory name and loop, so a fast run and a Nature run of the same game compare at a
glance: same curve against steps (same protocol), different against hours (the speed-up).

With --aggregate, runs that differ only in their seed are one line: the mean over the seeds
with a 95% bootstrap band, and a table gives each setting's IQM, optimality gap and mean over
its games and seeds, with stratified-bootstrap intervals (aggregate_rows).

With --reference dopamine, the runs are drawn beside a published curve instead: each
setting's mean training return per 250k-step iteration over the published runs' range, one
panel per game, and a table says per iteration whether ours lies inside it
(fast_dqn.tools.reference).
"""

import json
import os
import sys

from fast_dqn.errors import ConfigError
from fast_dqn.run.logs.progress import counted
from fast_dqn.run.settings.flags import OneLineParser, add_version_flag, fail
from fast_dqn.run.settings.hyperparameters import RESUME_OVERRIDES
from fast_dqn.tools.figure_file import check_output, missing_glyphs_said, save_figure
from fast_dqn.tools.run_logs import read_rows, warnings_once
from fast_dqn.tools.run_scores import (
    evaluations,
    points,
    saved_config,
    scorable,
    scores,
    training_curve,
)


def run_label(run_dir):
    """A run's name in legends: its directory's name, and its loop where that lacks it."""
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


# Settings that tell runs of one experiment apart without changing what it learns: the seed,
# the directory, the code's version and commit (seeds run on other days), and what a resume
# may change (the budget, threads, Ray's and the like). Runs stopped at other budgets still
# compare, at the step they all reached.
_NOT_THE_SETTING = ("seed", "logdir", "code") + RESUME_OVERRIDES


def groups(run_dirs, also_ignore=()):
    """The runs grouped by setting: those whose config.json differ only in their seed.

    `also_ignore` names more config.json keys in which a group's runs may differ. It returns
    {label: [run_dir]}, the groups in the order their first run was given.
    """
    from fast_dqn.run.resume import saved_values
    from fast_dqn.run.settings.hyperparameters import FastConfig
    found = {}
    for run_dir in run_dirs:
        saved = saved_config(run_dir)
        # The settings as the run used them: one added since it was written has its default,
        # and an --env run's Atari settings are the defaults whether recorded or null.
        key = json.dumps({k: v for k, v in {**saved, **saved_values(saved, FastConfig)}.items()
                          if k not in _NOT_THE_SETTING + tuple(also_ignore)}, sort_keys=True,
                         default=str)
        found.setdefault(key, []).append(run_dir)
    labelled = {}
    for members in found.values():
        saved = saved_config(members[0])
        name = saved.get("game") or saved.get("env") or run_label(members[0])
        parts = [name if "game" not in also_ignore else None, saved.get("loop"),
                 saved.get("preset")]
        label = " ".join(p for p in parts if p) or run_label(members[0])
        while label in labelled:
            label += "'"
        labelled[label] = members
    return labelled


def scores_at_common_step(members, window=100, notes=None):
    """(step, {run_dir: score}): each run's score at the last step every run reached.

    Runs of one setting (`members`) stop at different steps, and a score at each run's own end
    would compare a seed's 400k steps with another's 200k. The score is the last evaluation at
    or before that step, or where any run has none, the last mean of `window` games. A run with
    neither is left out; with no run left, it returns (None, {}). Each choice that is not the
    plain one (a run left out, the training mean used for runs that evaluated) is said in a
    sentence appended to `notes`.

    Raises:
        ConfigError: ("RUN_DIR") a run's first score comes after another run's last.
    """
    notes = [] if notes is None else notes
    members, evaluations = scorable(members, window, notes)
    runs = {run_dir: scores(run_dir, evaluations, window) for run_dir in members}
    for run_dir in [run_dir for run_dir, found in runs.items() if not found]:
        notes.append(f"'{run_dir}' is left out: it has evaluations but no finished game")
        del runs[run_dir]
    if not runs:
        return None, {}
    last = min(runs, key=lambda run_dir: runs[run_dir][-1][0])
    step = runs[last][-1][0]
    for run_dir, found in runs.items():
        if found[0][0] > step:
            raise ConfigError("RUN_DIR", f"'{run_dir}' has its first score at agent step "
                              f"{int(found[0][0]):,}, after the last of '{last}' "
                              f"({int(step):,}): runs of one setting are compared at a step "
                              "all of them reached; leave out the shorter run, or plot "
                              "without --aggregate")
    return int(step), {run_dir: [score for at, score in found if at <= step][-1]
                       for run_dir, found in runs.items()}


def aggregate_rows(run_dirs, reps=2000, seed=0, window=100, notes=None):
    """The aggregates of each setting's runs, over all its games and seeds.

    Scores are scores_at_common_step's, human-normalized when every game of the setting has
    reference scores, raw otherwise; notes are appended to `notes`.

    Returns:
        [(setting, runs, games, normalized, agent step, {aggregate: (point, low, high)})].
    """
    from fast_dqn.tools.aggregate import AGGREGATES, stratified_bootstrap
    from fast_dqn.tools.atari_scores import human_normalized
    rows = []
    for label, members in groups(run_dirs, also_ignore=("game", "env")).items():
        step, by_run = scores_at_common_step(members, window, notes)
        by_game = {}
        for run_dir, score in by_run.items():
            saved = saved_config(run_dir)
            by_game.setdefault(saved.get("game") or saved.get("env"), []).append(score)
        if not by_game:
            continue
        normalized = all(human_normalized(game, 0.0) is not None for game in by_game)
        if normalized:
            by_game = {game: [human_normalized(game, s) for s in scores]
                       for game, scores in by_game.items()}
        stats = {name: stratified_bootstrap(by_game, statistic, reps, seed)
                 for name, statistic in AGGREGATES.items()}
        rows.append((label, sum(map(len, by_game.values())), len(by_game), normalized, step,
                     stats))
    return rows


def print_aggregates(rows, out=None):
    """Print aggregate_rows' rows as a Markdown table, to `out` or stdout."""
    out = out or sys.stdout
    print("| setting | runs | games | at agent step | scores | IQM [95% CI] | "
          "optimality gap [95% CI] | mean [95% CI] |", file=out)
    print("|---|---|---|---|---|---|---|---|", file=out)
    for label, runs, games, normalized, step, stats in rows:
        # The optimality gap is the shortfall from human level: raw scores have none.
        cells = " | ".join("n/a (raw scores)" if name == "optimality gap" and not normalized
                           else f"{point:.3f} [{low:.3f}, {high:.3f}]"
                           for name, (point, low, high) in stats.items())
        kind = "human-normalized" if normalized else "raw"
        print(f"| {label} | {runs} | {games} | {step:,} | {kind} | {cells} |", file=out)


def _draw_group(axes, label, members, window=100):
    """One setting's runs as their mean and 95% bootstrap band, against steps and hours."""
    from fast_dqn.tools.aggregate import bootstrap_band, common_grid, on_grid
    panels = []
    y = "mean"
    readers = (lambda run_dir: training_curve(run_dir, window), evaluations)
    for row, read in enumerate(readers[:len(axes)]):
        runs = [read(run_dir) for run_dir in members]
        runs = [run for run in runs if run[y]]
        for column, x in enumerate(("agent_step", "hours")):
            usable = [run for run in runs if len(run[x]) == len(run[y])]
            if not usable:
                continue
            grid = common_grid([run[x] for run in usable])
            mean, low, high = bootstrap_band([on_grid(run[x], run[y], grid) for run in usable])
            panels.append((axes[row, column], grid, mean, low, high))
    color = None
    for ax, grid, mean, low, high in panels:
        line, = ax.plot(grid, mean, color=color,
                        label=f"{label} ({counted(len(members), 'run')})" if color is None else None)
        color = line.get_color()
        ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)


def _draw_run(axes, run_dir, window=100):
    """One run's curves, against steps and hours; its evaluations where axes has their row."""
    train = training_curve(run_dir, window)
    # A single game is one point: marked, or a line of one point would draw nothing.
    style = "o-" if len(train["mean"]) == 1 else "-"
    line, = axes[0, 0].plot(*points(train, "agent_step"), style, label=run_label(run_dir))
    axes[0, 1].plot(*points(train, "hours"), style, color=line.get_color())
    if len(axes) < 2:
        return
    evals = evaluations(run_dir)
    for column, x in enumerate(("agent_step", "hours")):
        axes[1, column].plot(*points(evals, x), "o-", color=line.get_color(), markersize=3)


def _drawable(run_dirs):
    """The runs with a finished game or an evaluation; each other one is named in a note. None
    at all is refused in one line: empty panels would read as a plot that failed."""
    def has_rows(run_dir, name, column):  # quietly: the drawing reads and names bad rows
        return read_rows(os.path.join(run_dir, name), (column,), warn=lambda message: None)
    drawable = [run_dir for run_dir in run_dirs if has_rows(run_dir, "episodes.csv", "agent_step")
                or has_rows(run_dir, "eval.csv", "mean")]
    if not drawable:
        raise ConfigError("RUN_DIR", f"{', '.join(repr(r) for r in run_dirs)} "
                          f"{'has' if len(run_dirs) == 1 else 'have'} no finished game and no "
                          "evaluation yet: nothing to draw; plot once a game has ended")
    for run_dir in run_dirs:
        if run_dir not in drawable:
            note(f"'{run_dir}' is left out: it has no finished game and no evaluation yet")
    return drawable


def make_figure(run_dirs, title=None, aggregate=False, window=100):
    """Draw the runs' panels as a matplotlib figure, which the caller closes.

    Runs that never evaluated (`--evaluate 0`) get only the training row: two empty panels
    would read as a plot that failed. `aggregate` and `window` are the tool's --aggregate and
    --window. It returns (figure, matplotlib.pyplot).

    Raises:
        ConfigError: ("RUN_DIR") a run has no episodes.csv, or none has anything to draw.
    """
    import matplotlib
    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt

    for run_dir in run_dirs:
        if not os.path.isfile(os.path.join(run_dir, "episodes.csv")):
            raise ConfigError("RUN_DIR", f"'{run_dir}' has no episodes.csv; give run "
                              "directories made by run_dqn.py or run_fast_dqn.py")
    run_dirs = _drawable(run_dirs)
    evaluated = any(evaluations(run_dir)["mean"] for run_dir in run_dirs)
    fig, axes = plt.subplots(2 if evaluated else 1, 2, figsize=(12, 8 if evaluated else 4.5),
                             sharey="row", squeeze=False)
    for label, members in (groups(run_dirs).items() if aggregate else ()):
        _draw_group(axes, label, members, window)
    for run_dir in (() if aggregate else run_dirs):
        _draw_run(axes, run_dir, window)
    axes[0, 0].set_ylabel(f"training return (mean of last {window} games)")
    if evaluated:
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


def plot_runs(run_dirs, output, title=None, aggregate=False, window=100):
    """Draw the runs' panels (make_figure) into the image `output`, and return its path."""
    fig, plt = make_figure(run_dirs, title, aggregate, window)
    return save_figure(fig, plt, output)


def reference_figure(run_dirs, name, title=None):
    """Draw each setting's runs per iteration beside a published curve's band, a panel a game.

    What cannot be compared (a game the reference lacks, a run without a finished game) is
    left out with a note on stderr. It returns (figure, matplotlib.pyplot, [(label, runs,
    rows)]), the rows being a setting's comparison per iteration (reference.compare).

    Raises:
        ConfigError: the reference is unknown, a run is no Atari run's directory, or none
            can be compared.
    """
    from fast_dqn.tools.reference import (
        check_reference,
        compare,
        iteration_length,
        load_reference,
        reference_games,
        run_iterations,
    )
    check_reference(name)
    for run_dir in run_dirs:
        if not os.path.isfile(os.path.join(run_dir, "config.json")):
            what = "does not exist" if not os.path.exists(run_dir) else "has no config.json"
            raise ConfigError("RUN_DIR", f"'{run_dir}' {what}; give run directories made by "
                              "run_dqn.py or run_fast_dqn.py")
    by_game = {}
    for label, members in groups(run_dirs).items():
        saved = saved_config(members[0])
        game = saved.get("game")
        if saved.get("env") or not game:
            raise ConfigError("RUN_DIR", f"'{members[0]}' is not of an Atari game; "
                              "--reference compares Atari runs")
        if game not in reference_games(name):
            note(f"'{members[0]}' is left out: '{name}' has no data for {game} (it has "
                 f"{len(reference_games(name))} games; fast_dqn/reference_data/{name})")
            continue
        if saved.get("preset") != name:
            note(f"'{members[0]}' ran --preset {saved.get('preset')}, not {name}: its curve "
                 "and the reference's come from different protocols")
        length = iteration_length(load_reference(name, game))
        with_games = [run_dir for run_dir in members if run_iterations(run_dir, length)]
        for run_dir in members:
            if run_dir not in with_games:
                note(f"'{run_dir}' is left out: it has no finished game yet")
        if with_games:
            by_game.setdefault(game, []).append((label, with_games))
    if not by_game:
        raise ConfigError("RUN_DIR", "none of the runs can be compared (see the notes above)")
    return _draw_references(by_game, name, title, compare)


def note(message):
    """Print a note to stderr."""
    print(f"note: {message}", file=sys.stderr)


def _draw_references(by_game, name, title, compare):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fast_dqn.tools.reference import draw_comparison, runs_label
    tables = []
    fig, axes = plt.subplots(1, len(by_game), figsize=(6.5 * len(by_game), 4.5),
                             squeeze=False)
    try:
        for ax, (game, settings) in zip(axes[0], by_game.items()):
            compared = [(label, members, compare(members, name, game))
                        for label, members in settings]
            # The published band once, over the iterations of the longest of ours.
            longest = max(range(len(compared)), key=lambda i: len(compared[i][2]))
            for i, (label, members, rows) in enumerate(compared):
                draw_comparison(ax, rows, runs_label(label, rows), band=i == longest)
                tables.append((label, len(members), rows))
            ax.set_title(game)
            ax.set_xlabel("agent steps")
            ax.set_ylabel("mean training return per iteration")
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
        if title:
            fig.suptitle(title)
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig, plt, tables


PROG = "python -m fast_dqn.tools.plot"


def main(argv=None, prog=PROG):
    """The plot tool: parse its command line, draw and print; return the exit status."""
    parser = OneLineParser(prog=prog,
                           description="Plot the learning curves of one or more runs.")
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="a run's directory (runs/NAME), one or more; or a suite's "
                        "directory, scored with --aggregate")
    parser.add_argument("-o", "--output", default="curves.png",
                        help="image file to write; its extension picks the format "
                        "(default: curves.png)")
    parser.add_argument("--title", help="a title above the panels (default: the runs' games)")
    parser.add_argument("--aggregate", action="store_true",
                        help="runs that differ only in their seed as one mean line with a 95%% "
                        "bootstrap band, and a table of IQM, optimality gap and mean with "
                        "stratified-bootstrap intervals")
    parser.add_argument("--window", type=int, default=100, metavar="GAMES",
                        help="the training return is the mean of the last GAMES games "
                        "(default: 100, the logged mean_100); fewer follow the agent's "
                        "current play where games are long")
    parser.add_argument("--reference", metavar="NAME",
                        help="draw each setting's mean training return per iteration (250k "
                        "agent steps) over a published curve's band and print, per "
                        "iteration, whether it lies inside; NAME: dopamine (Dopamine's DQN, "
                        "5 runs, 60 games; a suite's DIR is scored by --aggregate instead)")
    add_version_flag(parser)
    args = parser.parse_args(argv)
    try:
        check_output(args.output)
    except ConfigError as error:
        return fail(parser.prog, error)
    # Replaced, not refused: a run's figure is drawn again to the same path as it goes on;
    # said, so that no image is replaced silently.
    args.replaces = os.path.lexists(args.output)
    # A log is read for each panel and the table: one warning each; a glyph the font lacks
    # is said once, in one line.
    with warnings_once(), missing_glyphs_said(parser.prog):
        return _main_plot(parser, args)


def _main_plot(parser, args):
    if args.reference is not None and (args.aggregate or args.window != 100):
        return fail(parser.prog, ConfigError("--reference", "draws its own figure, of whole "
                                             "iterations; give it without --aggregate and "
                                             "--window"))
    if args.reference is not None:
        return _main_reference(parser.prog, args)
    if args.window < 1:
        return fail(parser.prog, ConfigError("--window", f"must be a positive whole number, "
                                             f"got {args.window}"))
    from fast_dqn.tools.suite_scores import is_suite, score
    suites = [path for path in args.run_dirs if is_suite(path)]
    if suites:
        if not args.aggregate or len(suites) < len(args.run_dirs):
            return fail(parser.prog, ConfigError("RUN_DIR", "a suite's directory is scored "
                                                 "with --aggregate, and only beside other "
                                                 "suites; give its runs (DIR/GAME/seed-S) "
                                                 "to draw their curves"))
        try:
            path = score(suites, args.output, args.window)
        except ConfigError as error:
            return fail(parser.prog, error)
        print(f"{_wrote(path, args)} (the performance profile)")
        return 0
    try:
        # The table first: runs it cannot compare are refused before anything is written.
        notes = []
        rows = (aggregate_rows(args.run_dirs, window=args.window, notes=notes)
                if args.aggregate else None)
        path = plot_runs(args.run_dirs, args.output, args.title, args.aggregate, args.window)
    except ConfigError as error:
        return fail(parser.prog, error)
    print(_wrote(path, args))
    if rows is not None:
        print_aggregates(rows)
        for note in notes:
            print(f"note: {note}")
    return 0


def _wrote(path, args):
    return f"wrote {path}" + (", replacing the image that was there" if args.replaces else "")


def _main_reference(prog, args):
    from fast_dqn.tools.reference import print_comparison
    try:
        fig, plt, tables = reference_figure(args.run_dirs, args.reference, args.title)
        path = save_figure(fig, plt, args.output)
    except ConfigError as error:
        return fail(prog, error)
    print(_wrote(path, args))
    for label, runs, rows in tables:
        print_comparison(rows, label, runs)
    return 0


if __name__ == "__main__":
    from fast_dqn.tools.tool_exits import run_tool
    sys.exit(run_tool(PROG, main, then_ignore=True))
