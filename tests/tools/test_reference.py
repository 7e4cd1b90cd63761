"""plot --reference against Dopamine's published curves (fast_dqn.tools.reference): the
shipped reference data, and the table checked on synthetic logs whose answer is known. The
preset itself is tested in tests/run/settings/test_dopamine_preset.py.
"""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, hang_guard

from fast_dqn.errors import ConfigError
from fast_dqn.run.settings.hyperparameters import FastConfig
from fast_dqn.run.settings.presets import PRESETS
from fast_dqn.tools.reference import compare, load_reference

# --- the reference data and plot --reference


def test_the_shipped_references_have_five_runs_an_iteration():
    for game in ("breakout", "pong", "space_invaders"):
        rows = load_reference("dopamine", game)
        assert [r.iteration for r in rows] == list(range(len(rows))) and len(rows) >= 199
        assert all(len(r.returns) == 5 for r in rows)
        assert [r.agent_steps_end for r in rows[:2]] == [250_000, 500_000]
    breakout = load_reference("dopamine", "breakout")
    assert (min(breakout[1].returns), max(breakout[1].returns)) == (2.8268, 3.27)
    assert (min(breakout[3].returns), max(breakout[3].returns)) == (5.8816, 7.511)


def write_run(run_dir, games, game="breakout", loop="fast", seed=0, checkpoint=None):
    """A run directory with a config.json and the given (end step, return) games."""
    os.makedirs(run_dir)
    config = {**FastConfig(**PRESETS["dopamine"], preset="dopamine", game=game).to_dict(),
              "loop": loop, "seed": seed}
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(run_dir, "episodes.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["episode", "agent_step", "length", "return", "mean_100", "epsilon",
                      "hours"])
        for n, (step, value) in enumerate(games, 1):
            out.writerow([n, step, 100, value, value, 0.5, step / 1e6])
    if checkpoint is not None:
        os.makedirs(os.path.join(run_dir, "checkpoints", f"step-{checkpoint:012d}"))


