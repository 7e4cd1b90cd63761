"""The console's phase and ETA (fast_dqn.run.logs.progress), on a fake clock: each phase's work
left at that phase's own measured rate."""

import io
import os
import re

import pytest
from helpers import FakeClock

from fast_dqn.loops.minibatch_schedule import MinibatchSchedule
from fast_dqn.run.logs.monitor import Monitor
from fast_dqn.run.logs.progress import ProgressBar, ProgressLines, RunProgress


def test_warm_up_promises_nothing_it_has_not_measured():
    """Warm-up acts 20 times faster than training: its rate must not stand for training's."""
    progress = RunProgress(10_000, train_freq=4, prepopulate=2_000)
    progress.follow(MinibatchSchedule(train_start=2_000, train_freq=4))
    progress.sample(0.0, 0)
    progress.sample(1.0, 1_000)                      # warm-up at 1,000 steps/s
    assert progress.phase(1_000) == "warm-up"
    assert progress.eta(1_000) is None               # training's rate is not known yet
    progress.sample(2.0, 2_000)
    progress.trained(0)
    progress.sample(3.0, 2_200)                      # training: 50 minibatches in 1 s
    progress.trained(50)
    progress.sample(4.0, 2_400)
    assert progress.phase(2_400) == "training"
    left = (10_000 - 2_000) // 4 - 50
    assert progress.eta(2_400) == pytest.approx(left / 50)


def test_a_resume_without_replay_refills_catches_up_and_trains_its_last_minibatches():
    progress = RunProgress(4_000, train_freq=4, prepopulate=1_000)
    schedule = MinibatchSchedule(train_start=1_000, train_freq=4)
    schedule.refill(3_000, prepopulate=500, owed=30)   # resumed at 3,000 with 30 owed
    progress.follow(schedule)
    progress.minibatches_done = (3_000 - 1_000) // 4 - 30  # what the optimizer counted
    progress.sample(0.0, 3_000)
    progress.sample(1.0, 3_200)                      # refill at 200 steps/s
    assert progress.phase(3_200) == "refill"
    assert progress.eta(3_200) is None               # no minibatch rate yet
    progress.sample(3.0, 3_500)
    schedule.take(3_500, 3_600, final=False)         # the first minibatches after the refill
    progress.sample(3.5, 3_520)
    progress.trained(20)
    progress.sample(4.5, 3_600)                      # 20 minibatches/s
    assert progress.phase(3_600) == "catching up"    # deferred ones still being repaid
    left = progress.minibatches_total - progress.minibatches_done
    assert progress.eta(3_600) == pytest.approx(left / 20)
    # The last step, with minibatches still training: not 100% and ETA 0, but how long.
    schedule.deferred = 0
    progress.minibatches_done = progress.minibatches_total - 40
    assert progress.phase(4_000) == "last minibatches" and progress.eta(4_000) == pytest.approx(2)
    progress.trained(40)
    assert progress.phase(4_000) == "training" and progress.eta(4_000) == 0


def test_a_refill_that_runs_to_the_last_step_then_catches_up_there():
    """A resume whose extension is no longer than --prepopulate refills to its last step and
    trains every minibatch there: its last minibatches, timed at the minibatches' own rate."""
    progress = RunProgress(5_000, train_freq=4, prepopulate=1_000)
    schedule = MinibatchSchedule(train_start=1_000, train_freq=4)
    schedule.refill(4_000, prepopulate=1_000)        # resumed at 4,000, --timesteps 5,000
    progress.follow(schedule)
    progress.minibatches_done = (4_000 - 1_000) // 4
    progress.sample(0.0, 4_000)
    progress.sample(1.0, 4_500)
    assert progress.phase(4_500) == "refill"
    progress.sample(2.0, 5_000)                      # the last step: 250 minibatches to go
    assert progress.phase(5_000) == "last minibatches" and progress.eta(5_000) is None
    progress.trained(100)
    progress.sample(3.0, 5_000)                      # 100 minibatches/s
    assert progress.phase(5_000) == "last minibatches"
    assert progress.eta(5_000) == pytest.approx(150 / 100)
    progress.trained(150)
    assert progress.phase(5_000) == "training" and progress.eta(5_000) == 0


