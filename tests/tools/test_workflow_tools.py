"""TensorBoard scalars, the progress display, `python -m fast_dqn.tools.evaluate` and `.plot`."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, FakeClock, hang_guard, read_scalars

from fast_dqn.run.logs.monitor import Monitor
from fast_dqn.run.logs.progress import ProgressBar, ProgressLines, make_console
from fast_dqn.tools.atari_scores import SCORES, human_normalized


def test_tensorboard_gets_every_scalar(tmp_path):
    from fast_dqn.run.logs.tensorboard_log import TensorBoardLog
    clock = FakeClock()
    monitor = Monitor(str(tmp_path), 1000, interval=10, clock=clock,
                      console=ProgressLines(1000, out=io.StringIO()),
                      scalars=TensorBoardLog(str(tmp_path)), replay_fill=lambda: 0.25)
    monitor.record_game(100, 50, 3.0, 0.9)
    monitor.record_game(180, 40, 5.0, 0.8)
    monitor.record_train(0.5, 2.0)
    monitor.record_train(1.5, 4.0)
    clock.t = 20.0
    monitor.tick(400, 0.7)
    monitor.record_eval(400, [1.0, 3.0])
    monitor.close()
    scalars = read_scalars(tmp_path)
    assert scalars["train/episode_return"] == [(100, 3.0), (180, 5.0)]
    assert scalars["train/mean_100"] == [(100, 3.0), (180, 4.0)]
    assert scalars["train/loss"] == [(400, 1.0)] and scalars["train/mean_q"] == [(400, 3.0)]
    assert scalars["progress/epsilon"] == [(400, pytest.approx(0.7))]
    assert scalars["progress/steps_per_second"] == [(400, 20.0)]
    assert scalars["progress/replay_fill"] == [(400, 0.25)]
    assert scalars["eval/mean"] == [(400, 2.0)] and scalars["eval/std"] == [(400, 1.0)]


def test_the_last_step_ticked_again_and_again_is_one_point_of_all_its_minibatches(tmp_path):
    """The last step ticks while its last minibatches train and while the trainer finishes:
    one point, written at the end, with the mean of every minibatch since the one before."""
    from fast_dqn.run.logs.tensorboard_log import TensorBoardLog
    clock = FakeClock()
    monitor = Monitor(str(tmp_path), 1000, interval=10, clock=clock,
                      console=ProgressLines(1000, out=io.StringIO()),
                      scalars=TensorBoardLog(str(tmp_path)))
    monitor.record_train(4.0, 1.0)
    clock.t = 20.0
    monitor.tick(900, 0.1)                        # an ordinary point
    for t, loss in ((40.0, 1.0), (60.0, 2.0), (80.0, 3.0)):
        monitor.record_train(loss, 2.0)
        clock.t = t
        monitor.tick(1000, 0.1)
    monitor.close()
    assert read_scalars(tmp_path)["train/loss"] == [(900, 4.0), (1000, 2.0)]


def test_tensorboards_own_reader_reads_the_scalars(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from fast_dqn.run.logs.tensorboard_log import TensorBoardLog
    log = TensorBoardLog(str(tmp_path))
    log.scalars(100, {"eval/mean": -20.5, "eval/std": None})
    log.scalars(200, {"eval/mean": 3})
    log.close()
    reader = EventAccumulator(str(tmp_path / "tensorboard"))
    reader.Reload()
    assert reader.Tags()["scalars"] == ["eval/mean"]
    assert [(e.step, e.value) for e in reader.Scalars("eval/mean")] == [(100, -20.5), (200, 3.0)]


@pytest.mark.faults
def test_a_tensorboard_left_running_drops_the_points_a_resume_plays_again(tmp_path):
    """It read them before the cut; the restart marker makes it drop them, of every tag,
    and keep the checkpoint's own step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from fast_dqn.run.logs.tensorboard_log import TensorBoardLog
    clock = FakeClock()
    first = TensorBoardLog(str(tmp_path), clock=clock)
    first.scalars(100, {"train/loss": 1.0, "eval/mean": -20.0})
    saved = first.state_dict()                    # the checkpoint of step 100
    first.scalars(200, {"train/loss": 2.0})
    first.scalars(210, {"eval/mean": -5.0})       # then a stop without a checkpoint
    running = EventAccumulator(str(tmp_path / "tensorboard"))
    running.Reload()
    assert [e.step for e in running.Scalars("eval/mean")] == [100, 210]
    clock.t = 5.0
    second = TensorBoardLog(str(tmp_path), resume=saved, clock=clock, resumed_at=100)
    second.scalars(150, {"train/loss": 1.5})
    second.close()
    running.Reload()
    assert [(e.step, e.value) for e in running.Scalars("train/loss")] == [(100, 1.0),
                                                                          (150, 1.5)]
    assert [e.step for e in running.Scalars("eval/mean")] == [100]
    fresh = EventAccumulator(str(tmp_path / "tensorboard"))
    fresh.Reload()
    assert [e.step for e in fresh.Scalars("train/loss")] == [100, 150]
    assert [e.step for e in fresh.Scalars("eval/mean")] == [100]


