"""What a run shows on the console: a live tqdm bar on a terminal, plain lines otherwise
(logs and pipes: `tee`, nohup, CI, which a bar would fill with carriage returns).

Both name the run's phase (RunProgress) and give an ETA that adds up what remains of each
phase at its own measured rate: warm-up and refill steps act without training, many times
faster than training, so one overall steps/s would promise the end far too early during them,
and say nothing while the run trains its last minibatches or plays an evaluation.

The steps/s shown is the rate over whole periods (PeriodRate): the fast loop's samplers play a
period in a burst, then wait for the trainer at the sync point, so a rate over the last seconds
would read many times the run's rate in the burst and near zero in the wait.
"""

import os
import sys

from fast_dqn.loops.minibatch_schedule import minibatches_due


class OutlivesConsole:
    """A console stream that drops what it cannot write once its reader is gone.

    The reader goes with `run | head`, a closed terminal or ssh session; the run goes on (its
    logs are its record), its descriptor pointed at /dev/null so Python's exit flush is quiet.

    Args:
        stream: the console stream it wraps (sys.stdout).
    """

    def __init__(self, stream):
        self.stream, self.gone = stream, False

    def _guarded(self, call, *args):
        if self.gone:
            return None
        try:
            return call(*args)
        except (BrokenPipeError, ValueError):  # ValueError: the file object was closed
            self.gone = True
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass
            return None

    def write(self, text):
        """Write `text` to the stream, or drop it once the reader is gone.

        Args:
            text: the str to write, whole or not at all.

        Returns:
            len(text), as a stream's write returns, written or dropped.
        """
        self._guarded(self.stream.write, text)
        return len(text)

    def flush(self):
        """Flush the stream, or do nothing once the reader is gone."""
        self._guarded(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def counted(n, noun):
    """`n noun` in good grammar: 1 game, 2 games, 1,000 minibatches.

    Args:
        n: the count, a whole number, written with thousands' commas.
        noun: the thing counted, singular; plural unless n is 1.

    Returns:
        The count and the noun, as one str.
    """
    plural = noun + ("es" if noun.endswith(("ch", "sh", "s", "x")) else "s")
    return f"{n:,} {noun if n == 1 else plural}"


class PhaseWords(str):
    """A phase's words for the console: the whole text, a str, and its `parts`.

    The parts, each with its own leading space or punctuation, add up to the text: the phase's
    name ("catching up"), then details, most telling first, which a narrow bar drops from the end.
    """

    def __new__(cls, *parts):
        words = super().__new__(cls, "".join(parts))
        words.parts = parts
        return words


class _Rate:
    """An amount per second over whole arrivals (steps per second, minibatches per second).

    Work arrives in lumps (16 or 64 minibatches per compiled call, a period of steps), and most
    half-second samples hold none: a rate per sample, even smoothed, would swing between a lump's
    rate and zero. So it runs from the arrival at least `window` seconds before the latest (or the
    first sample) to the latest; only a silence longer than that span (a stall) counts, to now.
    """

    def __init__(self, window=60.0):
        self.window = window
        self.clock = self.total = 0.0  # seconds and amount over the samples added
        self.points = []  # [(clock, total)]: the first sample, then each arrival

    def add(self, amount, per):
        """`amount` arrived over the `per` seconds since the last sample of this rate."""
        if per < 0 or amount < 0:
            return
        if not self.points:
            self.points.append((self.clock, self.total))
        self.clock += per
        self.total += amount
        if amount:
            self.points.append((self.clock, self.total))
            while len(self.points) > 2 and self.points[-1][0] - self.points[1][0] >= self.window:
                self.points.pop(0)

    @property
    def value(self):
        if len(self.points) < 2:
            return None
        (start, done), (end, total) = self.points[0], self.points[-1]
        if self.clock - end > end - start:
            end = self.clock  # a stall: no arrival for longer than the span measured
        return (total - done) / (end - start) if end > start else None

    def seconds_for(self, amount):
        rate = self.value
        return amount / rate if rate else None


class PeriodRate:
    """Agent steps per second over whole periods, measured apart in each phase.

    As _Rate, over period ends (in the Nature loop, every sample's), on a clock without evaluations.
    """

    def __init__(self, window=60.0):
        self.window = window
        self.ends = []   # [(seconds, step)]: the newest period end, and those back to the
        self.first = None  # last one at least `window` before it
        self.await_end = False  # no rate before the phase's first period end

    def restart(self, seconds, step, await_end):
        """Start measuring a new phase, which begins at (seconds, step) on the caller's clock.

        `await_end`: the loop plays in bursts (the fast loop), so no rate before the phase's first
        period end; its phases change at a period end, where the new one's time starts.
        """
        start = self.ends[-1] if await_end and self.ends else (seconds, step)
        self.ends, self.first, self.await_end = [], start, await_end

    def period_end(self, seconds, step):
        if self.first is None or step <= self.first[1]:
            return  # no step played since the first sample (a resume at a sync point)
        if self.ends and step < self.ends[-1][1]:
            self.ends = []  # a new count (a resume's): the old ends measure nothing now
        self.ends.append((seconds, step))
        while len(self.ends) > 2 and self.ends[-1][0] - self.ends[1][0] >= self.window:
            self.ends.pop(0)

    def sample(self, seconds, step):
        """Take a sample at `seconds` and agent step `step`; the first starts the measure."""
        if self.first is None:
            self.first = (seconds, step)

    def rate(self, seconds, step):
        """The phase's agent steps per second, or None while unmeasured."""
        if self.first is None or self.await_end and not self.ends:
            return None
        end = self.ends[-1] if self.ends else (seconds, step)
        start = self.ends[0] if len(self.ends) >= 2 else self.first
        if end[0] <= start[0]:
            end = (seconds, step)
        return (end[1] - start[1]) / (end[0] - start[0]) if end[0] > start[0] else None


class RunProgress:
    """A run's phase and ETA, from what the loop reports (a pure model: the caller's clock).

    Phases: warm-up (acting before training starts), refill (a resume without replay acting
    until replay is full again), training, catching up (deferred minibatches repaid, up to
    twice the Nature rate), last minibatches (those left at the last step: the fast loop's
    last period, or what a refill deferred), evaluating game k of N, and finished (set by the
    monitor once the run's last checkpoint is written).

    Args:
        total_steps: the run's budget, in agent steps.
        train_freq: agent steps per minibatch trained.
        prepopulate: the warm-up, in agent steps.
        eval_every: the evaluation period, in agent steps; 0 for no evaluation.
        eval_games: the games each evaluation plays.
    """

    def __init__(self, total_steps, train_freq, prepopulate, eval_every=0, eval_games=0):
        self.total = total_steps
        self.train_freq = train_freq
        self.eval_every, self.eval_games = eval_every, eval_games
        self.schedule = None
        self.minibatches_total = minibatches_due(0, total_steps, prepopulate, train_freq)
        self.minibatches_done = 0
        self.step_rates = {"warm-up": _Rate(), "refill": _Rate()}
        self.minibatch_rate, self.game_seconds = _Rate(), _Rate()
        self.evaluating = None    # (game, games) while an evaluation plays
        self.last = None          # (time, step, minibatches_done, phase) of the last sample
        self.game_started = None  # when the evaluation game in progress began
        self.finished = False     # the run is done: its last checkpoint is written

    def follow(self, schedule):
        """Follow the loop's MinibatchSchedule for the warm-up, refill and deferred counts.

        Args:
            schedule: the loop's MinibatchSchedule, read at each call, never changed.
        """
        self.schedule = schedule

    def phase(self, step):
        """The run's phase at agent step `step`, as a short name.

        Args:
            step: agent steps taken so far.

        Returns:
            One of the class's phases; "evaluating game k of N" with its numbers.
        """
        if self.finished:
            return "finished"
        if self.evaluating is not None:
            game, games = self.evaluating
            return f"evaluating game {game} of {games}"
        schedule = self.schedule
        # At the last step only minibatches remain, even when a refill ran up to it (a resume
        # whose extension is no longer than --prepopulate trains everything there).
        if step >= self.total:
            return "last minibatches" if self.minibatches_left() else "training"
        if schedule is not None and step <= schedule.train_start:
            return "warm-up"
        if schedule is not None and step <= schedule.refill_until:
            return "refill"
        if schedule is not None and schedule.deferred:
            return "catching up"
        return "training"

    def minibatches_left(self):
        """The minibatches the run has yet to train.

        Returns:
            A count of minibatches, 0 or more.
        """
        return max(0, self.minibatches_total - self.minibatches_done)

    def describe(self, step):
        """The phase as the console shows it; catching up and the last minibatches say what is left.

        Args:
            step: agent steps taken so far.

        Returns:
            The phase's words for the console, a PhaseWords.
        """
        phase = self.phase(step)
        if phase == "catching up":
            missed = self.schedule.deferred
            # Each minibatch due brings one missed one: 2 trained per one made up.
            seconds = self.minibatch_rate.seconds_for(min(2 * missed, self.minibatches_left()))
            left = "" if seconds is None else f" ({_format_duration(seconds)} left)"
            # Most telling first: a narrow bar drops the last. "catching up" stays first: the
            # suite's table reads a run's rate by that name.
            return PhaseWords("catching up", left, f" on {counted(missed, 'minibatch')}",
                              " missed during the refill")
        if phase == "last minibatches":
            return PhaseWords("last minibatches",
                              f": {counted(self.minibatches_left(), 'minibatch')} left")
        if phase.startswith("evaluating"):
            game, games = self.evaluating
            return PhaseWords("evaluating", f" game {game} of {games}")
        return PhaseWords(phase)

    def plays_steps(self, step):
        """Whether the phase plays agent steps (a steps/s means something).

        Args:
            step: agent steps taken so far.

        Returns:
            False while the last minibatches train, an evaluation plays, or once finished.
        """
        phase = self.phase(step)
        return not (phase in ("last minibatches", "finished") or phase.startswith("evaluating"))

    def trained(self, count=1):
        """Count `count` minibatches as trained.

        Args:
            count: minibatches trained since the last call.
        """
        self.minibatches_done += count

    def sample(self, now, step):
        """Measure the rates over the time since the last sample, in its phase.

        Args:
            now: the caller's clock, in seconds (evaluations left out).
            step: agent steps taken so far.
        """
        phase = self.phase(step)
        if self.last is not None and self.evaluating is None:
            then, then_step, then_done, then_phase = self.last
            if then_phase == phase and phase in self.step_rates:
                self.step_rates[phase].add(step - then_step, now - then)
            elif then_phase == phase:
                self.minibatch_rate.add(self.minibatches_done - then_done, now - then)
        self.last = (now, step, self.minibatches_done, phase)

    def evaluation_game(self, now, game, games):
        """Mark an evaluation at game `game` of `games`, timing the game before it.

        Args:
            now: the caller's clock, in seconds.
            game: the game about to play, 1-based; game > games ends the evaluation.
            games: the games the evaluation plays.
        """
        if self.game_started is not None:
            self.game_seconds.add(now - self.game_started, 1)  # seconds per game
        self.evaluating = (game, games) if game <= games else None
        self.game_started = now if game <= games else None
        self.last = None  # the evaluation's time is no training time

    def evaluations_left(self, step):
        """The evaluations still to come after agent step `step`.

        Args:
            step: agent steps taken so far.

        Returns:
            A count of evaluations; 0 where evaluation is off.
        """
        every = self.eval_every
        if not every:
            return 0
        left = self.total // every - step // every
        # max: the fast loop's last round may end past a multiple of `every` beyond the budget.
        return max(0, left + (1 if self.total % every and step < self.total else 0))

    def eta(self, step):
        """The seconds to the run's end, at the rates measured so far.

        Args:
            step: agent steps taken so far.

        Returns:
            Seconds, or None while a rate it needs is unmeasured.
        """
        seconds, untimed_games = self.estimate(step)
        return None if untimed_games else seconds

    def estimate(self, step):
        """The time left at the rates measured so far, and the evaluation games not timed yet.

        Split so that the console can give the training's ETA from the start: with the default
        settings, the first evaluation game is timed only after 250k agent steps.

        Args:
            step: agent steps taken so far.

        Returns:
            (seconds, untimed games): the seconds left, None while a step or minibatch rate is
            unmeasured; and, until an evaluation game is timed, the games left, not in the first.
        """
        if self.finished:
            return 0.0, 0
        seconds = 0.0
        schedule = self.schedule
        train_start = schedule.train_start if schedule else 0
        at = step
        for phase, until in (("warm-up", train_start),
                             ("refill", schedule.refill_until if schedule else 0)):
            steps = max(0, min(until, self.total) - at)
            if steps:
                rate = self.step_rates[phase].value
                if not rate:
                    seconds = None
                    break
                seconds += steps / rate
                at += steps
        if self.minibatches_left():
            if not self.minibatch_rate.value:
                seconds = None
            elif seconds is not None:
                seconds += self.minibatches_left() / self.minibatch_rate.value
        games = self.evaluations_left(step) * self.eval_games
        if self.evaluating is not None:
            game, total = self.evaluating
            games += total - game + 1
        if games and not self.game_seconds.value:
            return seconds, games
        if games and seconds is not None:
            seconds += games * self.game_seconds.value
        return seconds, 0


def _format_duration(seconds):
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def _eta_text(eta, untimed_games):
    """The ETA as both consoles show it; eta None is unknown: "?"."""
    text = f"ETA {'?' if eta is None else _format_duration(eta)}"
    if untimed_games and eta is not None:
        text += f" + {counted(untimed_games, 'eval game')}"
    return text


def _status(phase, rate, fields, eta, separator, untimed_games=0):
    parts = [phase] if phase else []
    if rate is not None:
        parts.append(f"{rate:,.0f} steps/s")
    parts += [f"{k} {v}" for k, v in fields.items()]
    parts.append(_eta_text(eta, untimed_games))
    return separator.join(parts)


class ProgressLines:
    """A full status line every `interval` seconds (`initial` unused: each line is whole)."""

    def __init__(self, total, initial=0, out=None, interval=10.0):
        self.total = total
        self.out = out or sys.stdout
        self.interval = interval

    def update(self, step, rate, fields, phase=None, eta=None, untimed_games=0):
        """Print the status line of agent step `step`.

        `rate` is in agent steps per second, `eta` in seconds (None while unmeasured); `fields` is
        {name: formatted value}; `untimed_games` are evaluation games not in `eta`. Without `phase`
        (no RunProgress) the ETA is the steps left at `rate`.
        """
        if phase is None and rate:
            eta = (self.total - step) / rate
        self.message(f"step {step:,}/{self.total:,} ({100 * step / self.total:.1f}%) | "
                     + _status(phase, rate, fields, eta, " | ", untimed_games))

    def message(self, line):
        print(line, file=self.out, flush=True)

    def close(self, step=None):
        pass


# The agent's figures on the bar, most telling first: a narrow terminal drops them from the end.
_BAR_FIGURES = ("mean100", "loss", "eps", "games")
# The fewest columns the drawn bar takes, after the text: a narrower one shows nothing.
_MIN_BAR = 10


def _terminal_width(out):
    """The columns of the terminal `out` writes to; 80 where it says 0 or cannot say."""
    # A terminal of 0 columns (a pseudo-terminal whose size nobody set, as in some containers
    # and CI runners) still redraws a line in place: it keeps the bar, at 80 columns, the
    # width the line is laid out for, rather than switch to lines every 10 s.
    try:
        columns = os.get_terminal_size(out.fileno()).columns
    except (AttributeError, OSError, ValueError):  # no descriptor, or not a terminal
        columns = 0
    return columns or 80


def _fit(pieces, room):
    """The pieces' text within `room` columns: the required ones, and the others up to the
    first that does not fit; none is cut. pieces: [(separator, text, required)], in order."""
    line, dropping = "", False
    for separator, text, required in pieces:
        dropping = dropping or len(line) + len(separator) + len(text) > room
        if required or not dropping:
            line += separator + text
    return line


class ProgressBar:
    """A live line on a terminal: the step, ETA and steps/s, the phase, the agent's figures.

    tqdm cuts its line at the terminal's width, where its ETA came last (on 80 columns it never
    showed), so the bar lays out its own: the step, the ETA, steps/s and the phase's name always
    show; the phase's details and the agent's figures are dropped whole from the end where they
    do not fit, and tqdm's bar fills the room left. tqdm's own ETA (one overall rate) is dropped.
    """

    def __init__(self, total, initial=0, out=None, interval=0.5):
        from tqdm import tqdm
        self.out = out or sys.stdout
        self.interval = interval
        self.total = total
        self.sizeof = tqdm.format_sizeof
        self.shown = (None, {}, None, None, 0)  # update()'s rate, fields, phase, eta, games
        text, room = self._layout(initial)
        # The width and height given, tqdm asks the terminal neither: at 0 rows it would draw
        # nothing. The height only hides nested bars, and this bar is the only one.
        self.bar = tqdm(total=total, initial=initial, file=self.out, ncols=room, nrows=24,
                        bar_format=text)

    def text(self, step, room):
        """The line's text at agent step `step` within `room` columns, without the drawn bar."""
        rate, fields, phase, eta, untimed_games = self.shown
        # Rounded down: 100% is the last step.
        percent = f"{100 * step // self.total}% " if self.total else ""
        pieces = [("", f"{percent}{self.sizeof(step)}/{self.sizeof(self.total)}", True),
                  (", ", _eta_text(eta, untimed_games), True)]
        if rate is not None:
            pieces.append((", ", f"{rate:,.0f} steps/s", True))
        if phase:
            name, *details = getattr(phase, "parts", (phase,))
            pieces.append((", ", name, True))
            pieces += [("", detail, False) for detail in details]
        order = sorted(fields, key=lambda k: _BAR_FIGURES.index(k) if k in _BAR_FIGURES
                       else len(_BAR_FIGURES))
        pieces += [(", ", f"{k} {fields[k]}", False) for k in order]
        return _fit(pieces, room)

    def _layout(self, step):
        """(tqdm's bar_format, its width) for agent step `step` at the terminal's width now."""
        # One column short: some terminals move to the next line once the last one is written.
        room = _terminal_width(self.out) - 1
        text = self.text(step, room)
        bar = " |{bar}|" if room - len(text) - 3 >= _MIN_BAR else ""
        return text.replace("{", "{{").replace("}", "}}") + bar, room

    def _relayout(self):
        self.bar.bar_format, self.bar.ncols = self._layout(self.bar.n)

    def update(self, step, rate, fields, phase=None, eta=None, untimed_games=0):
        """Move the bar to agent step `step` and show the status (arguments as ProgressLines')."""
        if phase is None and rate:
            eta = (self.total - step) / rate
        self.shown = (rate, fields, phase, eta, untimed_games)
        # Drawn at each update, which the monitor spaces: tqdm, left to itself, draws only when
        # steps are added, and an evaluation or the last minibatches add none.
        self.bar.n = step
        self._relayout()
        self.bar.refresh()

    def message(self, line):
        """Print `line` above the bar."""
        self._relayout()
        self.bar.write(line, file=self.out)

    def close(self, step=None):
        """Close the bar, first moved to the run's last `step` (None: where it is).

        A run that ends between two updates would otherwise stay at the last one.
        """
        if step is not None:
            self.bar.n = step
        self._relayout()
        self.bar.close()


def make_console(total, initial=0, out=None, interval=10.0):
    """A bar when `out` is a terminal, lines every `interval` seconds when it is not.

    Args:
        total: the run's budget, in agent steps.
        initial: the step the run starts from, in agent steps.
        out: the console's stream; None for sys.stdout.
        interval: the seconds between lines; a bar updates every half second.

    Returns:
        A ProgressBar or a ProgressLines.
    """
    out = out or sys.stdout
    if hasattr(out, "isatty") and out.isatty():
        return ProgressBar(total, initial, out)
    return ProgressLines(total, initial, out, interval)
