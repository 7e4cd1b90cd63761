"""TensorBoard scalars, the progress display, `python -m fast_dqn.tools.evaluate` and `.plot`."""

import glob
import io
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, TINY, FakeClock, run

from fast_dqn.run.monitor import Monitor
from fast_dqn.run.progress import ProgressBar, ProgressLines, make_console
from fast_dqn.tools.atari_scores import SCORES, human_normalized


def read_scalars(logdir):
    """{tag: [(step, value), ...]} from every event file under logdir/tensorboard."""
    import tensorflow as tf
    found = {}
    for path in sorted(glob.glob(str(logdir / "tensorboard" / "events.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                found.setdefault(value.tag, []).append(
                    (event.step, float(tf.make_ndarray(value.tensor))))
    return found


def test_tensorboard_gets_every_scalar(tmp_path):
    from fast_dqn.run.tensorboard_log import TensorBoardLog
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
    assert "50.0/100" in text and "eps=0.500" in text and "mean100=-20.00" in text


def test_human_normalized_score():
    assert human_normalized("pong", 14.6) == pytest.approx(1.0)
    assert human_normalized("pong", -20.7) == pytest.approx(0.0)
    assert human_normalized("breakout", 1.7 + 28.8 / 2) == pytest.approx(0.5)
    assert human_normalized("not_a_game", 1.0) is None
    assert len(SCORES) == 57


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("runs") / "pong"
    result = run("run_dqn.py", TINY + ["--seed=1", f"--logdir={logdir}"])
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir


@pytest.mark.slow  # a real run
def test_a_real_run_writes_tensorboard_events(trained_run):
    scalars = read_scalars(trained_run)
    assert len(scalars["train/episode_return"]) >= 5
    assert [step for step, _ in scalars["eval/mean"]] == [800, 1600]


@pytest.mark.slow  # a real run
def test_evaluate_prints_scores_and_writes_a_playable_mp4(trained_run, tmp_path):
    import cv2
    video = tmp_path / "agent.mp4"
    result = subprocess.run(
        [sys.executable, "-m", "fast_dqn.tools.evaluate", str(trained_run), "--episodes=2",
         "--epsilon=0.05", f"--video={video}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
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
    # The run cuts games at 300 agent steps of 4 frames, after 0..30 no-op frames and FIRE.
    assert 1200 <= frames <= 1200 + 30 + 8
    again = subprocess.run([sys.executable, "-m", "fast_dqn.tools.evaluate", str(trained_run),
                            f"--video={video}"], capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
    assert again.returncode == 2 and "would be overwritten" in again.stderr


def test_evaluate_refuses_a_directory_that_is_not_a_run(tmp_path):
    from fast_dqn.tools.evaluate import main
    assert main([str(tmp_path)]) == 2


@pytest.mark.slow  # a real run
def test_plot_writes_a_png(trained_run, tmp_path):
    import cv2

    from fast_dqn.tools.plot import main
    output = tmp_path / "curves.png"
    assert main([str(trained_run), str(trained_run), "-o", str(output)]) == 0
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = cv2.imread(str(output))
    assert image.shape[0] > 500 and image.shape[1] > 800
    assert np.std(image) > 10  # lines and labels were drawn, not a blank canvas
    assert main([str(tmp_path), "-o", str(output)]) == 2  # not a run


@pytest.mark.parametrize("module", ["fast_dqn.tools.evaluate", "fast_dqn.evaluate",
                                    "fast_dqn.tools.plot", "fast_dqn.plot"])
def test_the_tools_answer_by_their_new_and_their_old_names(module):
    result = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0 and "RUN_DIR" in result.stdout, result.stderr