@pytest.mark.faults
def test_a_resume_cuts_the_events_back_to_its_checkpoint(tmp_path):
    """Each step once after any stop: the session that died after the checkpoint wrote more
    to its file (cut back) and a later session's file (removed) never reached one."""
    from fast_dqn.run.logs.tensorboard_log import TensorBoardLog
    clock = FakeClock()
    first = TensorBoardLog(str(tmp_path), clock=clock)
    first.scalars(100, {"train/loss": 1.0})
    saved = first.state_dict()                    # the checkpoint of step 100
    first.scalars(200, {"train/loss": 2.0})       # then kill -9: never closed
    clock.t = 5.0
    second = TensorBoardLog(str(tmp_path), clock=clock)  # a resume of step 100 ...
    second.scalars(150, {"train/loss": 1.5})             # ... that died before a checkpoint
    assert len(saved["files"]) == 1 and len(os.listdir(tmp_path / "tensorboard")) == 2
    clock.t = 9.0
    third = TensorBoardLog(str(tmp_path), resume=saved, clock=clock)
    third.scalars(200, {"train/loss": 2.5})
    assert third.state_dict()["files"].keys() == {*saved["files"],
                                                  os.path.basename(third.file_name)}
    third.close()
    assert read_scalars(tmp_path) == {"train/loss": [(100, 1.0), (200, 2.5)]}


def test_a_terminal_gets_a_bar_and_a_pipe_gets_lines():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(make_console(100, out=io.StringIO()), ProgressLines)
    tty = Tty()
    bar = make_console(100, initial=10, out=tty)
    assert isinstance(bar, ProgressBar)
    bar.update(50, 10.0, {"eps": "0.500", "mean100": "-20.00"})
    bar.close()
    text = tty.getvalue()
    assert "50.0/100" in text and "eps 0.500" in text and "mean100 -20.00" in text


def test_human_normalized_score():
    assert human_normalized("pong", 14.6) == pytest.approx(1.0)
    assert human_normalized("pong", -20.7) == pytest.approx(0.0)
    assert human_normalized("breakout", 1.7 + 28.8 / 2) == pytest.approx(0.5)
    assert human_normalized("not_a_game", 1.0) is None
    assert len(SCORES) == 57


@pytest.mark.slow  # a real run
def test_a_real_run_writes_tensorboard_events(tiny_pong_run):
    scalars = read_scalars(tiny_pong_run)
    assert len(scalars["train/episode_return"]) >= 5
    assert [step for step, _ in scalars["eval/mean"]] == [800, 1600]