def test_an_evaluation_says_which_game_and_adds_the_evaluations_left():
    progress = RunProgress(1_000, train_freq=4, prepopulate=0, eval_every=250, eval_games=3)
    progress.follow(MinibatchSchedule(train_start=0, train_freq=4))
    progress.sample(1.0, 100)
    progress.trained(25)
    progress.sample(2.0, 250)                        # 25 minibatches/s
    progress.trained(25)
    progress.evaluation_game(2.0, 1, 3)
    assert progress.phase(250) == "evaluating game 1 of 3"
    assert progress.eta(250) is None                 # seconds per game not measured yet
    progress.evaluation_game(12.0, 2, 3)             # 10 s per game
    assert progress.phase(250) == "evaluating game 2 of 3"
    minibatches = progress.minibatches_total - 50
    # The current evaluation's 2 games left, then 3 evaluations of 3 games (500, 750, 1000).
    assert progress.eta(250) == pytest.approx(minibatches / 25 + (2 + 9) * 10)
    progress.evaluation_game(22.0, 3, 3)
    progress.evaluation_game(32.0, 4, 3)             # over
    assert progress.phase(250) == "training" and progress.evaluating is None
    progress.sample(33.0, 260)                       # the evaluation's time is not training's
    assert progress.minibatch_rate.value == 25


def test_the_training_eta_shows_before_any_evaluation_game_is_timed(tmp_path):
    """With the defaults the first evaluation game is timed after 250k agent steps: until
    then the ETA gives what is measured, and the evaluation games apart."""
    progress = RunProgress(10_000, train_freq=4, prepopulate=0, eval_every=2_500,
                           eval_games=30)
    progress.follow(MinibatchSchedule(train_start=0, train_freq=4))
    progress.sample(0.0, 100)
    progress.trained(25)
    progress.sample(1.0, 200)                        # 25 minibatches/s
    seconds, untimed = progress.estimate(200)
    assert seconds == pytest.approx((2_500 - 25) / 25) and untimed == 4 * 30
    assert progress.eta(200) is None                 # the whole, as before: not known
    clock, out = FakeClock(), io.StringIO()
    monitor = Monitor(str(tmp_path), 10_000, interval=10, clock=clock, progress=progress,
                      console=ProgressLines(10_000, out=out, interval=10))
    try:
        progress.trained(225)
        clock.t = 10.0
        monitor.tick(200, 1.0)                       # 25 minibatches/s still; 2,250 left
    finally:
        monitor.close()
    assert out.getvalue().splitlines()[0].endswith("| ETA 1m30s + 120 eval games")
    progress.evaluation_game(100.0, 1, 30)
    progress.evaluation_game(110.0, 2, 30)           # 10 s per game: now all of it is known
    assert progress.estimate(200) == (pytest.approx(90 + (29 + 4 * 30) * 10), 0)


def test_an_evaluation_between_every_two_lines_still_lets_the_eta_be_measured(tmp_path):
    """CartPole evaluates every 5k steps, about every 10 s: as often as the status lines.
    Training's rate is measured from each evaluation's end, so the ETA becomes known."""
    clock, out = FakeClock(), io.StringIO()
    progress = RunProgress(10_000, train_freq=4, prepopulate=0, eval_every=1_000,
                           eval_games=2)
    progress.follow(MinibatchSchedule(train_start=0, train_freq=4))
    monitor = Monitor(str(tmp_path), 10_000, interval=10, clock=clock, progress=progress,
                      console=ProgressLines(10_000, out=out, interval=10))
    step = 0
    try:
        while step < 5_000:
            for _ in range(100):                     # 1,000 steps in 10 s, 25 minibatches/s
                clock.t += 0.1
                step += 10
                progress.trained(2 if step % 40 == 0 else 0)
                progress.trained(1 if step % 40 == 20 else 0)
                monitor.tick(step, 0.1)
            for game in (1, 2, 3):                   # then an evaluation: 2 games of 1 s
                monitor.evaluation_game(game, 2)
                clock.t += 1.0 if game < 3 else 0.0
    finally:
        monitor.close()
    etas = [line.rsplit("ETA ", 1)[1] for line in out.getvalue().splitlines()
            if "| training |" in line]
    assert len(etas) >= 4 and "?" not in etas[1:], etas


