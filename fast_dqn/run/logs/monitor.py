"""Run logs: episodes.csv, eval.csv, TensorBoard scalars and the console.

episodes.csv has one row per full game (all lives), with the unclipped score:
    episode, agent_step, length, return, mean_100, epsilon, hours
eval.csv has one row per evaluation:
    agent_step, mean, std, episodes, hours
hours are wall-clock hours of training, summed over the sessions of a resumed run.
Rows are flushed as written, so `tail -f` works and a crash loses nothing already logged.
"""

import collections
import csv
import io
import os
import threading
import time

import numpy as np

EPISODE_COLUMNS = ("episode", "agent_step", "length", "return", "mean_100", "epsilon", "hours")
EVAL_COLUMNS = ("agent_step", "mean", "std", "episodes", "hours")


class CsvLog:
    """One CSV log, each row flushed as written.

    A log is the record a user keeps of a run, and other programs get at it: an editor, a
    script, an `rm`. So the log keeps its own copy of every byte it wrote (a few MB for the
    longest runs): a file deleted, replaced or cut short while the run writes it is written
    again from that copy, and a checkpoint stores the copy up to its step, so a resume can
    rebuild the file exactly (`contents`: those bytes; None starts a new log, or goes on with
    the file). A file found damaged is never overwritten: it is kept aside as NAME.damaged
    (or .damaged.1, ...), and the user is told in one line by `warn`.
    """

    def __init__(self, path, columns, warn=None, contents=None):
        self.path, self.name = path, os.path.basename(path)
        self.warn = warn or (lambda message: None)
        found = _read(path) if os.path.exists(path) else None
        if contents is None:
            contents = _csv_line(columns) if found is None else found
        self.data = bytearray(contents)
        if found != contents:
            _write_whole(path, contents)
        self._open()

    def _open(self):
        self.file = open(self.path, "ab")
        self.identity = _identity(os.fstat(self.file.fileno()))

    def write(self, row):
        """Append one row, flushed, first putting the file back if another program changed it.

        An OSError it raises names the file's path.
        """
        try:
            self.check()
            line = _csv_line(row)
            self.file.write(line)
            self.file.flush()
        except OSError as error:  # a buffered write's error names no file: name it
            raise OSError(error.errno, error.strerror, self.path) from error
        self.data += line

    def contents(self):
        """The log's bytes, header included, checked against the file: what a checkpoint keeps."""
        self.check(compare=True)
        return bytes(self.data)

    def check(self, compare=False):
        """Put the file back if another program deleted, replaced or resized it.

        With `compare`, also if it changed in place, which reads it back: done at checkpoints only.
        """
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            found = None
        if found is not None and _identity(found) == self.identity \
                and found.st_size == len(self.data) \
                and not (compare and _read(self.path) != self.data):
            return
        self.file.close()
        if found is None:
            what = "was deleted"
        else:
            what = f"was changed (kept as {os.path.basename(_keep_aside(self.path))})"
        _write_whole(self.path, self.data)
        self._open()
        self.warn(f"warning: {self.name} {what} while the run wrote it; written again from "
                  "the run's own copy")

    def close(self):
        try:
            self.check(compare=True)
        except OSError:
            pass  # a failing disk: the next resume rebuilds the file from its checkpoint
        self.file.close()


def restore_log(path, columns, contents, step):
    """The log of a run resumed at `step`, cut back or rebuilt to the checkpoint's copy.

    A file missing or different is rebuilt from it, and the old one kept aside as NAME.damaged.

    Returns:
        (the CsvLog, a console line saying what was cut or rebuilt, or None).
    """
    name = os.path.basename(path)
    found = _read(path) if os.path.exists(path) else None
    if found is not None and found[:len(contents)] == contents:
        # Rows past the checkpoint (a kill, a crash) are of steps the resumed run plays again.
        rows = found[len(contents):].count(b"\n")
        message = (f"{name}: removed {rows:,} row{'s' if rows > 1 else ''} logged after the "
                   f"checkpoint of step {step:,}; the resumed run plays those steps again "
                   "and logs them anew" if rows else None)
        return CsvLog(path, columns, contents=contents), message
    if found is None:
        message = f"{name} was missing: rebuilt from the copy in the checkpoint of step {step:,}"
    else:
        message = (f"{name} differed from the checkpoint's copy (kept as "
                   f"{os.path.basename(_keep_aside(path))}): rebuilt from the copy in the "
                   f"checkpoint of step {step:,}")
    return CsvLog(path, columns, contents=contents), message


