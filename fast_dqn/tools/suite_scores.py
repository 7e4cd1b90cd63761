"""A suite's score (`fast-dqn plot DIR --aggregate`, DIR made by `fast-dqn suite`): its runs
over games and seeds, as a paper reports a DQN baseline.

- A run whose config.json or log is damaged is left out, named with its file in a note.
- Each run's score: its latest, the last evaluation, or where any run has none, the mean of
  its last 100 training games, human-normalized ((score - random) / (human - random),
  fast_dqn.tools.atari_scores); a game without human scores is left out of the aggregates,
  with a note, and keeps its row in the per-game table.
- The IQM, median, mean and optimality gap of the normalized scores, each with a stratified
  bootstrap 95% interval (fast_dqn.tools.aggregate), as Agarwal et al. (2021) define them.
- The performance profile: for each threshold τ, the fraction of runs scoring above τ,
  averaged over games, with a stratified-bootstrap band.
- Per game, against Dopamine's published DQN (5 runs) at the last 250k-step iteration all
  of the game's runs finished: our mean, Dopamine's mean and range, and how many of our runs
  lie inside it.
"""

import json
import os
import sys

from fast_dqn.errors import ConfigError
from fast_dqn.run.logs.progress import counted
from fast_dqn.suite.plan import SUITE_FILE


def is_suite(path):
    """Whether `path` is a suite's directory: one with a suite.json."""
    return os.path.isfile(os.path.join(path, SUITE_FILE))


def suite_runs(path):
    """The run directories of a suite, DIR/GAME/seed-S, game by game, seeds in order."""
    runs = []
    for game in sorted(os.listdir(path)):
        folder = os.path.join(path, game)
        if not os.path.isdir(folder):
            continue
        seeds = [name for name in os.listdir(folder) if name.startswith("seed-")
                 and name[5:].isdigit() and os.path.isfile(os.path.join(folder, name,
                                                                        "config.json"))]
        runs += [os.path.join(folder, name) for name in sorted(seeds, key=lambda n: int(n[5:]))]
    return runs


def _recorded(path):
    try:
        with open(os.path.join(path, SUITE_FILE)) as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


# How to have a damaged run scored again, or the suite scored without it.
_REPAIR = "put back the file the run wrote, or move the run out of the suite"


def run_damage(run_dir):
    """Why a suite's run cannot be scored (one sentence naming the file), or None.

    Damage is a config.json that is no JSON object or names no game, or a log that holds
    bytes but no row (run_scores.log_damage); a run with nothing logged yet is no damage.
    """
    from fast_dqn.suite.plan import config_damage
    from fast_dqn.tools.run_scores import log_damage, saved_config
    damage = config_damage(run_dir)
    if damage is None and not isinstance(saved_config(run_dir).get("game"), str):
        damage = (f"{os.path.join(run_dir, 'config.json')} does not say its game (damaged or "
                  "edited)")
    return damage or log_damage(run_dir, "episodes.csv") or log_damage(run_dir, "eval.csv")


def undamaged(run_dirs, notes):
    """The runs that can be scored, and [(run_dir, damage)] of the others, each in `notes`."""
    damaged = [(run_dir, run_damage(run_dir)) for run_dir in run_dirs]
    damaged = [(run_dir, damage) for run_dir, damage in damaged if damage]
    for run_dir, damage in damaged:
        notes.append(f"'{run_dir}' is left out: {damage}; {_REPAIR}")
    left_out = {run_dir for run_dir, _ in damaged}
    return [run_dir for run_dir in run_dirs if run_dir not in left_out], damaged


def _unscored(path, damaged):
    """The refusal of a suite none of whose runs has a score: its first damaged run, if any."""
    if not damaged:
        return f"'{path}': no run has a finished game yet; score it once one has"
    run_dir, damage = damaged[0]
    others = len(damaged) - 1
    more = (f", and {counted(others, 'other run')} {'is' if others == 1 else 'are'} damaged "
            "too" if others else "")
    return (f"'{path}': no run can be scored: {damage}{more}; put back the file the run "
            f"wrote, or move '{run_dir}' out of '{path}' to score the suite without it")


def suite_label(path):
    """The suite's name in tables and legends: its directory, loop and preset."""
    recorded = _recorded(path)
    parts = [os.path.basename(os.path.normpath(path)), recorded.get("loop"),
             recorded.get("preset")]
    return " ".join(str(p) for p in parts if p)