def test_an_evaluation_during_a_refill_is_still_counted():
    progress = RunProgress(10_000, train_freq=4, prepopulate=1_000, eval_every=5_000,
                           eval_games=2)
    schedule = MinibatchSchedule(train_start=1_000, train_freq=4)
    schedule.refill(4_000, prepopulate=1_500)        # refilling across the evaluation at 5k
    progress.follow(schedule)
    progress.minibatches_done = (4_000 - 1_000) // 4
    progress.sample(0.0, 4_000)
    progress.sample(1.0, 4_100)
    _, untimed = progress.estimate(4_100)
    assert untimed == 2 * 2                          # at 5,000 and at 10,000


def test_the_console_line_names_the_phase_and_shows_no_nan(tmp_path):
    clock, out = FakeClock(), io.StringIO()
    progress = RunProgress(1_000, train_freq=4, prepopulate=500)
    monitor = Monitor(str(tmp_path), 1_000, interval=10, clock=clock, progress=progress,
                      console=ProgressLines(1_000, out=out, interval=10))
    try:
        monitor.follow(MinibatchSchedule(train_start=500, train_freq=4))
        monitor.tick(0, 1.0)                     # the rate counts from the first tick
        clock.t = 10.0
        monitor.tick(200, 1.0)
        monitor.evaluation_game(1, 30)
    finally:
        monitor.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("step 200/1,000 (20.0%) | warm-up | 20 steps/s | eps 1.000 | "
                               "games 0 | mean100 - | loss - | ETA ?")
    assert lines[1] == ("step 200/1,000 (20.0%) | evaluating game 1 of 30 | games 0 | "
                        "mean100 - | loss - | ETA ?")


def test_the_bar_ends_at_the_step_the_run_ended():
    out = io.StringIO()
    bar = ProgressBar(1_000, out=out)
    bar.update(990, 10.0, {"eps": "0.1"}, phase="training", eta=1.0)
    bar.close(1_000)
    text = out.getvalue()
    assert "1.00k/1.00k" in text and "training" in text and "ETA 0m01s" in text


def test_the_bar_shows_a_new_phase_even_when_no_step_was_played():
    """An evaluation plays no agent step; tqdm redraws only when steps are added."""
    out = io.StringIO()
    bar = ProgressBar(1_000, out=out)
    for step in (100, 200, 300):
        bar.update(step, 10.0, {"eps": "0.1"}, phase="training", eta=70.0)
    bar.update(300, None, {}, phase="evaluating game 1 of 30", eta=None)
    last = out.getvalue().rsplit("\r", 1)[1]
    assert "ETA ?, evaluating game 1 of 30" in last and "steps/s" not in last
    bar.close()


def test_a_phase_not_measured_makes_the_eta_unknown_not_shorter():
    progress = RunProgress(10_000, train_freq=4, prepopulate=2_000)
    progress.follow(MinibatchSchedule(train_start=2_000, train_freq=4))
    progress.sample(0.0, 2_200)
    progress.trained(50)
    progress.sample(1.0, 2_400)                      # training measured, warm-up never
    assert progress.eta(2_400) is not None and progress.eta(1_000) is None


def test_the_steps_per_second_after_an_evaluation_leave_its_time_out(tmp_path):
    clock, out = FakeClock(), io.StringIO()
    monitor = Monitor(str(tmp_path), 10_000, interval=10, clock=clock,
                      progress=RunProgress(10_000, train_freq=4, prepopulate=0),
                      console=ProgressLines(10_000, out=out, interval=10))
    try:
        clock.t = 10.0
        monitor.tick(1_000, 0.5)                 # 100 steps/s
        monitor.evaluation_game(1, 2)
        clock.t = 70.0
        monitor.evaluation_game(3, 2)            # a minute of evaluation
        clock.t = 80.0
        monitor.tick(2_000, 0.5)                 # 1,000 steps in the 10 s since
    finally:
        monitor.close()
    assert "| 100 steps/s |" in out.getvalue().splitlines()[-1]


