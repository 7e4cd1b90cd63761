"""The run's logs (fast_dqn.run.logs.monitor): episodes.csv and eval.csv with their running
means, and a console line at least every interval, on a fake clock."""

import csv

import pytest
from helpers import FakeClock

from fast_dqn.run.logs.monitor import EPISODE_COLUMNS, EVAL_COLUMNS, Monitor
from fast_dqn.run.logs.progress import ProgressLines


def read(path):
    with open(path) as f:
        return list(csv.reader(f))


def test_monitor_writes_both_csvs_and_mean_of_last_100(tmp_path):
    import io
    clock, out = FakeClock(), io.StringIO()
    monitor = Monitor(str(tmp_path), total_steps=1000, clock=clock,
                      console=ProgressLines(1000, out=out))
    for i in range(150):
        clock.t = i * 36.0  # 0.01 h per game
        monitor.record_game(step=i * 10, length=10, game_return=float(i), epsilon=0.5)
    monitor.record_eval(1000, [1.0, 3.0])
    monitor.close()
    episodes = read(tmp_path / "episodes.csv")
    assert tuple(episodes[0]) == EPISODE_COLUMNS and len(episodes) == 151
    last = episodes[-1]
    assert last[0] == "150" and float(last[3]) == 149.0
    assert float(last[4]) == pytest.approx(sum(range(50, 150)) / 100)
    assert float(last[6]) == pytest.approx(149 * 0.01)
    evals = read(tmp_path / "eval.csv")
    assert tuple(evals[0]) == EVAL_COLUMNS and evals[1][:4] == ["1000", "2.0", "1.0", "2"]


def test_console_line_at_least_every_interval(tmp_path):
    import io
    clock, out = FakeClock(), io.StringIO()
    monitor = Monitor(str(tmp_path), total_steps=10_000, clock=clock,
                      console=ProgressLines(10_000, out=out, interval=10))
    for step in range(1, 2001):
        clock.t = step * 0.01  # 100 steps/s for 20 s
        monitor.tick(step, epsilon=0.25)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert "100 steps/s" in lines[0] and "eps 0.250" in lines[0] and "1,000/10,000" in lines[0]
    monitor.close()


class Compiles:
    """Stands in for the process's CompileClock: the test sets its seconds."""

    def __init__(self):
        self.spent = 0.0

    def seconds(self):
        return self.spent

    def line(self):
        return f"compiling took {self.spent:.1f} s (2 programs); steps/s leaves it out"


def test_steps_per_second_leaves_out_compiling_and_the_line_comes_once(tmp_path):
    import io
    clock, out, compiles = FakeClock(), io.StringIO(), Compiles()
    compiles.spent = 4.0  # before the run's monitor started: not this run's to leave out
    monitor = Monitor(str(tmp_path), total_steps=10_000, clock=clock, compiles=compiles,
                      console=ProgressLines(10_000, out=out, interval=10))
    monitor.tick(0, 1.0)
    for period in range(1, 5):
        # Each period: 1 s of play; the first also waits 30 s for the train call's compile.
        wait = 30.0 if period == 1 else 0.0
        compiles.spent += wait
        clock.t += 1.0 + wait
        if period == 1:
            monitor.record_train(0.5)
        monitor.sync_point(period * 100)
        monitor.tick(period * 100, 0.5)
    assert monitor.period_rate.rate(monitor._playing_seconds(clock()), 400) == \
        pytest.approx(100.0)
    clock.t += 20
    monitor.tick(400, 0.5)
    told = [line for line in out.getvalue().splitlines() if line.startswith("compiling took")]
    assert told == ["compiling took 34.0 s (2 programs); steps/s leaves it out"]
    monitor.close()


def test_compiles_during_an_evaluation_are_left_out_once(tmp_path):
    """The evaluation's own compile is left out with the evaluation, not again: the clock
    holds still through the evaluation and runs on at the wall's pace after it."""
    clock, compiles = FakeClock(), Compiles()
    monitor = Monitor(str(tmp_path), total_steps=1000, clock=clock, compiles=compiles)
    clock.t = 10.0
    assert monitor._playing_seconds(clock()) == 10.0
    monitor.evaluation_game(1, 2)
    clock.t, compiles.spent = 14.0, 3.0  # the evaluation's acting call compiled
    assert monitor._playing_seconds(clock()) == 10.0
    clock.t = 15.0
    monitor.evaluation_game(3, 2)
    assert monitor._playing_seconds(clock()) == 10.0
    clock.t = 16.0
    assert monitor._playing_seconds(clock()) == 11.0
    clock.t, compiles.spent = 20.0, 4.0  # a second after: a compile while playing
    assert monitor._playing_seconds(clock()) == 14.0
    monitor.close()