def suite_scores(run_dirs, window=100, notes=None):
    """Each run's latest score, by game, and the agent steps the runs were scored at.

    The score is as the module's docstring says, a training mean over the last `window` games.
    A finished suite's runs all end at its budget; runs still going are scored where they are,
    which a sentence appended to `notes` says, naming each run left out.

    Returns:
        ((first, last) agent step scored, {game: [raw score of each run]}); (None, {})
        where no run has a score.
    """
    from fast_dqn.tools.run_scores import saved_config, scorable, scores
    notes = [] if notes is None else notes
    members, evaluations = scorable(run_dirs, window, notes)
    by_game, steps = {}, []
    for run_dir in members:
        game = saved_config(run_dir).get("game")
        if not isinstance(game, str):  # damaged or edited: its score would be no game's
            notes.append(f"'{run_dir}' is left out: its config.json does not say its game "
                         "(damaged or edited); put back the file the run wrote")
            continue
        found = scores(run_dir, evaluations, window)
        if not found:
            notes.append(f"'{run_dir}' is left out: it has evaluations but no finished game")
            continue
        step, score = found[-1]
        steps.append(int(step))
        by_game.setdefault(game, []).append(score)
    if not steps:
        return None, {}
    span = (min(steps), max(steps))
    if span[1] - span[0] > 0.1 * span[1]:
        notes.append(f"the runs were scored at agent steps {span[0]:,} to {span[1]:,}: an "
                     "unfinished suite is scored where its runs are; finish it to compare "
                     "like with like")
    return span, by_game


def normalized(by_game, notes):
    """{game: [human-normalized score of each run]}, of the games that have human scores.

    Each game left out is said in a sentence appended to `notes`.
    """
    from fast_dqn.tools.atari_scores import human_normalized
    kept = {}
    for game, values in by_game.items():
        if human_normalized(game, 0.0) is None:
            notes.append(f"{game} has no human score: left out of the aggregates")
            continue
        kept[game] = [human_normalized(game, value) for value in values]
    return kept


def aggregates(by_game, reps=2000, seed=0):
    """{name: (point, low, high)} of IQM, median, mean and optimality gap, 95% intervals.

    `by_game` is {game: [human-normalized score of each run]}; `reps` and `seed` are as
    fast_dqn.tools.aggregate.stratified_bootstrap's.
    """
    from fast_dqn.tools.aggregate import SUITE_AGGREGATES, stratified_bootstrap
    return {name: stratified_bootstrap(by_game, statistic, reps, seed)
            for name, statistic in SUITE_AGGREGATES.items()}


def performance_profile(by_game, thresholds, reps=2000, seed=0, level=0.95):
    """The performance profile over `thresholds`, with its stratified-bootstrap band.

    `by_game` is {game: [human-normalized score of each run]}; `reps`, `seed` and `level` are
    as stratified_bootstrap's. It returns (profile, low, high), one value per threshold each.
    """
    import numpy as np
    games = [np.asarray(values, np.float64) for values in by_game.values()]
    rng = np.random.default_rng(seed)
    draws = np.stack([profile_of([g[rng.integers(0, len(g), len(g))] for g in games],
                                 thresholds) for _ in range(reps)])
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return profile_of(games, thresholds), low, high


def profile_of(games, thresholds):
    """The fraction of each game's runs above each threshold, averaged over the games."""
    import numpy as np
    taus = np.asarray(thresholds, np.float64)
    return np.mean([(np.asarray(g)[:, None] > taus[None, :]).mean(axis=0) for g in games],
                   axis=0)


def dopamine_rows(run_dirs):
    """Each game's runs against Dopamine's DQN, at the last iteration all of them finished.

    Returns:
        [(game, runs, iteration or None, our mean, Dopamine mean, (low, high), inside)],
        one per game; the iteration is of 250k agent steps, and `inside` says how many of
        our runs lie in Dopamine's range, or why there is no comparison.
    """
    from fast_dqn.tools.reference import compare, reference_games
    from fast_dqn.tools.run_scores import saved_config
    by_game = {}
    for run_dir in run_dirs:
        by_game.setdefault(saved_config(run_dir).get("game"), []).append(run_dir)
    games_with_data = set(reference_games("dopamine"))
    rows = []
    for game, members in by_game.items():
        if game not in games_with_data:
            rows.append((game, len(members), None, None, None, None, "no Dopamine data"))
            continue
        judged = [row for row in compare(members, "dopamine", game)
                  if row.finished and len(row.ours) == len(members)]
        if not judged:
            rows.append((game, len(members), None, None, None, None,
                         "no whole iteration yet"))
            continue
        row = judged[-1]
        ref = row.reference
        rows.append((game, len(members), row.iteration, row.mean, ref.mean,
                     (min(ref.returns), max(ref.returns)),
                     f"{row.inside} of {len(row.ours)}"))
    return rows