def fast_loop_console(tmp_path, periods, total, eval_at=None, warm_up=0):
    """The console of a fast-loop-like run on a fake clock: each 20 s period, the samplers
    play 2,000 steps in its first 2 s (ticks every 0.5 s), then wait 18 s for the trainer
    (ticks go on); the trainer trains 25 minibatches/s throughout, so the run makes 100 agent
    steps/s. An evaluation of 100 s at the end of period `eval_at`. Before them, `warm_up`
    periods of warm-up: 2,000 steps in 2 s each, nothing trained. Returns (time, line)."""
    clock, out = FakeClock(), io.StringIO()
    prepopulate = 2_000 * warm_up
    progress = RunProgress(total, train_freq=4, prepopulate=prepopulate)
    progress.follow(MinibatchSchedule(train_start=prepopulate, train_freq=4))
    monitor = Monitor(str(tmp_path), total, interval=10, clock=clock, progress=progress,
                      console=ProgressLines(total, out=out, interval=10))
    shown, step, evaluated = [], 0, 0.0
    try:
        for _ in range(warm_up):
            for tick in range(4):
                clock.t += 0.5
                step += 500
                before = len(out.getvalue().splitlines())
                monitor.tick(step, 1.0)
                lines = out.getvalue().splitlines()
                if len(lines) > before:
                    shown.append((clock.t, lines[-1]))
            monitor.sync_point(step)
        evaluated = clock.t  # the training periods' clock starts after the warm-up
        for period in range(periods):
            for tick in range(40):                   # 20 s in ticks of 0.5 s
                clock.t = evaluated + period * 20 + (tick + 1) * 0.5
                progress.trained(12 if tick % 2 else 13)   # 25 a second
                step += 500 if tick < 4 else 0
                before = len(out.getvalue().splitlines())
                monitor.tick(step, 0.5)
                lines = out.getvalue().splitlines()
                if len(lines) > before:
                    shown.append((clock.t - evaluated, lines[-1]))
            monitor.sync_point(step)
            if period == eval_at:
                monitor.evaluation_game(1, 1)
                clock.t += 100
                evaluated += 100
                monitor.evaluation_game(2, 1)
    finally:
        monitor.close()
    return shown


def test_the_fast_loops_steps_per_second_is_its_rate_over_whole_periods(tmp_path):
    """In bursts of 1,000 steps/s and waits of 0 the run makes 100: the console says 100
    once two period ends are known, and its ETA is the time left, within 5%."""
    total = 20 * 2_000
    shown = fast_loop_console(tmp_path, periods=12, total=total)
    assert len(shown) > 20
    for t, line in shown:
        rate = int(line.split(" steps/s")[0].rsplit("| ", 1)[1].replace(",", ""))
        if t > 40:
            assert rate == 100, line
        if t > 20:
            minutes, seconds = line.rsplit("ETA ", 1)[1].rstrip("s").split("m")
            left = total / 100 - t
            assert abs(int(minutes) * 60 + int(seconds) - left) <= 0.05 * left, line


def test_just_past_the_warm_up_the_line_shows_trainings_rate_not_the_warm_ups(tmp_path):
    """The warm-up plays 1,000 steps/s; training 100. A line that names training never
    shows the warm-up's rate: none until a training period has ended, then 100."""
    shown = fast_loop_console(tmp_path, periods=6, total=20 * 2_000 + 30 * 2_000,
                              warm_up=30)
    warm = [line for t, line in shown if "warm-up" in line]
    training = [line for t, line in shown if "| training |" in line]
    assert warm and all("| 1,000 steps/s |" in line for line in warm[1:])
    assert len(training) >= 10
    rates = [line.split(" steps/s")[0].rsplit("| ", 1)[1] for line in training
             if "steps/s" in line]
    assert set(rates) == {"100"}, training
    assert "steps/s" not in training[0]  # the first training period has not ended yet
    assert all("steps/s" in line for line in training[2:])


def test_the_nature_loops_line_past_the_warm_up_shows_trainings_rate(tmp_path):
    """The Nature loop's steps are even: from the first line in training, its rate."""
    clock, out = FakeClock(), io.StringIO()
    progress = RunProgress(100_000, train_freq=4, prepopulate=20_000)
    progress.follow(MinibatchSchedule(train_start=20_000, train_freq=4))
    monitor = Monitor(str(tmp_path), 100_000, interval=10, clock=clock, progress=progress,
                      console=ProgressLines(100_000, out=out, interval=10))
    step = 0
    try:
        while step < 30_000:
            clock.t += 0.1
            step += 100 if step < 20_000 else 10   # 1,000 steps/s, then 100
            monitor.tick(step, 1.0)
    finally:
        monitor.close()
    training = [line for line in out.getvalue().splitlines() if "| training |" in line]
    assert len(training) >= 8
    assert all("| 100 steps/s |" in line for line in training[1:]), training
    assert "steps/s" not in training[0] or "| 100 steps/s |" in training[0]


