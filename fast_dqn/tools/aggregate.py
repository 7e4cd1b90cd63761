"""Results over seeds: the statistics a paper reports, with their uncertainty.

One seed is an anecdote. Over several runs per game this gives:
- for curves, the mean over a group's runs with a percentile-bootstrap 95% band (runs
  resampled with replacement);
- for the final scores, human-normalized, the interquartile mean (IQM: the mean of the middle
  half of all runs' scores), the optimality gap (how far the runs fall short of human level,
  on average, scores above 1 counted as 1) and the mean, each with a 95% interval from the
  stratified bootstrap: the runs of each game resampled with replacement, games kept. These
  are the aggregates of Agarwal et al. (2021), *Deep RL at the Edge of the Statistical
  Precipice*, which the rliable library implements and CleanRL's and Dopamine's reports use;
  written here in a few lines of numpy, checked by hand in tests/tools/test_aggregate.py and
  against rliable's own numbers there (docs/suite.md says why rliable is not used).
"""

import numpy as np


def iqm(scores):
    """The interquartile mean of `scores`, of any shape: the mean of their middle 50%.

    The lowest and highest int(n / 4) are cut, as rliable's scipy.stats.trim_mean(x, 0.25) does.
    """
    values = np.sort(np.asarray(scores, np.float64).ravel())
    cut = int(0.25 * len(values))
    return float(np.mean(values[cut:len(values) - cut]))


def optimality_gap(scores, target=1.0):
    """The mean shortfall of `scores`, of any shape, below `target` (1: human level)."""
    values = np.asarray(scores, np.float64).ravel()
    return float(np.mean(target - np.minimum(values, target)))


def mean(scores):
    """The mean of all the scores, a float."""
    return float(np.mean(np.asarray(scores, np.float64)))


AGGREGATES = {"IQM": iqm, "optimality gap": optimality_gap, "mean": mean}


def per_game(statistic):
    """Mark a statistic that takes the list of each game's scores, not all of them at once."""
    statistic.per_game = True
    return statistic


@per_game
def median_of_game_means(games):
    """The median over games of each game's mean over its runs (rliable's aggregate_median)."""
    return float(np.median([np.mean(g) for g in games]))


@per_game
def mean_of_game_means(games):
    """The mean over games of each game's mean over its runs (rliable's aggregate_mean)."""
    return float(np.mean([np.mean(g) for g in games]))


# A suite's aggregates (fast_dqn.tools.suite_scores), over games with any number of seeds.
SUITE_AGGREGATES = {"IQM": iqm, "median": median_of_game_means, "mean": mean_of_game_means,
                    "optimality gap": optimality_gap}


def of_games(statistic, games):
    """`statistic` of the games' runs: of each game's runs apart (per_game), or of all."""
    if getattr(statistic, "per_game", False):
        return statistic(games)
    return statistic(np.concatenate(games))


def stratified_bootstrap(scores_by_game, statistic, reps=2000, seed=0, level=0.95):
    """A statistic of all scores, with its stratified-bootstrap percentile interval.

    Args:
        scores_by_game: {game: [score of each run]}; games may have different numbers of runs.
        statistic: one of AGGREGATES or SUITE_AGGREGATES.
        reps: how many resamples to draw (each game's runs apart, with replacement).
        seed: the seed of the resamples' numpy Generator.
        level: the interval's coverage, 0.95 for a 95% interval.

    Returns:
        (point, low, high): the statistic of the scores, and its interval's ends.
    """
    rng = np.random.default_rng(seed)
    games = [np.asarray(runs, np.float64) for runs in scores_by_game.values()]
    point = of_games(statistic, games)
    estimates = np.empty(reps)
    for r in range(reps):
        estimates[r] = of_games(statistic, [runs[rng.integers(0, len(runs), len(runs))]
                                            for runs in games])
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return point, float(low), float(high)


def bootstrap_band(curves, reps=2000, seed=0, level=0.95):
    """The mean curve over runs, with its percentile-bootstrap band.

    Args:
        curves: (runs, points), every run on the same x grid.
        reps: the resamples, each of the runs with replacement.
        seed: the seed of the resamples' numpy Generator.
        level: the band's coverage, 0.95 for a 95% band.

    Returns:
        (mean, low, high), arrays of `points` values each.
    """
    curves = np.asarray(curves, np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(curves), (reps, len(curves)))
    means = curves[picks].mean(axis=1)  # (reps, points)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    return curves.mean(axis=0), low, high


def on_grid(xs, ys, grid):
    """A run's curve (`xs` increasing) at the `grid` x values, linear between its points.

    Runs log at different steps (each game ends when it ends), so curves share one grid.
    """
    return np.interp(grid, xs, ys)


def common_grid(runs_xs, points=100):
    """`points` x values from the latest first x of `runs_xs` to the earliest last one.

    So no curve is extrapolated; where the runs share a single x, it alone.
    """
    start = max(xs[0] for xs in runs_xs)
    end = min(xs[-1] for xs in runs_xs)
    return np.linspace(start, end, points) if end > start else np.array([start])