@pytest.mark.slow  # a real run
def test_evaluate_prints_scores_and_writes_a_playable_mp4(tiny_pong_run, tmp_path):
    import cv2
    video = tmp_path / "agent.mp4"
    result = subprocess.run(
        [sys.executable, "-m", "fast_dqn.tools.evaluate", str(tiny_pong_run), "--episodes=2",
         "--epsilon=0.05", f"--video={video}"],
        capture_output=True, text=True, timeout=hang_guard(300), cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "over 2 games; human-normalized" in result.stdout
    assert "step-000000001600" in result.stdout  # the latest checkpoint
    capture = cv2.VideoCapture(str(video))
    frames = 0
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames += 1
        assert frame.shape == (210, 160, 3)  # the ALE's native screen
    assert capture.get(cv2.CAP_PROP_FPS) == 60
    head = video.read_bytes()[:4096]  # the index first (faststart), for browsers
    assert b"moov" in head and b"avc1" in head  # H.264: what browsers and VS Code play
    # The run cuts games at 300 agent steps of 4 frames, after 0..30 no-op frames and FIRE.
    assert 1200 <= frames <= 1200 + 30 + 8
    again = subprocess.run([sys.executable, "-m", "fast_dqn.tools.evaluate", str(tiny_pong_run),
                            f"--video={video}"], capture_output=True, text=True, cwd=ROOT,
                           timeout=hang_guard(300))
    assert again.returncode == 2 and "would be overwritten" in again.stderr


@pytest.mark.slow  # a real run
def test_evaluate_best_plays_the_best_evaluations_weights(tiny_pong_run, capsys):
    from helpers import rows

    from fast_dqn.run.storage.best_weights import best_store
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    from fast_dqn.tools.evaluate import main
    evaluations = [(int(row["agent_step"]), float(row["mean"]))
                   for row in rows(tiny_pong_run / "eval.csv")]
    best_step, best_mean = max(evaluations, key=lambda e: (e[1], -e[0]))  # the first best
    best = best_store(str(tiny_pong_run)).latest()
    assert best.step == best_step and best.load_state()["mean"] == best_mean
    checkpoint = CheckpointStore(str(tiny_pong_run)).latest().load_state()
    assert checkpoint["best"]["step"] == best_step
    for saved, exported in zip(checkpoint["best"]["weights"], best.load_state()["weights"]):
        np.testing.assert_array_equal(saved, exported)
    assert main([str(tiny_pong_run), "--best", "--episodes=1"]) == 0
    out = capsys.readouterr().out
    assert f"(the best evaluation: agent step {best_step:,}, mean {best_mean:.2f})" in out
    assert "1 game at epsilon 0.05 (the run's --eval-epsilon)" in out


def test_evaluate_acts_with_the_runs_evaluation_epsilon_unless_told_otherwise():
    """A CartPole run evaluates at 0: evaluate replays that, where it once used 0.05."""
    from fast_dqn.run.settings.hyperparameters import Config
    from fast_dqn.tools.evaluate import build_parser, evaluation_epsilon
    assert build_parser().parse_args(["run"]).epsilon is None
    assert evaluation_epsilon(None, Config(eval_epsilon=0.0)) == (0.0, "the run's "
                                                                   "--eval-epsilon")
    assert evaluation_epsilon(None, Config()) == (0.05, "the run's --eval-epsilon")
    assert evaluation_epsilon(0.2, Config(eval_epsilon=0.0)) == (0.2, "--epsilon")


def test_evaluate_best_of_a_run_without_evaluations_is_one_line(tmp_path, capsys):
    from fast_dqn.run.storage.run_directory import create_run_directory
    from fast_dqn.tools.evaluate import main
    create_run_directory(str(tmp_path / "run"), {"loop": "dqn", "game": "pong"})
    assert main([str(tmp_path / "run"), "--best"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m fast_dqn.tools.evaluate: error: --best: ") and \
        "has no best evaluation yet" in err and len(err.splitlines()) == 1


def test_evaluate_refuses_a_directory_that_is_not_a_run(tmp_path):
    from fast_dqn.tools.evaluate import main
    assert main([str(tmp_path)]) == 2


@pytest.mark.slow  # a real run
def test_plot_writes_a_png(tiny_pong_run, tmp_path):
    import cv2

    from fast_dqn.tools.plot import main
    output = tmp_path / "curves.png"
    assert main([str(tiny_pong_run), str(tiny_pong_run), "-o", str(output)]) == 0
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = cv2.imread(str(output))
    assert image.shape[0] > 500 and image.shape[1] > 800
    assert np.std(image) > 10  # lines and labels were drawn, not a blank canvas
    assert main([str(tmp_path), "-o", str(output)]) == 2  # not a run


@pytest.mark.parametrize("module", ["fast_dqn.tools.evaluate", "fast_dqn.evaluate",
                                    "fast_dqn.tools.plot", "fast_dqn.plot"])
def test_the_tools_answer_by_their_new_and_their_old_names(module):
    result = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                            text=True, timeout=hang_guard(120), cwd=ROOT)
    assert result.returncode == 0 and "RUN_DIR" in result.stdout, result.stderr


def test_a_plot_names_its_games_and_labels_every_axis(tmp_path):
    import json

    from fast_dqn.tools.plot import make_figure
    runs = []
    for name, game in (("a", "pong"), ("b", "breakout"), ("c", "pong")):
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "config.json").write_text(json.dumps({"loop": "fast", "game": game}))
        (run_dir / "episodes.csv").write_text("agent_step,mean_100,hours\n10,1.0,0.1\n")
        runs.append(str(run_dir))
    (tmp_path / "b" / "eval.csv").write_text("agent_step,mean,hours\n10,2.0,0.1\n")
    fig, plt = make_figure(runs)
    try:
        assert fig.get_suptitle() == "pong, breakout"
        assert [ax.get_xlabel() for ax in fig.axes] == ["agent steps", "wall-clock hours"] * 2
        assert fig.axes[2].get_ylabel() == "evaluation mean return"
    finally:
        plt.close(fig)
    # Runs that never evaluated (--evaluate 0, as benchmarks.learning runs them) get the
    # training row only, alone or aggregated, instead of two empty panels.
    for aggregate in (False, True):
        fig, plt = make_figure([runs[0], runs[2]], title="mine", aggregate=aggregate)
        try:
            assert fig.get_suptitle() == "mine"
            assert [ax.get_xlabel() for ax in fig.axes] == ["agent steps", "wall-clock hours"]
            assert all(ax.lines for ax in fig.axes)
        finally:
            plt.close(fig)


def test_plot_skips_a_row_that_is_not_numbers_and_names_its_line(tmp_path):
    """A line appended by hand, and one the run is halfway through writing: the plot draws
    the rows that are numbers, and one warning names the file and the line."""
    import json
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({"loop": "fast", "game": "pong"}))
    (run_dir / "episodes.csv").write_text(
        "episode,agent_step,length,return,mean_100,epsilon,hours\n"
        "1,100,100,-21.0,-21.0,1.0,0.01\noops,not,a,number,,,\n2,200,100,-20.0,-20.5,1.0,0.02\n"
        "3,30")
    result = subprocess.run([sys.executable, "-m", "fast_dqn.tools.plot", str(run_dir), "-o",
                             str(tmp_path / "c.png")], capture_output=True, text=True,
                            timeout=hang_guard(120), cwd=ROOT)
    assert result.returncode == 0 and (tmp_path / "c.png").stat().st_size > 1000
    assert result.stderr.strip().splitlines() == [
        f"warning: {run_dir / 'episodes.csv'}, line 3: not a row of numbers; skipped (remove "
        "the line to silence this)"]
    from fast_dqn.tools.plot import training_curve
    assert training_curve(str(run_dir)) == {"agent_step": [100.0, 200.0],
                                            "hours": [0.01, 0.02], "mean": [-21.0, -20.5]}


