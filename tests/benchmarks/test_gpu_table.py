"""benchmarks.gpu_table: the one table of a GPU session, gathered from what its parts wrote."""

import pytest

from benchmarks.gpu_table import (
    PARTS,
    group_rows,
    learner_rows,
    main,
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
        "at ε 0.1, evaluation left out (computed, days) | 4.5 | ≤ 2 |" in lines
    assert "| the 49 Nature games at 50M agent steps, one seed, at 2 groups of 4 runs' " \
        "rate at ε 0.1, evaluation left out (computed, days) | 1.0 | ≤ 2 |" in lines


# --- damaged input: a figure file's rows read "damaged: FILE", one line each on stderr, and
# exit 2; a missing folder or header.txt stops the tool in one line.

HEADER = "commit 2620635, 2026-11-27T20:54:02Z\nGPU 0: NVIDIA H200 (UUID: GPU-0)\n" \
    "device GPU\ncores 16, load average 0.00 0.00 0.00\nKeras backend jax\n"
SUITE = "suite: 0 of 4 finished, 4 running; 12,345 agent steps/s in all; ETA 2h00m\n"
EPISODES = "episode,agent_step,length,return,mean_100,epsilon,hours\n" + "".join(
    f"{n},{n * 1000},1000,-21,{18.5 if n >= 120 else 17.0},0.01,{n / 3000}\n"
    for n in range(1, 131))
# The row each file feeds, as it reads when that file is damaged.
ROWS = {"learner.txt": "| learner, K = 64 |", "speedtest.csv": "| samplers alone, W = 64 |",
        "nature.csv": "| Nature loop (agent steps/s) |",
        "suite.txt": "| suite of 4 Dopamine runs on one GPU, in all |",
        "groups-learner.txt": "| learner, K = 64, 8 runs in one call, updates/s in all |",
        "episodes.csv": "| pong-fastest, W = 16: mean of 100 at 18 |"}
NATURE = "repeat,name,label,steps_per_s,trainer_busy\n0,nature,x,383.5,\n"
FOLDER = object()  # a folder where the file should be
DIGITS = "9" * 5000
DAMAGES = {
    "cut-csv-row": ("speedtest.csv", SPEEDTEST + "0,fast-64-on-on,x,41", "row 4 has 4 of 11"),
    "cut-learner-row": ("learner.txt", LEARNER + "| 32 | float32 | off | 256 | dev",
                        "line 11: 5 cells where its table has 7"),
    "cut-episodes-row": ("episodes.csv", EPISODES + "131,131000,10\n", "row 132 has 3 of 7"),
    "cut-last-field": ("speedtest.csv", SPEEDTEST[:-1], "no line break at its end"),
    "no-rate-column": ("speedtest.csv", SPEEDTEST.replace("steps_per_s", "steps"),
                       "no 'steps_per_s' column"),
    "no-learner-rate-column": ("learner.txt", LEARNER.replace("updates/s", "rate"),
                               "line 2: its table has no 'updates/s' column"),
    "no-group-rate-column": ("groups-learner.txt", GROUPS.replace("in all |", "total |"),
                             "no 'updates/s in all' column"),
    "no-mean-column": ("episodes.csv", EPISODES.replace("mean_100", "mean"),
                       "no 'mean_100' column"),
    "empty-csv": ("nature.csv", "", "is empty"),
    "word-for-rate": ("speedtest.csv", SPEEDTEST.replace("9100.4", "fast"),
                      "row 3, steps_per_s: 'fast' is not a number"),
    "word-in-learner": ("learner.txt", LEARNER.replace("1700.8", "n/a"),
                        "line 5, updates/s: 'n/a' is not a number"),
    "word-for-K": ("learner.txt", LEARNER.replace("| 64 | device | 1700.8", "| 6x4 | device "
                                                  "| 1700.8"), "'6x4' is not a whole number"),
    "word-in-episodes": ("episodes.csv", EPISODES.replace("\n5,5000,", "\nfive,5000,"),
                         "row 6, episode: 'five' is not a whole number"),
    "infinite-rate": ("nature.csv", NATURE.replace("383.5", "1e999"), "not a finite number"),
    "binary-learner": ("learner.txt", b"\x00\xff\xfe binary \x80", "binary"),
    "binary-csv": ("speedtest.csv", SPEEDTEST.encode() + b"\x00\x00", "binary"),
    "not-utf8-csv": ("nature.csv", NATURE.encode().replace(b"x", b"\xe9"), "not UTF-8"),
    "folder-csv": ("speedtest.csv", FOLDER, "is a folder, not a file"),
    "folder-log": ("suite.txt", FOLDER, "is a folder, not a file"),
    "folder-episodes": ("episodes.csv", FOLDER, "is a folder, not a file"),
    "digits-suite": ("suite.txt", f"suite: {DIGITS} agent steps/s in all\n",
                     "(5,000 characters), longer than any figure"),
    "digits-learner": ("learner.txt", LEARNER.replace("1700.8", DIGITS), "5,000 characters"),
    "digits-csv": ("speedtest.csv", SPEEDTEST.replace("9100.4", DIGITS), "5,000 characters"),
    "digits-episodes": ("episodes.csv", EPISODES.replace("\n7,7000,", f"\n7,{DIGITS},"),
                        "row 8, agent_step: '99999999999999999999'... (5,000 characters)"),
    "digits-runs": ("groups-learner.txt", GROUPS.replace("| 8 | 2,000.5", f"| {DIGITS} | 2"),
                    "5,000 characters"),
    "zero-sum": ("suite.txt", "suite: 0 agent steps/s in all\n", "is 0"),
}


def write(folder, name, content):
    path = folder / name
    if content is FOLDER:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


def good_session(folder, header=HEADER):
    for name, content in [("header.txt", header), ("learner.txt", LEARNER),
                          ("speedtest.csv", SPEEDTEST), ("nature.csv", NATURE),
                          ("suite.txt", SUITE), ("groups-learner.txt", GROUPS),
                          ("episodes.csv", EPISODES)]:
        write(folder, name, content)


def run(argv, capsys):
    """main(argv) in this process: (exit status, stdout, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_a_whole_session_exits_0(tmp_path, capsys):
    good_session(tmp_path)
    code, out, err = run([str(tmp_path)], capsys)
    assert (code, err) == (0, "")
    assert "<!-- device GPU -->" in out and "| learner, K = 64 | 1,701 |  |" in out
    assert "| pong-fastest, W = 16: mean of 100 at 18 | 2.40 min, agent step 120,000 " in out


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_file_is_named_in_one_line_and_its_rows_say_so(tmp_path, capsys, damage):
    name, content, what = DAMAGES[damage]
    good_session(tmp_path)
    (tmp_path / name).unlink()
    write(tmp_path, name, content)
    code, out, err = run([str(tmp_path)], capsys)
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in out + err, err
    assert lines[0].startswith(f"gpu_table: {tmp_path / name}: ") and what in lines[0], err
    assert lines[0].endswith(f"rerun bash benchmarks/gpu_session.sh "
                             f"{PARTS[name]} into a new OUT")
    assert f"{ROWS[name]} damaged: {name} |" in out
    # The other files' rows still read their figures.
    others = {"learner.txt": "| learner, K = 64 | 1,701 |", "suite.txt": "| 12,345 |",
              "episodes.csv": "| 2.40 min, agent step 120,000 |"}
    assert all(row in out for file, row in others.items() if file != name)


HEADERS = {"empty-header": "\n", "binary-header": b"\x00\xff", "folder-header": FOLDER}


@pytest.mark.parametrize("case", ["no-folder", "a-file", "no-header", *HEADERS])
def test_no_session_folder_or_header_stops_the_tool_in_one_line(tmp_path, capsys, case):
    good_session(tmp_path)
    out_dir = {"no-folder": tmp_path / "gpu-out", "a-file": tmp_path / "learner.txt"}.get(
        case, tmp_path)
    if out_dir == tmp_path:
        (tmp_path / "header.txt").unlink()
        if case in HEADERS:
            write(tmp_path, "header.txt", HEADERS[case])
    code, out, err = run([str(out_dir)], capsys)
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, err
    named = out_dir if case in ("no-folder", "a-file") else tmp_path / "header.txt"
    assert lines[0].startswith(f"gpu_table: {named}: ")
    assert "gpu_session.sh" in lines[0]


@pytest.mark.parametrize("header", ["device CPU (GPU_SESSION_CPU=1): every figure is the "
                                    "CPU's, none a GPU's", "no nvidia-smi"])
def test_a_cpu_session_says_cpu_on_every_row(tmp_path, capsys, header):
    """GPU_SESSION_CPU=1's header, or an older session's on a machine without nvidia-smi:
    the CPU's figures never pass for a GPU's."""
    good_session(tmp_path, header=f"commit 2620635, 2026-11-27\n{header}\ncores 2\n")
    code, out, err = run([str(tmp_path)], capsys)
    assert (code, err) == (0, "")
    rows = [line for line in out.splitlines() if line.startswith("| ")][1:]
    assert out.splitlines()[3].startswith("**CPU figures, not GPU ones**")
    assert "| row | measured on the CPU | GPU goal |" in out
    assert len(rows) == 25 and all(row.startswith("| CPU: ") for row in rows)
    assert "| CPU: learner, K = 64 | 1,701 |  |" in rows
    assert "| CPU: suite of 4 Dopamine runs on the CPU, in all | 12,345 | ≥ 12,000 |" in rows
