"""benchmarks.gpu_table: the one table of a GPU session, gathered from what its parts wrote."""

from benchmarks.gpu_table import (
    group_rows,
    learner_rows,
    nature_days,
    pong_solved,
    suite_rate,
    table,
)

LEARNER = """== learner
| batch | compute | xla | per call | replay | updates/s | samples/s |
|---|---|---|---|---|---|---|
| 32 | float32 | off | 1 | device | 350.8 | 11,227 |
| 32 | float32 | off | 64 | device | 1700.8 | 54,425 |
| 128 | float32 | off | 64 | device | 1382.1 | 176,906 |
| 32 | bfloat16 | off | 64 | device | 1783.3 | 57,066 |
| 32 | float32 | off | 64 | host | 727.4 | 23,277 |
-- without deterministic kernels
| 32 | float32 | off | 64 | device | 2,501.5 | 80,048 |
"""
SPEEDTEST = ("repeat,name,label,steps_per_s,min,max,segments,cpu_percent,trainer_busy,"
             "peak_rss_mb,device\n"
             "0,fast-32-on-on,x,4477.1,1,2,4,300,0.87,3000,d\n"
             "0,samplers-64,x,9100.4,1,2,4,900,,1400,d\n")


def test_each_row_is_the_figure_its_part_printed(tmp_path):
    (tmp_path / "learner.txt").write_text(LEARNER)
    (tmp_path / "speedtest.csv").write_text(SPEEDTEST)
    (tmp_path / "two-groups.csv").write_text(SPEEDTEST.replace("4477.1", "5012.0"))
    (tmp_path / "suite.txt").write_text(
        "suite: 0 of 4 finished, 4 running; 9,800 agent steps/s in all; ETA 3h00m\n"
        "suite: 0 of 4 finished, 4 running; 12,345 agent steps/s in all; ETA 2h00m\n"
        "suite: 0 of 4 finished, 2 running; ETA ?\n")
    episodes = ["episode,agent_step,length,return,mean_100,epsilon,hours"]
    episodes += [f"{n},{n * 1000},1000,-21,{17.0 if n < 120 else 18.5},0.01,{n / 3000}"
                 for n in range(1, 131)]
    episodes[50] = "50,50000,1000,21,19.0,0.01,0.001"  # before 100 games: does not count
    (tmp_path / "episodes.csv").write_text("\n".join(episodes) + "\n")
    # Batch 32, float32, replay on the device only; the first table, then each variant's.
    assert learner_rows(tmp_path / "learner.txt") == {
        (1, ""): 350.8, (64, ""): 1700.8, (64, "without deterministic kernels"): 2501.5}
    assert suite_rate(tmp_path / "suite.txt") == 12_345
    assert pong_solved(tmp_path / "episodes.csv") == (120 / 3000 * 60, 120_000)
    lines = table(str(tmp_path))
    assert "| learner, K = 64 | 1,701 |  |" in lines
    assert "| learner, K = 64, no deterministic kernels | 2,502 |  |" in lines
    assert "| learner, K = 256 | not measured | ≥ 5,000 |" in lines
    assert "| fast loop, Nature ratios, W = 32 | 4,477 (trainer busy 0.87) | ≥ 10,000 |" \
        in lines
    assert "| samplers alone, W = 64 | 9,100 | ≥ 15,000 |" in lines
    assert "| fast loop, Nature ratios, W = 32, two groups | 5,012 (trainer busy 0.87) " \
        "| ≥ 10,000 |" in lines
    assert "| suite of 4 Dopamine runs on one GPU, in all | 12,345 | ≥ 12,000 |" in lines
    assert "| pong-fastest, W = 16: mean of 100 at 18 | 2.40 min, agent step 120,000 " \
        "| ≤ 1 min |" in lines


def test_a_part_that_did_not_run_is_not_measured(tmp_path):
    lines = table(str(tmp_path))
    assert len(lines) == 2 + 16 + 5 + 4
    assert all("| not measured |" in line for line in lines[2:])


def test_the_speedtest_warns_of_a_window_shorter_than_three_periods(capsys):
    """One period's window holds a GPU's compiles (1,067 agent steps/s read where the steady
    state was 4,337): the speedtest says so before it runs."""
    import argparse

    from benchmarks.speedtest import warn_short_window
    short = argparse.Namespace(steps=10_000, period=10_000, quick=False)
    assert warn_short_window(short) == 1
    assert "1 target period of 10,000" in capsys.readouterr().err
    assert warn_short_window(argparse.Namespace(steps=40_000, period=10_000, quick=False)) == 4
    assert capsys.readouterr().err == ""


GROUPS = """== groups
| batch | compute | xla | per call | replay | runs | updates/s per run | updates/s in all | \
samples/s in all |
|---|---|---|---|---|---|---|---|---|
| 32 | float32 | off | 64 | device | 1 | 2,599.0 | 2,599.0 | 83,168 |
| 32 | float32 | off | 64 | device | 8 | 2,000.5 | 16,004.0 | 512,128 |
"""


def test_the_run_axis_rows_and_the_49_game_estimates(tmp_path):
    """benchmarks.learner's table with runs read by its header; the suites both ways, and
    the Nature benchmark's days computed from each (49 games x 50M agent steps)."""
    (tmp_path / "groups-learner.txt").write_text(GROUPS)
    (tmp_path / "learner.txt").write_text(GROUPS)
    assert group_rows(tmp_path / "groups-learner.txt") == {1: 2599.0, 8: 16004.0}
    assert learner_rows(tmp_path / "learner.txt") == {(64, ""): 2599.0}  # one run only
    (tmp_path / "suite-8-processes.txt").write_text("suite: 6,305 agent steps/s in all\n")
    (tmp_path / "suite-8-groups.txt").write_text("suite: 28,356 agent steps/s in all\n")
    assert round(nature_days(6_305), 2) == round(49 * 50e6 / 6_305 / 86_400, 2) == 4.5
    lines = table(str(tmp_path))
    assert "| learner, K = 64, 8 runs in one call, updates/s in all | 16,004 | ≥ 15,000 |" \
        in lines
    assert "| learner, K = 64, 4 runs in one call, updates/s in all | not measured |  |" \
        in lines
    assert "| suite of 8 Dopamine runs, 8 processes, in all | 6,305 | ≥ 15,000 |" in lines
    assert "| the 49 Nature games at 50M agent steps, one seed, at 8 processes' rate " \
        "(computed, days) | 4.5 | ≤ 2 |" in lines
    assert "| the 49 Nature games at 50M agent steps, one seed, at 2 groups of 4 runs' " \
        "rate (computed, days) | 1.0 | ≤ 2 |" in lines