def score(paths, output, window=100, out=None):
    """Print each suite's aggregates and per-game table, and draw their performance profiles.

    The profiles of all the suites go into one image, `output`, whose path is returned.

    Raises:
        ConfigError: ("RUN_DIR") a suite has no run with a finished game yet; where it has
            damaged runs, naming the first and its file.
    """
    out = out or sys.stdout
    suites = []
    for path in paths:
        runs = suite_runs(path)
        if not runs:
            raise ConfigError("RUN_DIR", f"'{path}' is a suite with no run yet; score it once "
                              "a run has finished a game")
        notes = []
        runs, damaged = undamaged(runs, notes)
        span, raw = suite_scores(runs, window, notes)
        if span is None:
            raise ConfigError("RUN_DIR", _unscored(path, damaged))
        human = normalized(raw, notes)
        if all(len(values) < 2 for values in human.values()):
            notes.append("one seed a game: the intervals resample no run and say nothing of "
                         "seed noise; run --seeds 3 or more for them")
        preset = _recorded(path).get("preset")
        if preset != "dopamine":
            notes.append(f"the runs are of --preset {preset or 'nature'}: the Dopamine columns "
                         "compare them with another protocol's curves")
        suites.append((suite_label(path), runs, span, raw, human, notes))
    for label, runs, span, raw, human, notes in suites:
        _print_suite(label, runs, span, raw, human, notes, out)
    return _draw_profiles([(label, human) for label, _, _, _, human, _ in suites], output)


def _print_suite(label, runs, span, raw, human, notes, out):
    at = f"{span[0]:,}" if span[0] == span[1] else f"{span[0]:,} to {span[1]:,}"
    print(f"{label}: {counted(sum(map(len, raw.values())), 'run')} of "
          f"{counted(len(raw), 'game')}, each scored at "
          f"its latest score (agent steps {at})", file=out)
    if human:
        print("| aggregate (human-normalized) | value | 95% interval |", file=out)
        print("|---|---|---|", file=out)
        for name, (point, low, high) in aggregates(human).items():
            print(f"| {name} | {point:.3f} | [{low:.3f}, {high:.3f}] |", file=out)
    print("| game | runs | score (mean) | human-normalized | Dopamine iteration | ours | "
          "Dopamine mean | Dopamine range | inside |", file=out)
    print("|---|---|---|---|---|---|---|---|---|", file=out)
    reference = {row[0]: row for row in dopamine_rows(runs)}
    for game, values in raw.items():
        norm = human.get(game)
        _, _, iteration, ours, theirs, span, inside = reference.get(
            game, (game, 0, None, None, None, None, "-"))
        cells = [game, str(len(values)), f"{sum(values) / len(values):.2f}",
                 f"{sum(norm) / len(norm):.3f}" if norm else "-"]
        if iteration is None:
            cells += ["-", "-", "-", "-", inside]
        else:
            cells += [f"{iteration} ({(iteration + 1) * 250:,}k steps)", f"{ours:.2f}",
                      f"{theirs:.2f}", f"{span[0]:.2f} – {span[1]:.2f}", inside]
        print("| " + " | ".join(cells) + " |", file=out)
    for note in notes:
        print(f"note: {note}", file=out)


def _draw_profiles(suites, output):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from fast_dqn.tools.figure_file import save_figure
    drawn = [(label, human) for label, human in suites if human]
    top = max([2.0] + [max(max(v) for v in human.values()) for _, human in drawn])
    taus = np.linspace(0.0, top, 101)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    try:
        for label, human in drawn:
            profile, low, high = performance_profile(human, taus)
            line, = ax.plot(taus, profile, label=f"{label} ({counted(len(human), 'game')})")
            ax.fill_between(taus, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xlabel("human-normalized score τ")
        ax.set_ylabel("fraction of runs with score > τ")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no game with human scores", ha="center", transform=ax.transAxes)
        ax.set_title("performance profile (95% stratified-bootstrap band)")
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, plt, output)