def test_an_evaluation_between_periods_leaves_the_rate_alone(tmp_path):
    shown = fast_loop_console(tmp_path, periods=8, total=20 * 2_000, eval_at=3)
    rates = [int(line.split(" steps/s")[0].rsplit("| ", 1)[1]) for t, line in shown
             if t > 40 and "steps/s" in line]
    assert rates and set(rates) == {100}


def test_a_resume_at_a_sync_point_does_not_read_zero_steps_per_second(tmp_path):
    """A stop while the samplers wait for the trainer is saved at a sync point; the resumed
    loop reports that sync point before it plays a step. That is no period's end: the rate
    is measured from the first step played, not as 0 for a whole period."""
    clock, out = FakeClock(), io.StringIO()
    monitor = Monitor(str(tmp_path), 100_000, interval=10, clock=clock,
                      console=ProgressLines(100_000, out=out, interval=10))
    try:
        clock.t = 29.0                           # restored; the loop waits for the trainer
        monitor.tick(50_000, 0.1)                # (ticking) at the resumed sync point
        clock.t = 30.0
        monitor.sync_point(50_000)               # which ends no period: no step played
        for tick in range(1, 41):                # then 100 steps/s, steadily
            clock.t = 30.0 + tick
            monitor.tick(50_000 + 100 * tick, 0.1)
    finally:
        monitor.close()
    lines = out.getvalue().splitlines()
    assert "steps/s" not in lines[0]  # the first tick: nothing measured yet
    rates = [int(line.split(" steps/s")[0].rsplit("| ", 1)[1]) for line in lines[1:]]
    # From the wait's first tick: the 2 s before the first step weigh less as time goes on.
    assert len(rates) == 4 and min(rates) >= 85 and rates == sorted(rates) and rates[-1] >= 97


def test_a_finished_run_says_so_with_a_summary_and_no_eta_left(tmp_path):
    clock, out = FakeClock(), io.StringIO()
    # The fast loop's last round ends past the budget, and past an evaluation multiple.
    progress = RunProgress(999, train_freq=4, prepopulate=0, eval_every=500, eval_games=2)
    monitor = Monitor(str(tmp_path), 999, interval=10, clock=clock, progress=progress,
                      console=ProgressLines(999, out=out, interval=10))
    for game, game_return in enumerate((1.0, 3.0), start=1):
        monitor.record_game(400 * game, 400, game_return, 0.5)
    progress.trained(progress.minibatches_total)
    clock.t = 1800.0
    monitor.tick(1_000, 0.1)
    monitor.close(finished=True, best={"step": 500, "mean": 2.5})
    last, summary = out.getvalue().splitlines()[-2:]
    assert "| finished |" in last and last.endswith("ETA 0m00s")
    assert summary == (f"finished: 1,000 agent steps in 30.0 min; 2 games, the last 2 averaging "
                       f"2.00; best evaluation 2.50 at step 500 (its weights: "
                       f"{tmp_path / 'best'})")
    assert progress.evaluations_left(1_000) == 0


def test_a_summary_without_games_or_evaluations(tmp_path):
    clock = FakeClock()
    monitor = Monitor(str(tmp_path), 500, clock=clock, console=ProgressLines(500, out=io.StringIO()))
    clock.t = 7200.0
    assert monitor.summary(None) == ("finished: 0 agent steps in 2.00 h; no game finished; "
                                     "no evaluation")
    monitor.close()