def _csv_line(row):
    text = io.StringIO()
    csv.writer(text).writerow(row)
    return text.getvalue().encode()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _identity(stat):
    return stat.st_dev, stat.st_ino


def _write_whole(path, data):
    """Replace `path` by a file holding `data`, atomically: a crash leaves the old or the new."""
    temporary = f"{path}.writing"
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def _keep_aside(path):
    """Rename a damaged log out of the way, never over another file; returns its new path."""
    aside, n = f"{path}.damaged", 0
    while os.path.lexists(aside):
        n += 1
        aside = f"{path}.damaged.{n}"
    os.rename(path, aside)
    return aside


class Monitor:
    """The run's logs: CSVs, optional TensorBoard scalars and the console.

    Called from the loop's main thread, except record_train, which the fast loop's trainer
    thread calls; it only accumulates, under a lock, and the main thread reads at tick().

    Args:
        run_dir: the run directory, where episodes.csv and eval.csv are.
        total_steps: the run's budget, in agent steps.
        interval: the seconds between two TensorBoard points (and status lines, without `console`).
        clock: a function that returns seconds, for rates and hours.
        console: a ProgressLines or ProgressBar; None for status lines every `interval`.
        scalars: a TensorBoardLog, or None for no TensorBoard scalars.
        resume: the state_dict of the checkpoint a run resumes from, or None.
        replay_fill: a function of the replay's fill in [0, 1], read when scalars are due; or None.
        progress: a RunProgress, for the console's phase and ETA (None: neither is shown).
        compiles: the process's CompileClock (fast_dqn.agent.compile_cache), whose seconds
            steps/s leaves out and whose line the console shows once training has begun; or None.
    """

    def __init__(self, run_dir, total_steps, interval=10.0, clock=time.monotonic, console=None,
                 scalars=None, resume=None, replay_fill=None, progress=None, compiles=None):
        from fast_dqn.run.logs.progress import PeriodRate, ProgressLines
        self.run_dir = run_dir
        self.total_steps = total_steps
        self.progress = progress
        self.last_step = resume["step"] if resume else 0
        self.interval = interval
        self.clock = clock
        self.scalars = scalars
        self.replay_fill = replay_fill
        self.recent_returns = collections.deque(maxlen=100)
        self.num_games = 0
        self.elapsed_before = 0.0  # seconds of earlier sessions of a resumed run
        resume = resume or {}
        notes = []
        if resume:
            self.recent_returns.extend(resume["recent_returns"])
            self.num_games = resume["num_games"]
            self.elapsed_before = resume["elapsed"]
        self.episodes, self.evals = (
            self._open_log(run_dir, name, columns, resume, notes)
            for name, columns in (("episodes.csv", EPISODE_COLUMNS),
                                  ("eval.csv", EVAL_COLUMNS)))
        self.console = console or ProgressLines(total_steps, interval=interval)
        self.start = clock()
        self.last_console = self.last_scalars = self.start
        self.last_scalars_step = resume["step"] if resume else 0
        self.last_epsilon = None
        # The console's steps/s, over whole periods where the loop marks them (sync_point),
        # on a clock that leaves out the evaluations' time: they play no agent step.
        self.period_rate, self.loop_marks_periods = PeriodRate(), False
        self.rate_phase = None  # the phase whose steps/s period_rate measures
        self.evaluation_seconds, self.evaluation_began = 0.0, None
        self.compiles = compiles
        self.compiled_before = compiles.seconds() if compiles else 0.0
        self.compiled_at_evaluation = 0.0
        self.compiles_told = compiles is None
        self.last_playing = 0.0  # _playing_seconds never runs back
        self._lock = threading.Lock()
        self._loss_sum = self._q_sum = 0.0
        self._num_losses = 0
        self.last_loss = None
        for note in notes:
            self.console.message(note)

    def _open_log(self, run_dir, name, columns, resume, notes):
        """A log, new, or (resumed) cut back to the checkpoint: the run plays later rows again."""
        path = os.path.join(run_dir, name)
        if not resume:
            return CsvLog(path, columns, warn=self.message)
        log, note = restore_log(path, columns, resume["logs"][name], resume["step"])
        log.warn = self.message
        if note:
            notes.append(note)
        return log

    @property
    def mean_100(self):
        """The mean score of the last 100 training games; NaN before the first."""
        return float(np.mean(self.recent_returns)) if self.recent_returns else float("nan")

    @property
    def hours(self):
        """Wall-clock hours of training, summed over the sessions of a resumed run."""
        return (self.elapsed_before + self.clock() - self.start) / 3600

    def record_game(self, step, length, game_return, epsilon):
        """Log a finished training game (all its lives) in episodes.csv and the scalars.

        Args:
            step: the agent step it ended at.
            length: its length, in agent steps.
            game_return: its score, unclipped (the game's own points).
            epsilon: the exploration epsilon at its end.
        """
        self.recent_returns.append(game_return)
        self.num_games += 1
        self.episodes.write([self.num_games, step, length, game_return, round(self.mean_100, 3),
                             round(epsilon, 5), round(self.hours, 5)])
        if self.scalars:
            self.scalars.scalars(step, {"train/episode_return": game_return,
                                        "train/mean_100": self.mean_100})

    def record_train(self, loss, mean_q=None):
        """Add a minibatch's loss to the next TensorBoard point; the trainer's thread calls it.

        Args:
            loss: the minibatch's loss, a float (the learner's reduction).
            mean_q: its mean Q-value, or None.
        """
        with self._lock:
            self._loss_sum += loss
            self._q_sum += mean_q if mean_q is not None else 0.0
            self._num_losses += 1
            self.last_loss = loss
            if self.progress:
                self.progress.trained()

    def follow(self, schedule):
        """Follow the loop's MinibatchSchedule, from which the console reads the run's phase.

        Args:
            schedule: the loop's MinibatchSchedule, passed on to the RunProgress.
        """
        if self.progress:
            self.progress.follow(schedule)

    def sync_point(self, step):
        """Mark the end of a fast-loop period, its trainer done: the console's steps/s spans these.

        Args:
            step: the sync point, in agent steps.
        """
        if not self.loop_marks_periods:  # the console's own marks were samples, not ends
            self.period_rate.ends.clear()
            self.loop_marks_periods = True
        self._follow_phase(step)
        self.period_rate.period_end(self._playing_seconds(self.clock()), step)

    def _compiled(self):
        return self.compiles.seconds() if self.compiles else 0.0

    def _evaluating(self, now):
        """Seconds of the evaluation in progress less its compiles, left out once, below."""
        if self.evaluation_began is None:
            return 0.0
        return now - self.evaluation_began - (self._compiled() - self.compiled_at_evaluation)

    def _playing_seconds(self, now):
        """Seconds of this session less those evaluating or compiling; it never runs back."""
        seconds = (now - self.start - self.evaluation_seconds - self._evaluating(now)
                   - (self._compiled() - self.compiled_before))
        self.last_playing = max(self.last_playing, seconds)
        return self.last_playing

    def evaluation_game(self, game, games):
        """Mark that an evaluation starts its game `game` of `games`.

        Args:
            game: the game about to play, 1-based; game > games: the evaluation ended.
            games: the games the evaluation plays.
        """
        now = self.clock()
        if game == 1 and self.evaluation_began is None:
            self.evaluation_began, self.compiled_at_evaluation = now, self._compiled()
        elif game > games and self.evaluation_began is not None:
            self.evaluation_seconds += self._evaluating(now)
            self.evaluation_began = None
        if not self.progress:
            return
        self.progress.evaluation_game(now, game, games)
        if game > games:
            # Training's rates are measured again from here: were they measured only between
            # two status lines, an evaluation between every two (CartPole's) would leave the
            # ETA unknown for the whole run.
            self.progress.sample(now, self.last_step)
            # The next status line comes an interval after the evaluation's last.
            self.last_console = now
        elif game == 1 or now - self.last_console >= self.console.interval:
            self._show(self.last_step, None, now)

    def record_eval(self, step, returns):
        """Log an evaluation in eval.csv, the scalars and the console.

        Args:
            step: the agent step it evaluated.
            returns: each game's unclipped score.
        """
        mean, std = float(np.mean(returns)), float(np.std(returns))
        self.evals.write([step, round(mean, 3), round(std, 3), len(returns),
                          round(self.hours, 5)])
        if self.scalars:
            self.scalars.scalars(step, {"eval/mean": mean, "eval/std": std})
            self.scalars.flush()
        from fast_dqn.run.logs.progress import counted
        self.console.message(f"eval at step {step:,}: mean {mean:.2f} +- {std:.2f} over "
                             f"{counted(len(returns), 'game')}")

    def message(self, line):
        """Print `line` on the console, above a bar if there is one.

        Args:
            line: the line, without its newline.
        """
        self.console.message(line)

    def tick(self, step, epsilon):
        """Update the console and the scalars when they are due; the loops call it often.

        The Nature loop calls it every agent step; the fast loop once per chunk, and while it
        waits for the trainer (the last minibatches training included).

        Args:
            step: agent steps taken so far.
            epsilon: the exploration epsilon at `step`.
        """
        now = self.clock()
        self.last_step, self.last_epsilon = step, epsilon
        if not self.compiles_told and self.last_loss is not None:
            # The first train call has compiled: the costliest compile is told, once.
            self.compiles_told = True
            line = self.compiles.line()
            if line:
                self.message(line)
        # The rate counts from the first tick: a run's start (a restore, the backend's start,
        # the first compilations) is not its pace. (Checked here: tick is per step.)
        if self.period_rate.first is None:
            self.period_rate.sample(self._playing_seconds(now), step)
        self._follow_phase(step, now)
        if now - self.last_console >= self.console.interval:
            self._show(step, epsilon, now)
        # The last step's point waits for close(): that step ticks again while its last
        # minibatches train or the trainer finishes, and one point must hold all of them
        # (TensorBoard would draw each write as another point).
        if (self.scalars and now - self.last_scalars >= self.interval
                and self.last_scalars_step < step < self.total_steps):
            self._write_scalars(step, epsilon, now)

    def _follow_phase(self, step, now=None):
        """Measure steps/s afresh when the run enters another phase: the warm-up plays many
        times faster than training, and its rate must not be shown as training's."""
        if not self.progress:
            return
        phase = self.progress.phase(step)
        if phase.startswith("evaluating") or phase == "finished":
            return
        if self.rate_phase is not None and phase != self.rate_phase:
            seconds = self._playing_seconds(self.clock() if now is None else now)
            self.period_rate.restart(seconds, step, await_end=self.loop_marks_periods)
        self.rate_phase = phase

    def _write_scalars(self, step, epsilon, now):
        """The point of `step`: the minibatches' means since the last point, and progress."""
        with self._lock:
            n, loss_sum, q_sum = self._num_losses, self._loss_sum, self._q_sum
            self._loss_sum = self._q_sum = 0.0
            self._num_losses = 0
        rate = (step - self.last_scalars_step) / max(now - self.last_scalars, 1e-9)
        self.scalars.scalars(step, {
            "train/loss": loss_sum / n if n else None,
            "train/mean_q": q_sum / n if n else None,
            "progress/epsilon": epsilon,
            "progress/steps_per_second": rate,
            "progress/replay_fill": self.replay_fill() if self.replay_fill else None})
        self.last_scalars, self.last_scalars_step = now, step

    def _show(self, step, epsilon, now):
        """Show the console's status: phase, steps/s (none while evaluating), figures and ETA."""
        fields = {}
        phase = eta = None
        untimed_games = 0
        if self.progress:
            self.progress.sample(now, step)
            phase = self.progress.describe(step)
            eta, untimed_games = self.progress.estimate(step)
        rate = None
        if not self.progress or self.progress.plays_steps(step):
            playing = self._playing_seconds(now)
            self.period_rate.sample(playing, step)
            if not self.loop_marks_periods:
                self.period_rate.period_end(playing, step)
            rate = self.period_rate.rate(playing, step)
        if not (self.progress and self.progress.evaluating):
            fields["eps"] = f"{epsilon:.3f}" if epsilon is not None else "-"
        fields["games"] = self.num_games
        fields["mean100"] = f"{self.mean_100:.2f}" if self.recent_returns else "-"
        fields["loss"] = "-" if self.last_loss is None else f"{self.last_loss:.4f}"
        self.console.update(step, rate, fields, phase=phase, eta=eta,
                            untimed_games=untimed_games)
        self.last_console = now

    def summary(self, best):
        """The line that ends a finished run: its steps, hours, games, best evaluation.

        Args:
            best: the best evaluation's {"step", "mean"}, or None.

        Returns:
            The line, without its newline.
        """
        from fast_dqn.run.logs.progress import counted
        games = (f"{counted(self.num_games, 'game')}, the last {len(self.recent_returns)} averaging "
                 f"{self.mean_100:.2f}" if self.num_games else "no game finished")
        if best is None:
            evaluation = "no evaluation"
        else:
            evaluation = (f"best evaluation {best['mean']:.2f} at step {best['step']:,} (its "
                          f"weights: {os.path.join(self.run_dir, 'best')})")
        took = f"{self.hours:.2f} h" if self.hours >= 1 else f"{60 * self.hours:.1f} min"
        return f"finished: {self.last_step:,} agent steps in {took}; {games}; {evaluation}"

    def state_dict(self, step):
        """What a checkpoint at agent step `step` needs to continue these logs.

        Args:
            step: the checkpoint's agent step.

        Returns:
            A tree of data: counts, the last 100 scores, elapsed seconds, each CSV's bytes
            and the TensorBoard files' sizes.
        """
        return {"step": step, "num_games": self.num_games,
                "recent_returns": list(self.recent_returns), "elapsed": self.hours * 3600,
                "logs": {"episodes.csv": self.episodes.contents(),
                         "eval.csv": self.evals.contents()},
                "tensorboard": self.scalars.state_dict() if self.scalars else None}

    def close(self, finished=False, best=None):
        """Close the console, the scalars and the CSV logs.

        Args:
            finished: the run is done, which the console says, with a summary line.
            best: the best evaluation's {"step", "mean"}, or None.
        """
        if finished:
            if self.progress:
                self.progress.finished = True
            self._show(self.last_step, self.last_epsilon, self.clock())
        self.console.close(self.last_step)
        if finished:
            print(self.summary(best), file=self.console.out, flush=True)
        if self.scalars:
            if self.last_epsilon is not None and self.last_step > self.last_scalars_step:
                try:
                    self._write_scalars(self.last_step, self.last_epsilon, self.clock())
                except OSError:
                    pass  # a failing disk at the end: the run's own error says so
            self.scalars.close()
        self.episodes.close()
        self.evals.close()