def test_evaluate_reads_the_newer_checkpoint_when_a_training_run_prunes_the_one_it_chose(
        tmp_path, monkeypatch):
    """Beside a run that checkpoints every 100 steps, the newest checkpoint when evaluate
    looked can be pruned before it is read: it reads the one that replaced it."""
    import shutil

    from fast_dqn.run.storage.checkpoint import Checkpoint, CheckpointStore
    from fast_dqn.tools import evaluate
    store = CheckpointStore(str(tmp_path))
    store.save(100, {"learner": "at 100"})
    real_load = Checkpoint.load_state
    pruned = []

    # The states here are stand-ins: read without evaluate's schema.
    def load_while_training(checkpoint, schema=None):
        if not pruned:  # the training run saves step 200 and prunes step 100 meanwhile
            pruned.append(checkpoint.step)
            store.save(200, {"learner": "at 200"})
            shutil.rmtree(checkpoint.path)
        return real_load(checkpoint)

    monkeypatch.setattr(Checkpoint, "load_state", load_while_training)
    checkpoint, state = evaluate._newest_checkpoint(str(tmp_path), warn=print)
    assert pruned == [100] and checkpoint.step == 200 and state == {"learner": "at 200"}
    # Replaced again and again: one line, not a traceback.

    def always_replaced(checkpoint, schema=None):
        store.save(checkpoint.step + 100, {"learner": "newer"})
        shutil.rmtree(checkpoint.path)
        return real_load(checkpoint)

    monkeypatch.setattr(Checkpoint, "load_state", always_replaced)
    with pytest.raises(evaluate.ConfigError, match="were replaced 5 times while being read"):
        evaluate._newest_checkpoint(str(tmp_path), warn=print)


def test_two_videos_to_one_new_path_never_overwrite_each_other(tmp_path):
    """Two evaluations given one new --video path: the first to finish takes it, the other
    is kept beside it, and no temporary is left; a stopped one leaves nothing."""
    from fast_dqn.tools.evaluate import FirstGameRecorder
    path = str(tmp_path / "agent.mp4")
    first, second = FirstGameRecorder(path, 60), FirstGameRecorder(path, 60)
    for shade in range(4):
        first.add(np.full((210, 160, 3), 40 * shade, np.uint8))
        second.add(np.full((210, 160, 3), 200 - 40 * shade, np.uint8))
    assert second.publish() == path
    assert first.publish() == str(tmp_path / "agent-2.mp4")
    assert sorted(os.listdir(tmp_path)) == ["agent-2.mp4", "agent.mp4"]
    assert (tmp_path / "agent.mp4").read_bytes() != (tmp_path / "agent-2.mp4").read_bytes()
    stopped = FirstGameRecorder(str(tmp_path / "stopped.mp4"), 60)
    stopped.add(np.zeros((210, 160, 3), np.uint8))
    stopped.discard()
    assert sorted(os.listdir(tmp_path)) == ["agent-2.mp4", "agent.mp4"]