def _seconds(duration):
    """A duration as _format_duration writes it (1m05s, 2h03m, 4d01h), in seconds."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([dhms])", duration))


def train_on_a_terminal(tmp_path, k, total, start, schedule, done, until):
    """The fast loop on a CPU, sampled as a terminal's bar samples it (every 0.5 s): each
    compiled call trains `k` minibatches (or what the schedule gives) in 0.04 s each (25/s),
    and the samplers' steps arrive at the call's end, a period at a time.
    Returns [(time, line)]."""
    clock, out = FakeClock(), io.StringIO()
    progress = RunProgress(total, train_freq=4, prepopulate=0)
    progress.follow(schedule)
    progress.minibatches_done = done
    monitor = Monitor(str(tmp_path), total, interval=0.5, clock=clock, progress=progress,
                      console=ProgressLines(total, out=out, interval=0.5))
    shown, step = [], start

    def tick():
        monitor.tick(step, 0.1)
        lines = out.getvalue().splitlines()
        shown.extend((clock.t, line) for line in lines[len(shown):])

    try:
        tick()
        while step < total and clock.t < until:
            steps = 4 * k if not schedule.deferred else 2 * k  # catching up: 2 per due
            steps = min(steps, total - step)
            count = schedule.take(step, step + steps, final=step + steps == total)
            call_end = clock.t + 0.04 * count
            while clock.t + 0.1 < call_end:  # the samplers wait at the sync point
                clock.t += 0.1
                tick()
            clock.t = call_end
            for _ in range(count):
                monitor.record_train(0.5)
            step += steps
            monitor.sync_point(step)
            tick()
    finally:
        monitor.close()
    return shown


@pytest.mark.parametrize("k", [16, 64])
def test_the_terminals_eta_holds_still_while_training_arrives_in_calls(tmp_path, k):
    """A call of 64 minibatches takes 2.56 s: five of the bar's half-second samples see none
    of it. The ETA is the rate over whole calls, not over one empty sample: within 5% of the
    time truly left on every line, as steady as the plain lines (it swung from minutes to
    thousands of days)."""
    total = 40_000
    shown = train_on_a_terminal(tmp_path, k, total, 0, MinibatchSchedule(0, 4), 0, until=200)
    assert len(shown) > 300
    for t, line in shown:
        if t < 15:
            continue
        step = int(line.split("/", 1)[0].split()[1].replace(",", ""))
        left = (total - step) / 100  # 100 agent steps/s: 25 minibatches/s, 1 per 4 steps
        eta = _seconds(line.rsplit("ETA ", 1)[1])
        assert abs(eta - left) <= 0.05 * left + 0.04 * k, line


@pytest.mark.parametrize("k", [16, 64])
def test_catching_up_says_what_it_does_with_its_own_steady_eta(tmp_path, k):
    """A resume without replay makes up 2,000 minibatches missed during its refill, one with
    each due: the steps go at half the training's pace. The line says so, and the time it
    has left."""
    schedule = MinibatchSchedule(0, 4, deferred=2_000)
    shown = train_on_a_terminal(tmp_path, k, 100_000, 40_000, schedule,
                                done=40_000 // 4 - 2_000, until=230)
    catching = [(t, line) for t, line in shown if "catching up" in line]
    assert len(catching) > 100
    for t, line in catching:
        words = re.search(r"\| catching up(?: \((\S+) left\))? on ([\d,]+) minibatches "
                          r"missed during the refill \|", line)
        assert words, line
        if t < 15:
            continue
        missed = int(words[2].replace(",", ""))
        left = _seconds(words[1])
        assert abs(left - 2 * missed / 25) <= 0.05 * 2 * missed / 25 + 0.04 * k + 1, line
        assert " 50 steps/s" in line, line  # half the training's 100
    assert any(" 100 steps/s" in line for t, line in shown[-5:])  # then training again


def test_the_last_minibatches_show_no_steps_per_second_and_count_in_good_grammar(tmp_path):
    progress = RunProgress(4_000, train_freq=4, prepopulate=0, eval_every=4_000, eval_games=1)
    progress.follow(MinibatchSchedule(0, 4))
    clock, out = FakeClock(), io.StringIO()
    monitor = Monitor(str(tmp_path), 4_000, interval=0.5, clock=clock, progress=progress,
                      console=ProgressLines(4_000, out=out, interval=0.5))
    try:
        monitor.tick(3_000, 0.1)
        for t in range(1, 20):
            clock.t = t
            for _ in range(25):
                monitor.record_train(0.5)
            monitor.tick(3_000 + 100 * t, 0.1)
        progress.minibatches_done = progress.minibatches_total - 1
        clock.t = 21
        monitor.tick(4_000, 0.1)
        monitor.record_eval(4_000, [1.0])
    finally:
        monitor.close()
    lines = out.getvalue().splitlines()
    last = [line for line in lines if "last minibatches" in line][-1]
    assert "| last minibatches: 1 minibatch left |" in last and "steps/s" not in last
    assert "steps/s" in lines[1]
    assert "ETA 0m00s" in last
    assert lines[1].endswith(" + 1 eval game")  # the evaluation at the last step, untimed
    assert lines[-1].endswith("over 1 game")
    from fast_dqn.run.logs.progress import counted
    assert [counted(n, w) for n, w in ((1, "game"), (2, "game"), (1_000, "minibatch"),
                                       (1, "run"))] == [
        "1 game", "2 games", "1,000 minibatches", "1 run"]


# --- the bar on a real terminal

def on_a_terminal(columns, drive):
    """Run `drive(out)` with `out` a pseudo-terminal `columns` wide (0: a size nobody set),
    so that the bar asks the terminal its width as on a user's. Returns what was written."""
    import fcntl
    import struct
    import termios
    import threading
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24 if columns else 0, columns,
                                                       0, 0))
    received, end = bytearray(), b"--end of the test--"

    def read():  # a pseudo-terminal holds a few kB: the writer would block without a reader
        while end not in received:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            received.extend(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out = os.fdopen(slave, "w", encoding="utf-8")
    try:
        drive(out)
        out.write(end.decode())
        out.flush()
        reader.join(30)
    finally:
        out.close()
        os.close(master)
    return received.decode("utf-8", "replace")


def drawn_bar_lines(written):
    """The bar's lines as the terminal drew them: each stretch between carriage returns and
    newlines that starts with a percentage, escape sequences taken out."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", written)
    return [s for s in re.split(r"[\r\n]", text) if re.match(r" *\d+%[ |]", s)]


def a_run_through_every_phase(out, tmp_path):
    """A 10M-step run in two sessions on a fake clock, its console on `out`: warm-up,
    training, an evaluation of 200 games (the games untimed until then), training; then a
    resume without replay: refill, catching up, the last minibatches after the last step, an
    evaluation, finished."""
    from fast_dqn.run.logs.progress import make_console
    total, every, games, prepopulate = 10_000_000, 250_000, 200, 50_000
    clock = FakeClock()

    def session(start, schedule, done, name):
        progress = RunProgress(total, 4, prepopulate, eval_every=every, eval_games=games)
        progress.minibatches_done = done
        os.makedirs(tmp_path / name)
        monitor = Monitor(str(tmp_path / name), total, interval=10, clock=clock,
                          progress=progress, console=make_console(total, start, out=out))
        monitor.follow(schedule)
        return monitor

    def play(monitor, schedule, step, until, per_tick, hold=0):
        """Ticks of 0.5 s, `per_tick` steps each; `hold` minibatches of the last take are
        trained in ticks after it, at the last step."""
        while step < until:
            clock.t += 0.5
            new = min(step + per_tick, until)
            count = schedule.take(step, new, final=new == total)
            for _ in range(count - (hold if new == total else 0)):
                monitor.record_train(0.0123)
            step = new
            if step % 20_000 == 0:
                monitor.record_game(step, 20_000, -20.5, 0.5)
            monitor.tick(step, 0.5)
        for _ in range(hold // 50):
            clock.t += 0.5
            for _ in range(50):
                monitor.record_train(0.0123)
            monitor.tick(step, 0.01)
        return step

    def evaluate(monitor, step, played):
        for game in range(1, played + 1):
            monitor.evaluation_game(game, games)
            clock.t += 1.0
        monitor.evaluation_game(games + 1, games)
        monitor.record_eval(step, [-21.0] * played)

    schedule = MinibatchSchedule(prepopulate, 4)
    monitor = session(0, schedule, 0, "first")
    try:
        step = play(monitor, schedule, 0, prepopulate, 5_000)           # 10,000 steps/s
        step = play(monitor, schedule, step, every, 1_000)              # 2,000 steps/s
        evaluate(monitor, step, games)
        play(monitor, schedule, step, every + 50_000, 1_000)
    finally:
        monitor.close()
    # Resumed at 9.9M without replay, with 16 minibatches owed.
    start = total - 100_000
    schedule = MinibatchSchedule(prepopulate, 4)
    schedule.refill(start, prepopulate, owed=16)
    monitor = session(start, schedule, (start - prepopulate) // 4 - 16, "second")
    try:
        step = play(monitor, schedule, start, start + prepopulate, 5_000)
        step = play(monitor, schedule, step, total, 1_000, hold=500)
        evaluate(monitor, step, 3)
    finally:
        monitor.close(finished=True)


PHASES = ("warm-up", "training", "refill", "catching up", "last minibatches", "evaluating",
          "finished")


def phases_drawn(lines):
    """{phase: [line]}: the bar's lines by the phase they name."""
    by_phase = {phase: [] for phase in PHASES}
    for line in lines:
        named = [phase for phase in PHASES if f", {phase}" in line]
        if named:
            by_phase[named[0]].append(line)
    return by_phase


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminals here")
@pytest.mark.parametrize("columns", [80, 120])
def test_the_bar_fits_the_terminal_in_every_phase_with_its_eta_and_rate_first(tmp_path,
                                                                              columns):
    """tqdm cut its line at the terminal's width, and the ETA came last: at 80 columns the ETA
    and steps/s never showed, and '+ 200 eval games' read '+ 200 ev'. Each line the terminal
    draws fits it and shows the ETA, and steps/s once measured; what is dropped is dropped
    whole."""
    written = on_a_terminal(columns, lambda out: a_run_through_every_phase(out, tmp_path))
    lines = drawn_bar_lines(written)
    assert len(lines) > 100
    for line in lines:
        assert len(line) <= columns and "ETA " in line, line
        for plus in re.findall(r"\+ .*?(?=, | \||$)", line.rstrip()):
            assert re.fullmatch(r"\+ [\d,]+ eval games?", plus), line
    by_phase = phases_drawn(lines)
    for phase in PHASES:
        assert by_phase[phase], phase
    for phase in ("warm-up", "training", "refill", "catching up"):
        # The rate is measured afresh in each phase: from its second line. At the last step
        # no step is played.
        playing = [line for line in by_phase[phase] if not line.startswith("100%")]
        assert len(playing) >= 5 and all(
            re.search(r", [\d,]+ steps/s, ", line) for line in playing[2:]), phase
    training = by_phase["training"]
    assert any(re.search(r"ETA \d\S* \+ 8,000 eval games, ", line) for line in training)
    assert any("mean100 -20.50, loss 0.0123" in line for line in training)
    assert "last minibatches: 500 minibatches left" in by_phase["last minibatches"][0]
    if columns >= 120:
        assert all(re.search(r", catching up \(\S+ left\) on [\d,]+ minibatches", line)
                   for line in by_phase["catching up"][2:])
        assert all("mean100" in line for line in training if "eval games" not in line)


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminals here")
def test_a_terminal_of_no_columns_gets_the_bar_at_80(tmp_path):
    """A pseudo-terminal whose size nobody set says 0 columns and 0 rows: tqdm drew nothing
    there. The bar is laid out for 80 columns instead."""
    written = on_a_terminal(0, lambda out: a_run_through_every_phase(out, tmp_path))
    lines = drawn_bar_lines(written)
    assert len(lines) > 100
    assert all(len(line) <= 80 and "ETA " in line for line in lines)
    assert all(phases_drawn(lines).values())


def test_a_narrow_bar_drops_whole_fields_from_the_end():
    """The step, the ETA and steps/s, then the phase's name always show; the phase's details
    and the agent's figures (most telling first) are dropped whole, from the end."""
    from fast_dqn.run.logs.progress import PhaseWords
    bar = ProgressBar(10_000_000, out=io.StringIO())
    fields = {"eps": "0.010", "games": 1_234, "mean100": "-20.50", "loss": "0.0123"}
    phase = PhaseWords("catching up", " (3m20s left)", " on 2,324 minibatches",
                       " missed during the refill")
    bar.shown = (1_234.0, fields, phase, 7_380, 0)
    optional = [" (3m20s left)", " on 2,324 minibatches", " missed during the refill",
                ", mean100 -20.50", ", loss 0.0123", ", eps 0.010", ", games 1234"]
    start = "54% 5.40M/10.0M, ETA 2h03m, 1,234 steps/s, catching up"
    for room, kept in ((len(start) + 5, 0), (79, 1), (100, 2), (119, 3), (130, 4), (200, 7)):
        assert bar.text(5_400_000, room) == start + "".join(optional[:kept]), room
    bar.shown = (1_234.0, fields, "training", 7_380, 200)
    assert bar.text(1_230_000, 79) == ("12% 1.23M/10.0M, ETA 2h03m + 200 eval games, "
                                       "1,234 steps/s, training")
    # Narrower than what must show: nothing dropped that must, tqdm cuts the end.
    assert bar.text(1_230_000, 20).startswith("12% 1.23M/10.0M, ETA 2h03m + 200 eval games")
    bar.close()
