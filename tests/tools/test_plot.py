"""`python -m fast_dqn.tools.plot` on what a user gives it: logs with a blank cell, and an -o
that is not an image file. Hand-made run directories of a few CSV rows; nothing trains."""

import json
import os

import pytest

from fast_dqn.tools.plot import main, training_curve

EPISODES = "episode,agent_step,return,mean_100,epsilon,hours\n"


def write_run(path, episodes, evals=None, seed=0):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"loop": "fast", "game": "pong",
                                                  "seed": seed, "preset": "nature",
                                                  "logdir": str(path)}))
    (path / "episodes.csv").write_text(EPISODES + episodes)
    if evals is not None:
        (path / "eval.csv").write_text("agent_step,mean,std,episodes,hours\n" + evals)
    return str(path)


def one_line_error(capsys, *words):
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("python -m fast_dqn.tools.plot: error: -o: "), err
    for word in words:
        assert word in err, err
    return err


def test_a_blank_cell_skips_its_whole_row_with_one_warning(tmp_path, capsys):
    """One blank mean_100 and one blank agent_step: both rows are skipped, each curve's x and
    y still come from the same rows, and one warning per file names it and its lines."""
    run = write_run(tmp_path / "r",
                    "1,100,-21.0,-21.0,1.0,0.01\n2,200,-20.0,,1.0,0.02\n"
                    "3,,-19.0,-20.0,1.0,0.03\n4,400,-18.0,-19.5,1.0,0.04\n",
                    "100,-9.0,0,2,0.1\n200,,0,2,0.2\n300,-8.0,0,2,0.3\n")
    output = tmp_path / "c.png"
    assert main([run, "-o", str(output)]) == 0
    assert output.read_bytes()[:4] == b"\x89PNG"
    captured = capsys.readouterr()
    assert captured.out == f"wrote {output}\n"
    assert sorted(captured.err.splitlines()) == [
        f"warning: {os.path.join(run, 'episodes.csv')}, line 3 (and 1 more): not a row of "
        "numbers; skipped (remove the line to silence this)",
        f"warning: {os.path.join(run, 'eval.csv')}, line 3: not a row of numbers; skipped "
        "(remove the line to silence this)"]
    assert training_curve(run) == {"agent_step": [100.0, 400.0], "hours": [0.01, 0.04],
                                   "mean": [-21.0, -19.5]}


def test_an_eval_csv_without_an_hours_column_is_an_older_log_not_a_bad_row(tmp_path, capsys):
    run = write_run(tmp_path / "r", "1,100,-21.0,-21.0,1.0,0.01\n")
    (tmp_path / "r" / "eval.csv").write_text("agent_step,mean\n100,-9.0\n200,-8.0\n")
    assert main([run, "-o", str(tmp_path / "c.png")]) == 0
    assert capsys.readouterr().err == ""


def test_aggregated_seeds_pair_each_step_with_its_own_score(tmp_path, capsys):
    """Without evaluations the table scores the mean of 100 at the last step both seeds
    reached: 300, not a step shifted onto another row's score by a blank cell."""
    from fast_dqn.tools.atari_scores import human_normalized
    runs = [write_run(tmp_path / "s0", "1,100,-5,-5.0,1,0.1\n2,200,-4,,1,0.2\n"
                      "3,300,-3,-3.0,1,0.3\n", seed=0),
            write_run(tmp_path / "s1", "1,100,-6,-6.0,1,0.1\n2,,-4,-4.0,1,0.2\n"
                      "3,300,-2,-2.0,1,0.3\n", seed=1)]
    output = tmp_path / "c.png"
    assert main([*runs, "--aggregate", "-o", str(output)]) == 0
    assert output.read_bytes()[:4] == b"\x89PNG"
    captured = capsys.readouterr()
    mean = (human_normalized("pong", -3.0) + human_normalized("pong", -2.0)) / 2
    assert "| fast nature | 2 | 1 | 300 | human-normalized |" in captured.out
    assert f"| {mean:.3f} [" in captured.out.splitlines()[3]
    assert captured.err.splitlines() == [
        f"warning: {os.path.join(run, 'episodes.csv')}, line 3: not a row of numbers; "
        "skipped (remove the line to silence this)" for run in runs]


@pytest.mark.parametrize("name", ["c.xyz", "r/config.json", "r/episodes.csv"])
def test_an_output_matplotlib_cannot_write_is_refused_before_anything_is_read(
        tmp_path, capsys, name):
    write_run(tmp_path / "r", "1,100,-21.0,-21.0,1.0,0.01\n")
    before = (tmp_path / "r" / "config.json").read_bytes()
    # A run directory that does not exist: the -o is refused first, before any run is read.
    assert main([str(tmp_path / "absent"), "-o", str(tmp_path / name)]) == 2
    extension = name.rsplit(".", 1)[1]
    one_line_error(capsys, f"'.{extension}'", "png", "pdf", "svg")
    assert (tmp_path / "r" / "config.json").read_bytes() == before
    assert not (tmp_path / "c.xyz").exists()