def test_best_weights_of_another_network_are_named_not_a_shape_error(tmp_path, capsys):
    """best/ copied from a run of another env: one line, where Keras raised a shape error."""
    from helpers import TINY_CARTPOLE

    from fast_dqn.run.settings.hyperparameters import Config
    from fast_dqn.run.settings.validation import resolve
    from fast_dqn.run.storage.best_weights import best_store
    from fast_dqn.run.storage.run_directory import create_run_directory
    from fast_dqn.tools.evaluate import main
    run_dir = str(tmp_path / "run")
    config = resolve(Config(**{**TINY_CARTPOLE, "preset": "classic", "logdir": run_dir}))
    create_run_directory(run_dir, {"loop": "dqn", **config.to_dict()}).release()
    best_store(run_dir).save(100, {"mean": 9.0, "weights": [np.ones((8, 256)), np.ones(256)]})
    assert main([run_dir, "--best", "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "best/ holds weights of another network (2 arrays, the first [(8, 256)]" in err


def test_a_video_path_that_cannot_be_written_is_one_line_before_ffmpeg_starts(tmp_path):
    """/proc takes no new file, not even from root (a chmod'ed directory would not stop the
    root that CI may run as)."""
    from fast_dqn.errors import ConfigError
    from fast_dqn.tools.evaluate import _check_video_path
    with pytest.raises(ConfigError, match="cannot write in '/proc'") as error:
        _check_video_path("/proc/pong.mp4")
    assert error.value.setting == "video"
    with pytest.raises(ConfigError, match="does not exist"):
        _check_video_path(str(tmp_path / "missing" / "pong.mp4"))
    (tmp_path / "taken.mp4").write_bytes(b"x")
    with pytest.raises(ConfigError, match="exists and would be overwritten"):
        _check_video_path(str(tmp_path / "taken.mp4"))
    _check_video_path(str(tmp_path / "new.mp4"))  # a free path in a writable directory


def test_plot_of_runs_without_a_finished_game_says_so_instead_of_empty_panels(tmp_path,
                                                                              capsys):
    import json

    from fast_dqn.tools.plot import main
    runs = {}
    for name, rows in (("empty", ""), ("one", "1000,-21.0,-21.0,0.01\n")):
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "config.json").write_text(json.dumps({"loop": "fast", "game": "pong"}))
        (run_dir / "episodes.csv").write_text("agent_step,return,mean_100,hours\n" + rows)
        runs[name] = str(run_dir)
    output = tmp_path / "c.png"
    assert main([runs["empty"], "-o", str(output)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no finished game and no evaluation yet" in err
    assert not output.exists()
    # Beside a run that has a game, the empty one is named and left out; the one game is a
    # marked point, not a line of one point that draws nothing.
    assert main([runs["empty"], runs["one"], "-o", str(output)]) == 0
    captured = capsys.readouterr()
    assert f"'{runs['empty']}' is left out" in captured.err and output.exists()
    from fast_dqn.tools.plot import make_figure
    fig, plt = make_figure([runs["one"]])
    try:
        assert fig.axes[0].lines[0].get_marker() == "o"
    finally:
        plt.close(fig)


def test_raw_scores_get_no_optimality_gap(capsys):
    """The gap is the shortfall from human level: scores of a game without human reference
    scores (CartPole) have none, and a 0.000 there would read as 'at human level'."""
    from fast_dqn.tools.plot import print_aggregates
    stats = {"IQM": (1.0, 0.5, 1.5), "optimality gap": (0.0, 0.0, 0.0), "mean": (2, 1, 3)}
    print_aggregates([("CartPole-v1 dqn", 3, 1, False, 5000, stats),
                      ("pong fast", 3, 1, True, 5000, stats)])
    raw, normalized = capsys.readouterr().out.splitlines()[2:]
    assert "n/a (raw scores)" in raw and "0.000 [0.000, 0.000]" not in raw
    assert "| 0.000 [0.000, 0.000] |" in normalized
