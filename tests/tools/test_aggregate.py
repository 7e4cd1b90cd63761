"""Results over seeds (fast_dqn.tools.aggregate, plot --aggregate), checked by hand."""

import json
import os

import numpy as np
import pytest

from fast_dqn.tools import aggregate
from fast_dqn.tools.plot import aggregate_rows, groups, main


def test_iqm_is_the_mean_of_the_middle_half():
    assert aggregate.iqm([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5           # (3 + 4 + 5 + 6) / 4
    assert aggregate.iqm(np.arange(10.0)) == pytest.approx(4.5)      # 2..7: 2 cut at each end
    assert aggregate.iqm([[0, 100], [1, 2]]) == 1.5                  # flattened: 1 and 2 kept
    # int(7 / 4) = 1 cut at each end, as scipy.stats.trim_mean(x, 0.25) (rliable) cuts.
    assert aggregate.iqm([0, 0, 0, 1, 10, 10, 100]) == pytest.approx(21 / 5)


def test_the_optimality_gap_counts_only_the_shortfall():
    assert aggregate.optimality_gap([0.5, 1.2, 0.8]) == pytest.approx((0.5 + 0 + 0.2) / 3)
    assert aggregate.optimality_gap([3.0, 2.0]) == 0.0


def test_the_bootstrap_keeps_each_games_runs_apart():
    """A game with one run is never resampled away: every resample holds one 0 and two 1s,
    so the interval is the point. Pooled resampling would spread it."""
    point, low, high = aggregate.stratified_bootstrap({"a": [0.0], "b": [1.0, 1.0]},
                                                      aggregate.mean, reps=500)
    assert point == low == high == pytest.approx(2 / 3)
    point, low, high = aggregate.stratified_bootstrap({"a": [0.0, 1.0]}, aggregate.mean,
                                                      reps=4000)
    # Two runs resampled: means 0, 0.5, 1 with chances 1/4, 1/2, 1/4.
    assert (point, low, high) == (0.5, 0.0, 1.0)


def test_the_band_of_two_curves_spans_what_resampling_them_can_give():
    mean, low, high = aggregate.bootstrap_band([[0.0, 2.0], [2.0, 4.0]], reps=4000)
    np.testing.assert_array_equal(mean, [1.0, 3.0])
    np.testing.assert_array_equal(low, [0.0, 2.0])
    np.testing.assert_array_equal(high, [2.0, 4.0])
    same = aggregate.bootstrap_band([[1.0, 5.0]] * 3)
    np.testing.assert_array_equal(same[1], same[2])


def test_curves_are_compared_on_the_steps_every_run_covers():
    grid = aggregate.common_grid([np.array([10, 50, 90]), np.array([0, 40, 80])], points=3)
    np.testing.assert_array_equal(grid, [10, 45, 80])
    np.testing.assert_array_equal(aggregate.on_grid([0, 10], [0.0, 1.0], [5]), [0.5])


def synthetic_run(path, game, seed, final, loop="fast", later=None, threads=None):
    """Evaluations at 100 and 200 (`final`), and with `later` one more at 300."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"loop": loop, "game": game, "seed": seed,
                                                  "preset": "nature", "logdir": str(path),
                                                  "threads": threads}))
    (path / "episodes.csv").write_text("episode,agent_step,mean_100,hours\n"
                                       "1,100,-5.0,0.1\n2,200,-4.0,0.2\n")
    (path / "eval.csv").write_text(f"agent_step,mean,std,episodes,hours\n100,-9.0,0,2,0.1\n"
                                   f"200,{final!r},0,2,0.2\n"
                                   + (f"300,{later!r},0,2,0.3\n" if later is not None else ""))
    return str(path)


def test_runs_without_evaluations_are_scored_by_the_mean_of_100_at_the_common_step(tmp_path):
    from fast_dqn.tools.plot import scores_at_common_step
    runs = []
    for seed, rows in enumerate(("1,100,-20.0\n2,250,-18.0\n3,400,-10.0\n",
                                 "1,120,-21.0\n2,300,-17.0\n")):
        path = tmp_path / f"s{seed}"
        path.mkdir()
        (path / "episodes.csv").write_text("episode,agent_step,mean_100\n" + rows)
        runs.append(str(path))
    (tmp_path / "s0" / "eval.csv").write_text("agent_step,mean\n400,5.0\n")  # one has evals
    notes = []
    assert scores_at_common_step(runs, notes=notes) == (300, {runs[0]: -18.0, runs[1]: -17.0})
    assert notes == [f"scored by the mean of the last 100 training games, not by evaluation: "
                     f"'{runs[1]}' never evaluated, and runs of one setting are scored alike"]


def test_a_run_with_nothing_to_score_is_left_out_by_name_and_changes_no_statistic(tmp_path,
                                                                                   capsys):
    """Two seeds, one with only its episodes.csv header and no eval.csv: the other keeps
    its evaluation score, and the table's note names the run left out."""
    evaluated = synthetic_run(tmp_path / "s0", "pong", 0, 3.0)
    empty = synthetic_run(tmp_path / "s1", "pong", 1, 0.0)
    os.remove(os.path.join(empty, "eval.csv"))
    (tmp_path / "s1" / "episodes.csv").write_text("episode,agent_step,return,mean_100,hours\n")
    notes = []
    (_, count, _, _, step, stats), = aggregate_rows([evaluated, empty], reps=50, notes=notes)
    assert (count, step) == (1, 200) and stats["mean"][0] == pytest.approx((3.0 + 20.7) / 35.3)
    assert notes == [f"'{empty}' is left out: it has no finished game and no evaluation yet"]
    assert main([evaluated, empty, "--aggregate", "-o", str(tmp_path / "c.png")]) == 0
    assert f"note: '{empty}' is left out" in capsys.readouterr().out


def test_the_aggregates_of_synthetic_runs_are_the_hand_computed_ones(tmp_path, capsys):
    # Human-normalized: pong (random -20.7, human 14.6), breakout (1.7, 30.5).
    finals = {"pong": [-20.7, -20.7 + 0.5 * 35.3, 14.6],            # 0, 0.5, 1
              "breakout": [1.7 + 0.25 * 28.8, 1.7 + 0.75 * 28.8, 1.7 + 2 * 28.8]}  # .25 .75 2
    # Seed 2 of each game ran on, to step 300, on other threads: it is still the same
    # setting, scored at step 200, the last step every run reached.
    runs = [synthetic_run(tmp_path / f"{game}-{seed}", game, seed, final,
                          later=99.0 if seed == 2 else None, threads=2 if seed == 2 else None)
            for game, scores in finals.items() for seed, final in enumerate(scores)]
    # Seed 1's config.json names a setting at its default that the others, written before
    # it existed, lack: the same setting.
    seed1 = tmp_path / "pong-1" / "config.json"
    seed1.write_text(json.dumps({**json.loads(seed1.read_text()),
                                 "eval_max_episode_steps": 0}))
    assert list(groups(runs)) == ["pong fast nature", "breakout fast nature"]
    (label, count, games, normalized, step, stats), = aggregate_rows(runs, reps=200)
    assert (label, count, games, normalized, step) == ("fast nature", 6, 2, True, 200)
    # Sorted: 0, .25, .5, .75, 1, 2; one cut at each end.
    assert stats["IQM"][0] == pytest.approx((0.25 + 0.5 + 0.75 + 1) / 4)
    assert stats["optimality gap"][0] == pytest.approx((1 + 0.5 + 0 + 0.75 + 0.25 + 0) / 6)
    assert stats["mean"][0] == pytest.approx(4.5 / 6)
    for point, low, high in stats.values():
        assert low <= point <= high
    assert main([*runs, "--aggregate", "-o", str(tmp_path / "curves.png")]) == 0
    out = capsys.readouterr().out
    assert "| fast nature | 6 | 2 | 200 | human-normalized | 0.625 [" in out
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_a_shorter_window_follows_the_agents_current_play(tmp_path, capsys):
    """In Pong a hundred games of a learning agent span 500k agent steps: --window gives the
    mean of the last few, computed from each game's return, by hand here."""
    from fast_dqn.tools.plot import scores_at_common_step, training_curve
    path = tmp_path / "run"
    path.mkdir()
    (path / "episodes.csv").write_text("episode,agent_step,return,mean_100,hours\n"
                                       "1,100,-21.0,-21.0,0.1\n2,300,-15.0,-18.0,0.2\n"
                                       "3,700,-9.0,-15.0,0.3\n")
    curve = training_curve(str(path), window=2)
    assert curve["mean"] == [-21.0, -18.0, -12.0] and curve["agent_step"] == [100, 300, 700]
    assert training_curve(str(path))["mean"] == [-21.0, -18.0, -15.0]  # the logged mean_100
    assert scores_at_common_step([str(path)], window=2) == (700, {str(path): -12.0})
    assert main([str(path), "--window", "2", "-o", str(tmp_path / "c.png")]) == 0
    assert main([str(path), "--window", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--window: must be a positive whole number, got 0" in err


def test_runs_that_share_no_step_are_refused_in_one_line_before_anything_is_written(
        tmp_path, capsys):
    """A smoke run that ended at 100k beside a run whose first evaluation is at 250k."""
    short = synthetic_run(tmp_path / "short", "pong", 0, 1.0)
    late = tmp_path / "late"
    synthetic_run(late, "pong", 1, 2.0)
    (late / "eval.csv").write_text("agent_step,mean,std,episodes,hours\n300,5.0,0,2,0.3\n")
    output = tmp_path / "curves.png"
    assert main([short, str(late), "--aggregate", "-o", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"'{late}' has its first score at agent step 300, " \
        f"after the last of '{short}' (200)" in err
    assert not output.exists()


# --- against rliable (Agarwal et al. 2021's library), which these aggregates follow

# A synthetic suite, runs × games, and what rliable 1.2.0 (arch 7.2.0) gave for it on
# 2026-11-27: IQM, median, mean and optimality gap, their stratified-bootstrap 95% intervals
# (2,000 resamples, numpy's global RNG seeded 54 before each call), and the performance
# profile at TAUS with its band. rliable draws each resample's runs with numpy's legacy
# np.random.choice(runs, (runs, games)) and takes np.percentile of the estimates.
RLIABLE_SCORES = [[-0.074, 1.544, 0.009, 0.064, -0.051], [-0.024, 1.089, -0.078, 2.389, 0.782],
                  [0.288, 0.335, 0.088, 0.15, 2.556]]
RLIABLE_POINT = [0.309, 0.8676666666666666, 0.6044666666666666, 0.6340666666666666]
RLIABLE_INTERVAL = [[0.07755555555555554, 0.064, 0.25150833333333333, 0.47802000000000006],
                    [0.8171166666666659, 1.141, 0.9791466666666667, 0.7944083333333333]]
TAUS = [0.0, 0.5, 1.0, 1.5, 2.0]
RLIABLE_PROFILE = [0.7333333333333333, 0.3333333333333333, 0.26666666666666666, 0.2,
                   0.13333333333333333]
RLIABLE_BAND = [[0.5333333333333333, 0.13333333333333333, 0.06666666666666667, 0.0, 0.0],
                [0.9333333333333333, 0.5333333333333333, 0.4666666666666667, 0.4,
                 0.26666666666666666]]


def rliable_resamples(scores, reps, seed):
    """The resamples rliable's StratifiedBootstrap draws after np.random.seed(seed): each
    game's runs drawn with replacement, as [each game's runs] per resample."""
    scores = np.asarray(scores, np.float64)
    runs, games = scores.shape
    draws = np.random.RandomState(seed)  # the global RNG's stream, left untouched
    for _ in range(reps):
        drawn = scores[draws.choice(runs, (runs, games), replace=True), np.arange(games)]
        yield [drawn[:, game] for game in range(games)]


def ours_on_rliables_resamples(scores, reps=2000, seed=54):
    """(point, interval, profile, band) from our statistics, on rliable's resamples."""
    from fast_dqn.tools.suite_scores import profile_of
    statistics = list(aggregate.SUITE_AGGREGATES.values())
    games = [np.asarray(column, np.float64) for column in np.asarray(scores).T]
    point = [aggregate.of_games(statistic, games) for statistic in statistics]
    estimates = np.array([[aggregate.of_games(statistic, drawn) for statistic in statistics]
                          for drawn in rliable_resamples(scores, reps, seed)])
    profiles = np.array([profile_of(drawn, TAUS)
                         for drawn in rliable_resamples(scores, reps, seed)])
    return (point, np.percentile(estimates, [2.5, 97.5], axis=0), profile_of(games, TAUS),
            np.percentile(profiles, [2.5, 97.5], axis=0))


def test_our_aggregates_give_rliables_numbers_on_its_resamples():
    """Recorded from rliable, so that the check runs without it: our IQM, median, mean and
    optimality gap (in SUITE_AGGREGATES' order), their intervals and the performance profile
    are rliable's to the last bit or so, given the same resamples; and our own resamples
    (another RNG) give intervals that differ by what 2,000 resamples allow."""
    from fast_dqn.tools.suite_scores import aggregates, performance_profile
    assert list(aggregate.SUITE_AGGREGATES) == ["IQM", "median", "mean", "optimality gap"]
    point, interval, profile, band = ours_on_rliables_resamples(RLIABLE_SCORES)
    np.testing.assert_allclose(point, RLIABLE_POINT, rtol=1e-12)
    np.testing.assert_allclose(interval, RLIABLE_INTERVAL, rtol=1e-12)
    np.testing.assert_allclose(profile, RLIABLE_PROFILE, rtol=1e-12)
    np.testing.assert_allclose(band, RLIABLE_BAND, rtol=1e-12)
    by_game = {f"game{n}": column for n, column in enumerate(np.asarray(RLIABLE_SCORES).T)}
    ours = aggregates(by_game, reps=2000)
    for n, name in enumerate(aggregate.SUITE_AGGREGATES):
        low, high = RLIABLE_INTERVAL[0][n], RLIABLE_INTERVAL[1][n]
        assert ours[name][0] == pytest.approx(RLIABLE_POINT[n], rel=1e-12)
        assert ours[name][1:] == pytest.approx((low, high), abs=0.1 * (high - low)), name
    profile, low, high = performance_profile(by_game, TAUS, reps=2000)
    np.testing.assert_allclose(profile, RLIABLE_PROFILE, rtol=1e-12)
    # Three runs a game: a band's ends move in steps of 1/15, one step at most.
    np.testing.assert_allclose([low, high], RLIABLE_BAND, atol=1 / 15 + 1e-9)


@pytest.mark.slow  # about 12 s of rliable's own bootstraps
def test_rliable_itself_agrees_on_synthetic_suites():
    """The same against rliable live, on suites of other shapes (one run a game, ties,
    scores past human level). Where rliable is absent this is skipped; install it with
    `pip install rliable==1.2.0 "arch>=5.3.1,<8" "pandas<3"` (pyproject's rliable-check
    extra): rliable 1.2.0 needs arch below 8, whose 7.2.0 does not import with pandas 3."""
    pytest.importorskip("rliable", reason="rliable is not installed: pip install -e "
                        "'.[rliable-check]'")
    from rliable import library, metrics

    def rliable_aggregates(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_median(x),
                         metrics.aggregate_mean(x), metrics.aggregate_optimality_gap(x)])

    rng = np.random.default_rng(0)
    suites = [RLIABLE_SCORES, rng.gamma(1.0, 1.0, (5, 10)), rng.normal(0.5, 1, (1, 7)),
              np.round(rng.uniform(-0.5, 2.5, (4, 3)), 1), rng.gamma(2.0, 0.5, (10, 2))]
    state = np.random.get_state()
    try:
        for scores in suites:
            scores = np.asarray(scores, np.float64)
            np.random.seed(54)
            points, intervals = library.get_interval_estimates({"x": scores},
                                                               rliable_aggregates, reps=2000)
            np.random.seed(54)
            profiles, bands = library.create_performance_profile({"x": scores}, TAUS,
                                                                 reps=2000)
            if scores.tolist() == RLIABLE_SCORES:  # the numbers recorded above are its own
                np.testing.assert_allclose(points["x"], RLIABLE_POINT, rtol=1e-12)
                np.testing.assert_allclose(intervals["x"], RLIABLE_INTERVAL, rtol=1e-12)
                np.testing.assert_allclose(bands["x"], RLIABLE_BAND, rtol=1e-12)
            point, interval, profile, band = ours_on_rliables_resamples(scores)
            np.testing.assert_allclose(point, points["x"], rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(interval, intervals["x"], rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(profile, profiles["x"], rtol=1e-12)
            np.testing.assert_allclose(band, bands["x"], rtol=1e-12)
    finally:
        np.random.set_state(state)