def test_an_output_without_an_extension_is_refused_not_written_elsewhere(tmp_path, capsys):
    run = write_run(tmp_path / "r", "1,100,-21.0,-21.0,1.0,0.01\n")
    (tmp_path / "curves.png").write_bytes(b"mine")
    assert main([run, "-o", str(tmp_path / "curves")]) == 2
    one_line_error(capsys, "give -o", "curves.png", "the extension picks the format")
    assert (tmp_path / "curves.png").read_bytes() == b"mine"
    assert not (tmp_path / "curves").exists()


@pytest.mark.parametrize("where", ["a directory", "a missing directory"])
def test_an_output_that_is_a_directory_or_in_a_missing_one_is_one_line(tmp_path, capsys,
                                                                       where):
    run = write_run(tmp_path / "r", "1,100,-21.0,-21.0,1.0,0.01\n")
    # `-o RUN` once wrote RUN.png beside it and said it wrote RUN.
    output = tmp_path / "out" if where == "a directory" else tmp_path / "no" / "c.png"
    if where == "a directory":
        output.mkdir()
    assert main([run, "-o", str(output)]) == 2
    one_line_error(capsys, f"'{output if where == 'a directory' else output.parent}'")
    assert sorted(os.listdir(tmp_path)) == sorted(["r"] + (["out"] if output.exists() else []))


def test_a_replot_replaces_its_image_whole_and_says_where(tmp_path, capsys):
    run = write_run(tmp_path / "r", "1,100,-21.0,-21.0,1.0,0.01\n2,200,-20.0,-20.5,1.0,0.02\n")
    output = tmp_path / "curves.png"
    for then in ["", ", replacing the image that was there"]:  # the next: line, run again
        assert main([run, "-o", str(output)]) == 0
        assert capsys.readouterr().out == f"wrote {output}{then}\n"
        assert output.read_bytes()[:4] == b"\x89PNG"
    assert sorted(os.listdir(tmp_path)) == ["curves.png", "r"]
    umask = os.umask(0)
    os.umask(umask)
    assert output.stat().st_mode & 0o777 == 0o666 & ~umask  # as savefig's own file would be


def test_a_plot_interrupted_while_writing_keeps_the_old_image_and_leaves_no_file(
        tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM, raised the same way by the tools' wrapper) in the middle of
    savefig: the image from the last plot is still whole, and no partial file is left."""
    import matplotlib.figure
    run = write_run(tmp_path / "r", "1,100,-21.0,-21.0,1.0,0.01\n")
    output = tmp_path / "curves.png"
    output.write_bytes(b"the last plot")

    def interrupted(self, path, **kwargs):
        with open(path, "wb") as f:
            f.write(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main([run, "-o", str(output)])
    assert output.read_bytes() == b"the last plot"
    assert sorted(os.listdir(tmp_path)) == ["curves.png", "r"]


@pytest.mark.parametrize("signal_name, code, words", [
    ("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "stopped by SIGTERM")])
def test_a_signal_while_drawing_and_while_writing_says_which(tmp_path, monkeypatch, capsys,
                                                             signal_name, code, words):
    """Ctrl-C or SIGTERM under `fast-dqn plot`: in savefig, the line names the image, of
    which no partial file is left; before it (reading the logs), no file was being written."""
    import signal

    import matplotlib.figure

    from fast_dqn import commands
    from fast_dqn.tools import plot
    run = write_run(tmp_path / "r", "1,100,-21.0,-21.0,1.0,0.01\n")
    output = tmp_path / "curves.png"

    def stopped(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, signal_name))
        pytest.fail("the signal did not stop the tool")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", stopped)
    assert commands.main(["plot", run, "-o", str(output)]) == code
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fast-dqn plot: {words}; no partial file of '{output}' is left"]
    monkeypatch.setattr(plot, "training_curve", stopped)
    assert commands.main(["plot", run, "-o", str(output)]) == code
    assert capsys.readouterr().err.strip().splitlines() == [
        f"fast-dqn plot: {words}; no file was being written, so nothing is lost"]
    assert sorted(os.listdir(tmp_path)) == ["r"]


def test_glyphs_the_font_lacks_are_said_once_in_one_line(tmp_path, capsys):
    """A run named in characters the font lacks: matplotlib's warning per glyph, per layout
    and draw, each with a source line, become one note."""
    run = write_run(tmp_path / "run-\u5b66\u7fd2\U0001f680",
                    "1,100,-21.0,-21.0,1.0,0.01\n2,200,-20.0,-20.5,1.0,0.02\n")
    capsys.readouterr()
    assert main([run, "-o", str(tmp_path / "c.png")]) == 0
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("python -m fast_dqn.tools.plot: note: the font (") and \
        err.strip().endswith("lacks 3 characters of the labels (CJK UNIFIED IDEOGRAPH-5B66, "
                             "CJK UNIFIED IDEOGRAPH-7FD2, ROCKET); they are drawn as boxes"), err
    assert (tmp_path / "c.png").exists()
