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


def test_each_seed_gets_its_own_run_directory_and_runs_side_by_side_when_asked(monkeypatch):
    import argparse
    import threading
    import time

    from benchmarks import learning
    started, overlap, lock = [], [], threading.Lock()
    running = [0]

    def fake_run(job, extra):
        with lock:
            running[0] += 1
            overlap.append(running[0])
            started.append((job.seed, job.logdir, extra))
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return 0

    monkeypatch.setattr(learning, "run", fake_run)
    args = argparse.Namespace(seeds=[0, 1, 2], seed=9, parallel=1, logdir="runs/x",
                              preset="pong-fastest", loop="fast")
    dirs = learning.run_seeds(args, ["--lr=1e-4"])
    assert dirs == ["runs/x-seed0", "runs/x-seed1", "runs/x-seed2"]
    assert sorted(s for s, _, _ in started) == [0, 1, 2] and max(overlap) == 1
    assert all(extra == ["--lr=1e-4"] for _, _, extra in started)
    started.clear(), overlap.clear()
    args.parallel, args.logdir = 3, None
    dirs = learning.run_seeds(args, [])
    assert [d.split("/")[-1] for d in dirs] == [f"learning-pong-fastest-fast-seed{s}"
                                               for s in (0, 1, 2)]
    assert max(overlap) == 3