def games_with_means(means, per_iteration=4, last_end=None):
    """Games in each 250k iteration whose mean is means[k]: pairs at mean -/+ 0.5, the last
    ending at the iteration's end."""
    games = []
    for k, mean in enumerate(means):
        start = k * 250_000
        ends = start + 250_000 // per_iteration * np.arange(1, per_iteration + 1)
        values = [mean - 0.5, mean + 0.5] * (per_iteration // 2)
        games += list(zip(ends.tolist(), values))
    if last_end is not None:
        games[-1] = (last_end, games[-1][1])
    return games


def test_an_iteration_plays_whole_games_as_dopamines_runner_does(tmp_path):
    # The game that reaches 250k steps (ending at 260k) is iteration 0's last, so iteration
    # 1 runs from 260k until a game ends at or past 510k (the one at 512k).
    write_run(tmp_path / "r", [(10, 1.0), (260_000, 3.0), (270_000, 10.0), (505_000, 2.0),
                               (512_000, 4.0), (600_000, 7.0)], checkpoint=600_000)
    rows = compare([str(tmp_path / "r")], "dopamine", "breakout")
    assert [(row.iteration, row.ours, row.finished) for row in rows] == [
        (0, (2.0,), True), (1, (16 / 3,), True), (2, (7.0,), False)]
    # The last iteration of a run stopped at its nominal end is finished without its
    # closing game: here iteration 1 ends at the 500k checkpoint.
    write_run(tmp_path / "s", [(10, 1.0), (250_000, 3.0), (250_001, 10.0), (499_000, 2.0)],
              checkpoint=500_000)
    rows = compare([str(tmp_path / "s")], "dopamine", "breakout")
    assert [(row.iteration, row.ours, row.finished) for row in rows] == [
        (0, (2.0,), True), (1, (6.0,), True)]


def test_inside_and_outside_the_published_range(tmp_path):
    # Breakout's published ranges: 1.57-1.70, 2.83-3.27, 3.33-4.51, 5.88-7.51.
    write_run(tmp_path / "inside", games_with_means([1.65, 3.0, 4.0, 6.5]), checkpoint=1_000_000)
    write_run(tmp_path / "outside", games_with_means([1.65, 2.0, 4.0, 8.0]),
              checkpoint=1_000_000)
    inside = compare([str(tmp_path / "inside")], "dopamine", "breakout")
    outside = compare([str(tmp_path / "outside")], "dopamine", "breakout")
    assert [row.inside for row in inside] == [1, 1, 1, 1]
    assert [row.inside for row in outside] == [1, 0, 1, 0]
    assert [round(row.mean, 6) for row in outside] == [1.65, 2.0, 4.0, 8.0]


def test_an_unfinished_iteration_is_shown_but_not_judged(tmp_path):
    # Checkpoint at 600k: iteration 2 (500k-750k) is under way.
    write_run(tmp_path / "r", games_with_means([1.65, 3.0, 4.0])[:-2], checkpoint=600_000)
    assert [row.finished for row in compare([str(tmp_path / "r")], "dopamine", "breakout")] \
        == [True, True, False]
    # Logs copied without checkpoints: a game in an iteration's last tenth finishes it.
    write_run(tmp_path / "copied", games_with_means([1.65, 3.0], last_end=499_100))
    write_run(tmp_path / "cut", games_with_means([1.65, 3.0], last_end=400_000))
    assert [row.finished for row in compare([str(tmp_path / "copied")], "dopamine",
                                            "breakout")] == [True, True]
    assert [row.finished for row in compare([str(tmp_path / "cut")], "dopamine",
                                            "breakout")] == [True, False]


def plot(*args):
    return subprocess.run([sys.executable, "-m", "fast_dqn.tools.plot", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=hang_guard(120))


def test_plot_reference_draws_the_band_and_prints_the_table(tmp_path):
    for seed, means in enumerate(([1.65, 3.0, 4.0, 6.5], [1.6, 3.1, 3.0, 7.0])):
        write_run(tmp_path / f"fast-s{seed}", games_with_means(means), seed=seed,
                  checkpoint=1_000_000)
    write_run(tmp_path / "nature-s0", games_with_means([1.65, 2.0]), loop="nature",
              checkpoint=500_000)
    image = tmp_path / "ref.png"
    result = plot(tmp_path / "fast-s0", tmp_path / "fast-s1", tmp_path / "nature-s0",
                  "--reference", "dopamine", "-o", image)
    assert result.returncode == 0, result.stderr
    assert image.stat().st_size > 10_000
    lines = result.stdout.splitlines()
    assert "| 1 | 500,000 | 3.05 [3.00, 3.10] | 3.06 | 2.83 – 3.27 | 2 of 2 runs |" in lines
    assert "| 2 | 750,000 | 3.50 [3.00, 4.00] | 3.94 | 3.33 – 4.51 | 1 of 2 runs |" in lines
    assert "| 1 | 500,000 | 2.00 | 3.06 | 2.83 – 3.27 | no |" in lines
    assert "| 0 | 250,000 | 1.65 | 1.64 | 1.57 – 1.70 | yes |" in lines


def test_the_legend_says_how_many_runs_each_iteration_averages():
    from fast_dqn.tools.reference import Comparison, runs_label
    rows = [Comparison(k, 250_000 * (k + 1), (1.0,) * n, True, None)
            for k, n in enumerate([2, 2, 1, 1])]
    assert runs_label("breakout fast", rows) == \
        "breakout fast (2 runs to 500,000 agent steps, then 1)"
    assert runs_label("x", rows[:2]) == "x (2 runs)"
    assert runs_label("x", rows[2:]) == "x (1 run)"
    three = [Comparison(k, 10 * (k + 1), (1.0,) * n, True, None) for k, n in
             enumerate([3, 2, 1])]
    assert runs_label("x", three) == "x (3 runs to 10 agent steps, 2 runs to 20 agent steps, " \
        "then 1)"


def test_a_run_short_of_its_first_iteration_is_drawn_over_the_published_range():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    from fast_dqn.tools.reference import Comparison, ReferenceIteration, draw_comparison
    rows = [Comparison(0, 250_000, (-20.5,), False, ReferenceIteration(0, 250_000,
                                                                       (-21.0, -20.0)))]
    fig, ax = plt.subplots()
    draw_comparison(ax, rows, "pong")
    labels = ax.get_legend_handles_labels()[1]
    assert "Dopamine DQN, 2 runs (range)" in labels and "partial iteration" in labels
    # The range reaches from the lowest published run to the highest, at 250k.
    spans = [c.get_segments() for c in ax.collections if c.get_label().endswith("(range)")]
    assert [[list(map(float, p)) for p in seg] for seg in spans[0]] == \
        [[[250_000.0, -21.0], [250_000.0, -20.0]]]
    assert to_rgba(ax.collections[0].get_color()[0])[3] > 0
    plt.close(fig)


def test_an_iteration_only_one_of_the_runs_reached_is_judged_on_it_alone():
    import io

    from fast_dqn.tools.reference import Comparison, ReferenceIteration, print_comparison
    published = ReferenceIteration(2, 750_000, (3.0, 4.0))
    rows = [Comparison(1, 500_000, (3.5, 5.0), True, ReferenceIteration(1, 500_000, (3.0, 4.0))),
            Comparison(2, 750_000, (3.5,), True, published)]
    out = io.StringIO()
    print_comparison(rows, "x", 2, out)
    lines = out.getvalue().splitlines()
    assert "| 1 | 500,000 | 4.25 [3.50, 5.00] | 3.50 | 3.00 – 4.00 | 1 of 2 runs |" in lines
    assert "| 2 | 750,000 | 3.50 | 3.50 | 3.00 – 4.00 | yes (1 run) |" in lines


@pytest.mark.parametrize("edit,reference,message", [
    (None, "nope", "--reference: no reference named 'nope'; the references are: dopamine"),
    ("missing", "dopamine", "has no episodes.csv"),
    ("no-config", "dopamine", "has no config.json; give run directories made by"),
])
def test_what_plot_reference_cannot_compare_is_one_line(tmp_path, edit, reference, message):
    write_run(tmp_path / "r", [(1000, 1.0), (2000, 2.0)], game="alien" if edit == "game"
              else "breakout")
    if edit == "missing":
        os.remove(tmp_path / "r" / "episodes.csv")
    if edit == "no-config":
        os.remove(tmp_path / "r" / "config.json")
    result = plot(tmp_path / "r", "--reference", reference, "-o", tmp_path / "x.png")
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_game_without_reference_data_and_a_run_without_games_are_left_out_by_name(
        tmp_path):
    write_run(tmp_path / "alien", [(1000, 100.0)], game="surround")
    write_run(tmp_path / "empty", [], seed=1)
    write_run(tmp_path / "breakout", games_with_means([1.65]), seed=2, checkpoint=250_000)
    runs = [tmp_path / "alien", tmp_path / "empty", tmp_path / "breakout"]
    result = plot(*runs, "--reference", "dopamine", "-o", tmp_path / "x.png")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"note: '{runs[0]}' is left out: 'dopamine' has no data for surround (it has 60 "
        "games; fast_dqn/reference_data/dopamine)",
        f"note: '{runs[1]}' is left out: it has no finished game yet"]
    assert "| 0 | 250,000 | 1.65 | 1.64 | 1.57 – 1.70 | yes |" in result.stdout.splitlines()
    result = plot(runs[0], "--reference", "dopamine", "-o", tmp_path / "y.png")
    assert result.returncode == 2 and "none of the runs can be compared" in result.stderr
    assert plot(runs[2], "--reference", "dopamine", "--window", "20").returncode == 2


def test_rows_are_read_whole_not_as_columns(tmp_path):
    """A row missing its step and another missing its return must not pair up; nor is
    'nan' a return."""
    write_run(tmp_path / "r", [(1000, 1.0), (2000, 3.0)], checkpoint=250_000)
    with open(tmp_path / "r" / "episodes.csv", "a") as f:
        f.write("3,,100,50.0,0,0.5,0.1\n4,3000,100,,0,0.5,0.1\n5,4000,100,nan,0,0.5,0.1\n")
    assert compare([str(tmp_path / "r")], "dopamine", "breakout")[0].ours == (2.0,)


def test_an_iteration_short_of_nine_tenths_is_not_finished_however_far_the_run_went(tmp_path):
    """Games that overshoot 250k by 20k each push every next iteration's start later: the
    fourth starts at 810k, so at a checkpoint of 1M it has played 190k steps, 76%."""
    games = [(270_000, 1.0), (540_000, 2.0), (810_000, 3.0), (1_000_000, 4.0)]
    write_run(tmp_path / "r", games, checkpoint=1_000_000)
    rows = compare([str(tmp_path / "r")], "dopamine", "breakout")
    assert [row.finished for row in rows] == [True, True, True, False]
    write_run(tmp_path / "s", games, checkpoint=1_050_000)  # 240k of it: 96%
    assert compare([str(tmp_path / "s")], "dopamine", "breakout")[3].finished


def test_a_row_being_written_is_left_for_later_and_another_protocol_is_named(tmp_path):
    """plot beside a training run: the run may be halfway through writing a row."""
    write_run(tmp_path / "r", [(1000, 1.0), (2000, 2.0)])
    with open(tmp_path / "r" / "episodes.csv", "a") as f:
        f.write("3,24")
    assert compare([str(tmp_path / "r")], "dopamine", "breakout")[0].ours == (1.5,)
    with open(tmp_path / "r" / "config.json") as f:
        saved = json.load(f)
    with open(tmp_path / "r" / "config.json", "w") as f:
        json.dump({**saved, "preset": "machado"}, f)
    result = plot(tmp_path / "r", "--reference", "dopamine", "-o", tmp_path / "x.png")
    assert result.returncode == 0 and "| 0 | 250,000 | 1.50 |" in result.stdout
    assert "ran --preset machado, not dopamine" in result.stderr


def test_load_reference_names_a_damaged_row(tmp_path, monkeypatch):
    import fast_dqn.tools.reference as reference
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "breakout.csv").write_text(
        "iteration,agent_steps_end,run_returns\n0,250000,1.0 x\n")
    monkeypatch.setattr(reference.resources, "files", lambda package: tmp_path)
    with pytest.raises(ConfigError, match="breakout.csv, line 2"):
        load_reference("mine", "breakout")
