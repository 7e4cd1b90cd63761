"""benchmarks/learning.py's reading of episodes.csv: a threshold counts only once 100 games
have ended, and minutes are the run's own training hours."""

import csv


def load_benchmark():
    from benchmarks import learning
    return learning


def test_thresholds_count_only_after_100_games(tmp_path):
    rows = [(1, 900, 20.0, 20.0)]  # one lucky early game: mean 20 over 1 game
    rows += [(n, 900 * n, -21.0 + n * 0.1, -21.0 + n * 0.1) for n in range(2, 260)]
    with open(tmp_path / "episodes.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["episode", "agent_step", "length", "return", "mean_100", "epsilon",
                         "hours"])
        for number, step, game_return, mean_100 in rows:
            writer.writerow([number, step, 900, game_return, round(mean_100, 3), 0.01,
                             step / 3600 / 10])
    benchmark = load_benchmark()
    table, last = benchmark.summary_rows(str(tmp_path), [0.0, 18.0, 30.0])
    # -21 + 0.1 n >= 0 first at n = 210; >= 18 at n = 390, never here; the lucky game
    # 1 does not count.
    assert table[0] == (0.0, 210 * 900, 210 * 900 / 3600 / 10 * 60)
    assert table[1] == (18.0, None, None) and table[2] == (30.0, None, None)
    assert last[0] == 259
