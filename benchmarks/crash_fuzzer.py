r"""Crash fuzzer: tiny runs stopped at random moments, resumed until done, then checked.

    python -m benchmarks.crash_fuzzer [--trials 100] [--seed 0] [--keep DIR] [--json FILE]
    python -m benchmarks.crash_fuzzer --fixed [--keep DIR] [--json FILE]
    python -m benchmarks.crash_fuzzer --suites [--trials 100] [--seed 0] [--keep DIR] [--json FILE]
    python -m benchmarks.crash_fuzzer --tables [--trials 100] [--seed 0] [--keep DIR] [--json FILE]

--fixed runs the eight fixed trials of FIXED instead of drawn ones, each built by hand for
one case (the test suite used to run all eight; tests/faults/test_stops_and_kills.py keeps two).

Trial i (seed + i) draws a run, each choice from the trial's seed:
- CartPole or Pong (1/2 each), the Nature or the fast loop (1/2 each), for Pong's fast loop
  the python or the vector backend (1/2 each), replay saved or not (1/2), a target period of
  96 or 800 steps (1/2 each);
- a checkpoint every 400 steps (3/4), or every 100,000 (1/4: more than the budget, so only
  a signal stop and the end write one, and a kill -9 before the end leaves none);
- one to three stops, each SIGINT, SIGTERM or SIGKILL at a drawn fraction f of its segment
  (some in the startup, most during the run, some after it has ended): when episodes.csv
  first logs a game at or past f of the way from the step the segment starts at to its
  budget, or f of the time such a segment takes here, whichever comes first (the log keeps
  the stop inside the run on a fast machine, the clock on a slow one or in Pong's long
  games);
- (3/10) a resume that lowers the budget: at a drawn resume, --timesteps=X with X between
  the newest checkpoint's step (0 if none) and the budget: exactly the checkpoint's step
  (3/10 of these), or a drawn fraction of the way up, half of those moved off a multiple of
  the workers; a later resume passes --timesteps again only where the newest checkpoint
  does not record it (the cut resume was stopped before its first one), and must then
  say it keeps it;
- (1/3) one or two logs damaged between runs, each before a drawn resume: episodes.csv or
  eval.csv deleted, episodes.csv emptied, or episodes.csv (3/4) or eval.csv (1/4) converted
  by dos2unix ("\r\n" to "\n"), cut by its last 10 bytes, or with a digit of its first row
  changed;
- (1/4) the first stop sent the instant something appears in the run directory rather than
  at its fraction: config.json, episodes.csv, a checkpoint begun (.partial-) or complete;
- (1/4) evaluate, plot and evaluate --export run on the run directory one after another
  beside every training segment; each must exit 0, or 2 with one line, never a traceback or
  a hang; every other evaluate and export is stopped by SIGINT or SIGTERM once its backend
  has started, and must exit 130 or 143 with one line; none may leave a partial file;
- (1/4) before a drawn resume with a checkpoint, the run's checkpoints hidden: checkpoints/
  moved out of the run, or its step-* folders renamed; that resume must exit 2 with one line
  naming the checkpoints and change no file of the run (it once took the run for one stopped
  before its first checkpoint and deleted its logs); they are then put back;
- (1/4) before a drawn resume, one value read back from a run file replaced by a value of
  another JSON kind: a drawn leaf of the newest checkpoint's state.json (its manifest updated
  so that it still verifies), or a drawn setting of config.json; that resume must exit 2
  with one line naming the file and change no file of the run; the value is then put back
  and the run resumed (benchmarks/edit_sweep.py tries every leaf of one checkpoint).
It starts the run and stops it each time, resuming with --resume whenever the directory has
its config.json (with no checkpoint, the run starts again from step 0 with its saved
settings), and with the original command again when it has none (the run was stopped while
its directory was created), then lets the last resume finish. Then it checks what a user
relies on:
- a stop by SIGINT or SIGTERM exits 128 + the signal after a checkpoint, and no process
  that was not killed prints a traceback or leaves minibatches untrained;
- a resume with no checkpoint says it starts again from step 0, and one with a checkpoint
  does not; a resume finds each log as the checkpoint's copy says it must be: it says a
  missing log was rebuilt, says a log that differs from the copy (within the copy's bytes)
  was rebuilt and keeps that file, byte for byte, under the name it gives, and says
  nothing of a log that holds the copy (rows after the checkpoint are just cut);
- the last process exits 0, and the newest checkpoint is at the final budget (rounded up to
  whole rounds of the workers in the fast loop) and has trained exactly the Nature loop's
  number of minibatches for it;
- episodes.csv numbers its games 1, 2, 3, ... at increasing agent steps, none past the final
  step; eval.csv has exactly the evaluations the schedule makes for the final budget, in
  order; every line of both ends in "\r\n";
- at most 2 checkpoints, and no partial checkpoint directory;
- python backend with replay saved: the same logs as the same run uninterrupted, with the
  final budget.
A fixed trial must also show, in its line, that it did what it is there for (FIXED_SIGNS).
--suites draws SuiteTrial instead, from a random stream of its own (a seed's trials above
draw what they always drew): a tiny suite (pong, 1-2 seeds, --parallel 1) and one attack:
SIGINT or SIGTERM to the suite, kill -9 to its running child, or after a signal suite.json
or a run's config.json damaged before a rerun (that must exit 2 with one line, changing no
file, or 1 naming the run); then the same command finishes it, a rerun starts nothing, and
each run is checked as above. One in six is the checkout path: a CartPole run trial from a
copy of the checkout under a non-UTF-8 name (b"caf\xe9co"), stopped once by SIGINT.
--tables draws TableTrial, from a stream of its own: a copy of a real GPU session's output
folder (docs/data) with one file benchmarks.gpu_table reads damaged (cut, emptied, binary, a
folder in its place, deleted, a figure made 5,000 digits or a word, a column renamed); the
table must exit 0, or 2 with one line naming the file (its rows reading "damaged: FILE"),
never a traceback, and change no file.
It prints a line per trial and exits 1 if any trial failed.
"""

import argparse
import csv
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks import fuzz_attacks as attacks
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.loops.period import next_sync_point
from fast_dqn.run.storage.checkpoint import CheckpointStore

SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
EXIT_TIMEOUT = 180  # seconds a signalled run may take to checkpoint and exit: a hang guard
RUN_TIMEOUT = 900   # seconds any one process may run at all

# Per game: the budget, evaluation interval, workers of the fast loop, flags, the short and
# long target periods (multiples of the workers and of --train-freq), and about how long an
# uninterrupted run takes here from its "run directory" line (TensorFlow's start included),
# which spreads the random stops over the run.
GAMES = {
    "cartpole": dict(budget=2400, evaluate=800, workers=4, seconds=14, periods=(96, 800),
                     prepopulate=300, train_freq=1,  # --train-freq: the classic preset's
                     flags=["--env=CartPole-v1", "--eval-episodes=2"]),
    "pong": dict(budget=1200, evaluate=600, workers=4, seconds=18, periods=(96, 800),
                 prepopulate=300, train_freq=4,
                 flags=["--game=pong", "--replay-capacity=2000", "--max-episode-steps=300",
                        "--eval-episodes=1"]),
}
# --checkpoint-freq: the usual one, and one past every budget, so that only a signal stop and
# the end write a checkpoint, and a kill -9 before the end leaves none to resume from.
CHECKPOINT_FREQS = (400, 100_000)
LOGS = ("episodes.csv", "eval.csv")
# The damage done to a log between runs (see damage_log): (what, which log; None: drawn).
DAMAGES = (("delete", "episodes.csv"), ("delete", "eval.csv"), ("empty", "episodes.csv"),
           ("dos2unix", None), ("cut10", None), ("edit", None))
FROM_ZERO = "stopped before its first checkpoint; starting it again from step 0"


@dataclasses.dataclass
class Trial:
    seed: int
    game: str = "cartpole"
    loop: str = "fast"              # fast or nature
    backend: str = "python"         # python or vector (Pong's fast loop only)
    save_replay: bool = False
    period: int = 96
    stops: list = dataclasses.field(default_factory=list)  # (signal name, fraction of run)
    checkpoint_freq: int = CHECKPOINT_FREQS[0]
    # (run, fraction, odd): from the first --resume of run number `run` on (run 0 is the
    # first start), --timesteps=X, with X the newest checkpoint's step L (0 if none) plus
    # `fraction` of the way from L up to the budget (0: exactly L), moved off a multiple of
    # the workers if `odd`. None: the budget stays.
    cut: tuple = None
    # (run, what, log): before run number `run`, if it resumes, damage `log` (damage_log).
    damage: list = dataclasses.field(default_factory=list)
    # The first stop comes the instant this appears in the run directory (attacks.ON_DISK),
    # not at its drawn fraction.
    on_disk: str = None
    # evaluate and plot run on the run directory beside every training segment.
    beside: bool = False
    # (run, file): before run number `run`, if it resumes, a value of `file` (attacks.EDITS)
    # is replaced by one of another kind, or one of the newest checkpoint's arrays is edited
    # (attacks.ARRAY_EDITS): that resume must refuse in one line and change nothing; the file
    # is then put back and the run resumed.
    edit: tuple = None
    # (run, how): before run number `run`, if it resumes from a checkpoint, its checkpoints are
    # hidden (attacks.HIDES: checkpoints/ moved away, or its step-* folders renamed): that
    # resume must refuse in one line and change nothing; they are then put back.
    hide: tuple = None
    # The run's script is a copy of the checkout's under a directory whose name is not UTF-8
    # (attacks.copy_checkout): drawn by --suites only.
    checkout: bool = False

    @classmethod
    def draw(cls, seed):
        rng = random.Random(seed)
        game = rng.choice(sorted(GAMES))
        loop = rng.choice(["fast", "nature"])
        backend = "vector" if game == "pong" and loop == "fast" and rng.random() < 0.5 \
            else "python"
        # Fractions past 1 let some stops come after the run has ended, and a few land in the
        # startup, before signals are handled (negative f: -10 f seconds after launch).
        stops = [(rng.choice(sorted(SIGNALS)), rng.uniform(-0.15, 1.1))
                 for _ in range(rng.randint(1, 3))]
        save_replay = rng.random() < 0.5
        period = rng.choice(GAMES[game]["periods"])
        # The draws above are the first version's, in its order: a seed still draws them.
        checkpoint_freq = CHECKPOINT_FREQS[1] if rng.random() < 0.25 else CHECKPOINT_FREQS[0]
        cut = None
        if rng.random() < 0.3:
            fraction = 0.0 if rng.random() < 0.3 else round(rng.uniform(0.05, 1.0), 2)
            cut = (rng.randint(1, len(stops)), fraction, fraction > 0 and rng.random() < 0.5)
        damage = []
        if rng.random() < 1 / 3:
            for _ in range(1 if rng.random() < 0.75 else 2):
                what, log = rng.choice(DAMAGES)
                log = log or ("episodes.csv" if rng.random() < 0.75 else "eval.csv")
                damage.append((rng.randint(1, len(stops)), what, log))
            damage.sort(key=lambda d: d[0])
        # Drawn after the first version's choices, so that a seed still draws those.
        on_disk = rng.choice(attacks.ON_DISK) if rng.random() < 0.25 else None
        beside = rng.random() < 0.25
        edit = (rng.randint(1, len(stops)), rng.choice(attacks.EDITS)) \
            if rng.random() < 0.25 else None
        hide = (rng.randint(1, len(stops)), rng.choice(attacks.HIDES)) \
            if rng.random() < 0.25 else None
        return cls(seed, game, loop, backend, save_replay, period, stops, checkpoint_freq,
                   cut, damage, on_disk, beside, edit, hide)

    @property
    def script(self):
        return "run_fast_dqn.py" if self.loop == "fast" else "run_dqn.py"

    @property
    def exact(self):
        """Whether a split run must log exactly what a straight run logs."""
        return self.save_replay and self.backend == "python"

    def args(self, logdir, timesteps=None):
        game = GAMES[self.game]
        args = [*game["flags"], f"--timesteps={timesteps or game['budget']}",
                f"--prepopulate={game['prepopulate']}", f"--train-freq={game['train_freq']}",
                f"--evaluate={game['evaluate']}", f"--target-update-freq={self.period}",
                f"--checkpoint-freq={self.checkpoint_freq}",
                f"--seed={self.seed}", f"--logdir={logdir}"]
        if self.save_replay:
            args.append("--save-replay")
        if self.loop == "fast":
            args += [f"--workers={game['workers']}", f"--env-backend={self.backend}"]
        return args

    def cut_budget(self, step, budget):
        """The --timesteps of the resume that lowers `budget`, the newest checkpoint being at
        `step` (0: none)."""
        _, fraction, odd = self.cut
        timesteps = step + round(fraction * (budget - step))
        if odd and timesteps % GAMES[self.game]["workers"] == 0:
            timesteps += 1 if timesteps < budget else -1
        return max(1, step, min(budget, timesteps))

    def describe(self):
        text = (f"{self.game} {self.loop} {self.backend} "
                f"replay={'saved' if self.save_replay else 'no'} period={self.period}")
        if self.checkpoint_freq != CHECKPOINT_FREQS[0]:
            text += f" checkpoint-freq={self.checkpoint_freq}"
        if self.cut:
            run, fraction, odd = self.cut
            text += f" cut@{run}={f'{fraction:g}' if fraction else 'ckpt'}{'-odd' if odd else ''}"
        text += "".join(f" {what}:{log}@{run}" for run, what, log in self.damage)
        if self.on_disk:
            text += f" stop-on={self.on_disk}"
        if self.beside:
            text += " tools-beside"
        if self.edit:
            text += f" replace-value:{self.edit[1]}@{self.edit[0]}"
        if self.hide:
            text += f" checkpoints-{self.hide[1]}@{self.hide[0]}"
        if self.checkout:
            text += " checkout-non-utf8"
        return text


class Process:
    """A run in a child process, its output read by threads so that it never blocks."""

    def __init__(self, args):
        self.popen = subprocess.Popen([sys.executable, *args], cwd=ROOT, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.started = threading.Event()  # the run directory is taken: signals are handled
        self.out, self.err = [], []
        self.threads = [threading.Thread(target=self._read, args=(self.popen.stdout, self.out),
                                         daemon=True),
                        threading.Thread(target=self._read, args=(self.popen.stderr, self.err),
                                         daemon=True)]
        for thread in self.threads:
            thread.start()

    def _read(self, stream, lines):
        for line in stream:
            lines.append(line)
            if ": run directory " in line:
                self.started.set()

    def wait(self, timeout):
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            return None
        for thread in self.threads:
            thread.join(timeout=10)
        return code

    @property
    def text(self):
        return "".join(self.out) + "".join(self.err)


def logged_step(path, since):
    """The agent step of the newest game in the episodes.csv at `path`, or None while the
    file is missing, holds no game, or was last written before `since` (time.time()): a
    resume cuts the rows a stopped run logged past its checkpoint, and they must not count
    as the new process's progress."""
    try:
        if os.stat(path).st_mtime < since:
            return None
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            # The last whole line: a row being written is not read half.
            last = f.read().split(b"\n")[-2].split(b",")
        return int(last[1])
    except (OSError, IndexError, ValueError):  # gone, no whole line, or only the header
        return None


def wait_for_stop(process, fraction, seconds, progress):
    """Wait until the run is `fraction` of the way through its segment (see the module's
    docstring): `progress` = (episodes.csv, the step that is that far, the segment's start
    time), or None to go by the clock alone."""
    if fraction < 0:
        time.sleep(-fraction * 10)  # somewhere in the startup
        return
    while not process.started.wait(0.1) and process.popen.poll() is None:
        pass
    deadline = time.monotonic() + fraction * seconds
    while process.popen.poll() is None and time.monotonic() < deadline:
        step = logged_step(progress[0], progress[2]) if progress else None
        if step is not None and step >= progress[1]:
            return
        time.sleep(0.02)


def run_segment(command, stop, seconds, watch=None):
    """Run `command`; with stop = (signal name, fraction), signal it that far into its
    segment (wait_for_stop; `watch` = (episodes.csv, the segment's first and last step)), or
    with a fraction "on:X" the instant X appears in the run directory (attacks.ON_DISK).
    Returns (exit code or None for a hang, signal sent or None, output, started)."""
    since = time.time()
    process = Process(command)
    sent = None
    if stop:
        name, fraction = stop
        progress = None
        if isinstance(fraction, str):
            attacks.wait_for_file(lambda: process.popen.poll() is None,
                                  os.path.dirname(watch[0]), fraction[3:], 2 * seconds)
        elif watch:
            log, first, last = watch
            progress = (log, first + fraction * (last - first), since)
        if not isinstance(fraction, str):
            wait_for_stop(process, fraction, seconds, progress)
        if process.popen.poll() is None:
            process.popen.send_signal(SIGNALS[name])
            sent = name
        code = process.wait(EXIT_TIMEOUT)
    else:
        code = process.wait(RUN_TIMEOUT)
    return code, sent, process.text, process.started.is_set()


def read_bytes(path):
    """A file's bytes, or None if there is none."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def damage_log(path, what):
    """Damage a log as a user or a tool might between runs: "delete" it, "empty" it, convert
    its line ends with "dos2unix", "cut10" bytes off its end, or "edit" the first digit of its
    first row. Returns a note for the trial's line."""
    note = f"{what}:{os.path.basename(path)}"
    data = read_bytes(path)
    if data is None:
        return note + "(none)"
    if what == "delete":
        os.remove(path)
        return note
    if what == "empty":
        data = b""
    elif what == "dos2unix":
        data = data.replace(b"\r\n", b"\n")
    elif what == "cut10":
        data = data[:-10]
    elif what == "edit":
        first_row = data.find(b"\n") + 1
        digit = re.search(rb"\d", data[first_row:]) if first_row else None
        if digit is None:
            return note + "(no row)"
        at = first_row + digit.start()
        data = data[:at] + str((int(data[at:at + 1]) + 1) % 10).encode() + data[at + 1:]
    else:
        raise ValueError(what)
    with open(path, "wb") as f:
        f.write(data)
    return note


def expected_resume(logdir, checkpoint):
    """What a --resume of `logdir` from `checkpoint` (None: there is none) must say, from
    the logs as they are now: (checkpoint's step or None, {log: (word, bytes found)}), the
    word "missing" or "differed" for a log it must rebuild from the checkpoint's copy, None
    for one that holds the copy (and maybe rows after it, which it cuts)."""
    if checkpoint is None:
        return None, {}
    copies = checkpoint.load_state()["monitor"].get("logs", {})
    expect = {}
    for log in LOGS:
        found, copy = read_bytes(os.path.join(logdir, log)), copies.get(log)
        if copy is not None:
            word = "missing" if found is None else \
                "differed" if found[:len(copy)] != copy else None
            expect[log] = (word, found)
    return checkpoint.step, expect


def check_resume_output(expected, text, logdir):
    """What a resume that did not die abruptly printed, against expected_resume's answer."""
    step, logs_expected = expected
    problems = []
    if step is None and FROM_ZERO not in text:
        problems.append(f"a resume with no checkpoint did not say '{FROM_ZERO}'")
    if step is not None and FROM_ZERO in text:
        problems.append(f"a resume from the checkpoint of step {step:,} said '{FROM_ZERO}'")
    for log, (word, found) in logs_expected.items():
        rebuilt = f"rebuilt from the copy in the checkpoint of step {step:,}"
        said = [line for line in text.splitlines()
                if f"{log} was missing" in line or f"{log} differed" in line]
        if word is None:
            if said:
                problems.append(f"{log} held the checkpoint's copy, yet: {said[0]}")
        elif word == "missing":
            if f"{log} was missing: {rebuilt}" not in text:
                problems.append(f"{log} was missing, and the resume did not say '{log} was "
                                f"missing: {rebuilt}'")
        else:
            kept = re.search(rf"{re.escape(log)} differed from the checkpoint's copy \(kept as "
                             rf"([^)]+)\): {re.escape(rebuilt)}", text)
            if not kept:
                problems.append(f"{log} differed from the checkpoint's copy, and the resume "
                                f"did not say it rebuilt it: {said}")
            elif read_bytes(os.path.join(logdir, kept.group(1))) != found:
                problems.append(f"{kept.group(1)} does not hold the damaged {log}")
    return problems


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def logs(logdir):
    return [[{k: v for k, v in row.items() if k != "hours"}
             for row in rows(os.path.join(logdir, name))]
            for name in LOGS]


def final_step(trial, budget=None):
    """The budget (the game's unless given), rounded up to whole rounds in the fast loop."""
    budget = budget or GAMES[trial.game]["budget"]
    if trial.loop == "nature":
        return budget
    workers = GAMES[trial.game]["workers"]
    return -(-budget // workers) * workers


def expected_evaluations(trial, budget=None):
    """The agent steps at which the run evaluates, from the loops' schedules."""
    game = GAMES[trial.game]
    total, every = budget or game["budget"], game["evaluate"]
    if trial.loop == "nature":
        return sorted({*range(every, total + 1, every), total})
    round_size, steps, step, last = game["workers"], [], 0, 0
    total = final_step(trial, budget)
    while step < total:
        step = next_sync_point(step, trial.period, round_size, total)
        if step // every > last // every or step >= total:
            steps.append(step)
            last = step
    return steps


def checkpoints(logdir):
    path = os.path.join(logdir, "checkpoints")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def check_run(trial, logdir, budget=None, all_trained=True):
    """What must hold of a finished run whose last budget was `budget` (the game's unless
    given); returns a list of problems."""
    problems = []
    final = final_step(trial, budget)
    for log in LOGS:
        data = read_bytes(os.path.join(logdir, log)) or b""
        if not data.endswith(b"\r\n") or data.count(b"\n") != data.count(b"\r\n"):
            problems.append(f"{log} has a line that does not end in \\r\\n, or no line")
    episodes, evals = logs(logdir)
    numbers = [int(row["episode"]) for row in episodes]
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"episodes.csv numbers its games {numbers[:3]}...{numbers[-3:]}")
    steps = [int(row["agent_step"]) for row in episodes]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        problems.append("episodes.csv agent steps do not increase")
    if steps and steps[-1] > final:
        problems.append(f"episodes.csv goes past the final step {final}: {steps[-1]}")
    eval_steps = [int(row["agent_step"]) for row in evals]
    if eval_steps != expected_evaluations(trial, budget):
        problems.append(f"eval.csv at {eval_steps}, expected "
                        f"{expected_evaluations(trial, budget)}")
    names = checkpoints(logdir)
    if any(name.startswith(".partial") for name in names) or len(names) > 2:
        problems.append(f"checkpoints/ holds {names}")
    newest = CheckpointStore(logdir).latest() if names else None
    if newest is None or newest.step != final:
        problems.append(f"the newest checkpoint is {names[-1:]}, not step {final}")
        return problems
    # Keras's optimizers count their updates in their first variable.
    trained = int(newest.load_state()["learner"]["optimizer"][0])
    game = GAMES[trial.game]
    due = minibatches_due(0, final, game["prepopulate"], game["train_freq"])
    if trained != due and (all_trained or trained > due):
        problems.append(f"{trained} minibatches trained, the Nature loop trains {due}")
    return problems


class Segments:
    """What a trial runs next: its first command, then after each stop a resume (with the
    budget cut, if the trial cuts it) or, with no run to resume, the first command again."""

    def __init__(self, trial, workdir):
        self.trial, self.game = trial, GAMES[trial.game]
        self.logdir = os.path.join(workdir, "run")
        self.script = os.path.join(attacks.copy_checkout(workdir) if trial.checkout else ROOT,
                                   trial.script)
        self.command = [self.script, *trial.args(self.logdir)]
        self.budget, self.cut_to = self.game["budget"], None  # cut_to: the cut --timesteps
        self.start = 0  # the step the coming segment starts from: its checkpoint's
        # A budget cut to the very step of a checkpoint without replay leaves no step to
        # refill replay: minibatches still deferred there cannot be trained, and the run must
        # say so (the one case the Nature count cannot hold).
        self.unrepayable = False
        self.expected = None  # what the coming resume must say (expected_resume); None: a start
        self.resumes = 0
        self.kept = False  # the coming resume leaves the cut --timesteps to the checkpoint

    def seconds(self):
        """About how long the coming segment runs: less for a resume or a lowered budget."""
        return self.game["seconds"] * (0.4 + 0.6 * (self.budget - self.start)
                                       / self.game["budget"])

    def watch(self):
        """What run_segment watches to time the coming segment's stop."""
        return os.path.join(self.logdir, "episodes.csv"), self.start, self.budget

    def next(self):
        """Prepare the segment after a stop; returns (notes, problem or None)."""
        self.resumes += 1
        logdir, notes = self.logdir, []
        if not os.path.isfile(os.path.join(logdir, "config.json")):
            # Stopped while its directory was created (only run.lock, if anything, is in
            # it): no run to resume; the user runs the same command again.
            self.expected, self.start = None, 0
            self.command = [self.script, *self.trial.args(logdir)]
            return ["anew"], None
        # A run to resume, from its newest checkpoint or, with none, from step 0.
        notes += [damage_log(os.path.join(logdir, log), what)
                  for when, what, log in self.trial.damage if when == self.resumes]
        try:
            newest = CheckpointStore(logdir, warn=lambda message: None).latest()
        except Exception as error:  # every checkpoint damaged: the resume must refuse
            return notes, f"no usable checkpoint to resume from: {error}"
        if newest is None:
            notes.append("from 0")
        self.start = newest.step if newest else 0
        cut = self.trial.cut
        if cut and self.cut_to is None and self.resumes >= cut[0]:
            self.cut_to = self.budget = self.trial.cut_budget(newest.step if newest else 0,
                                                              self.budget)
            self.unrepayable = (bool(newest) and self.cut_to == newest.step
                                and not self.trial.save_replay)
            notes.append(f"timesteps={self.cut_to}"
                         f"{f' (ckpt {newest.step})' if newest else ''}")
        self.expected = expected_resume(logdir, newest)
        self.command = [self.script, f"--resume={logdir}"]
        # The budget a checkpoint records stays with the run: typed only where the newest
        # checkpoint was written before the cut, as a user would find it.
        recorded = newest.plan.get("timesteps") if newest else None
        self.kept = self.cut_to is not None and recorded == self.cut_to != self.game["budget"]
        if self.cut_to is not None and not self.kept:
            self.command.append(f"--timesteps={self.cut_to}")
        elif self.kept:
            notes.append("kept")
        return notes, None


def output_problems(segments, sent, ready, text):
    """What a segment that handled its stop printed wrongly."""
    problems = [f"'{sign}' in the output ({sent or 'no signal'}):\n{text[-2000:]}"
                for sign in ("Traceback", "Exception in thread", "were not trained")
                if sign in text and not (segments.unrepayable and sign == "were not trained")]
    if segments.expected and ready:
        problems += [f"{problem}:\n{text[-2000:]}"
                     for problem in check_resume_output(segments.expected, text,
                                                        segments.logdir)]
    said = f"keeping what an earlier --resume gave: --timesteps {segments.cut_to or 0:,}"
    if segments.kept and ready and said not in text:
        problems.append(f"a resume without --timesteps did not say '{said}':\n{text[-2000:]}")
    return problems


def exit_problems(sent, abrupt, code, text, logdir):
    """What is wrong with how a segment stopped by signal `sent` ended."""
    if not abrupt and code != 128 + SIGNALS[sent]:
        return [f"{sent} gave exit {code}, not {128 + SIGNALS[sent]}:\n{text[-2000:]}"]
    if abrupt and code not in (-SIGNALS[sent], 128 + SIGNALS[sent], 1):
        return [f"{sent} before signals were handled gave exit {code}:\n{text[-2000:]}"]
    if not abrupt and not any(name.startswith("step-") for name in checkpoints(logdir)):
        return [f"{sent} was handled but left no checkpoint:\n{text[-2000:]}"]
    return []


def run_watched(trial, segments, stop, events):
    """run_segment, with evaluate and plot beside it if the trial runs them."""
    tools = attacks.ToolsBeside(segments.logdir) if trial.beside else None
    result = run_segment(segments.command, stop, segments.seconds(), segments.watch())
    problems = tools.stop() if tools else []
    if tools:
        events.append(f"({' '.join(tools.runs)})")
    return result, problems


def refused_edit(trial, segments, events):
    """Edit a run file before this resume if the trial does (Trial.edit), check that the
    resume refuses it in one line and changes nothing, then put the file back."""
    if not trial.edit or trial.edit[0] != segments.resumes or segments.expected is None:
        return []  # no edit now, or nothing to resume (started anew)
    newest = CheckpointStore(segments.logdir, warn=lambda message: None).latest()
    if newest is not None and newest.finished:
        events.append("[edit: the run had finished]")  # a resume reads no state then
        return []
    note, originals = attacks.edit_value(segments.logdir, trial.edit[1],
                                         random.Random(trial.seed), newest)
    events.append(f"[{note}]")
    if originals is None:
        return []
    before = attacks.snapshot(segments.logdir)
    process = Process(segments.command)
    code = process.wait(RUN_TIMEOUT)
    problems = attacks.refusal_problems(trial.edit[1], code, "".join(process.err), before,
                                        attacks.snapshot(segments.logdir))
    attacks.put_back(originals)
    events.append(f"refused->{code}")
    return problems


def refused_hide(trial, segments, events):
    """Hide the run's checkpoints before this resume if the trial does (Trial.hide), check
    that the resume refuses in one line and changes nothing, then put them back."""
    if not trial.hide or trial.hide[0] != segments.resumes or segments.expected is None:
        return []
    if not CheckpointStore(segments.logdir).steps():
        events.append("[hide: no checkpoint yet]")  # a resume from step 0 is right then
        return []
    note, undo = attacks.hide_checkpoints(segments.logdir, trial.hide[1])
    events.append(f"[{note}]")
    before = attacks.snapshot(segments.logdir)
    process = Process(segments.command)
    code = process.wait(RUN_TIMEOUT)
    problems = attacks.refusal_problems(trial.hide[1], code, "".join(process.err), before,
                                        attacks.snapshot(segments.logdir))
    undo()
    events.append(f"refused->{code}")
    return problems


def run_segments(trial, segments, events):
    """Run, stop and resume until the run ends; returns the problems found on the way."""
    stops = list(trial.stops)
    if trial.on_disk and stops:
        stops[0] = (stops[0][0], f"on:{trial.on_disk}")
    while True:
        stop = stops.pop(0) if stops else None
        command = segments.command
        (code, sent, text, ready), problems = run_watched(trial, segments, stop, events)
        if problems:
            return problems
        if code is None:
            return [f"a process hung ({'after ' + sent if sent else 'running'}) and was "
                    f"killed: {os.path.basename(command[0])} {' '.join(command[1:3])} ..."
                    f":\n{text[-2000:]}"]
        events.append(f"{sent or 'run'}->{code}")
        # SIGKILL, or a signal before the run handles signals, ends it where it stands.
        abrupt = sent is not None and (sent == "SIGKILL" or not ready)
        problems = [] if abrupt else output_problems(segments, sent, ready, text)
        if problems:
            return problems
        if sent is None or code == 0:
            # It ran to its end: before its stop came, or it was finishing when the signal
            # came (a finished run ignores late signals). check_run says if it really ended.
            return [] if code == 0 else [f"exit {code} with no signal sent:\n{text[-2000:]}"]
        problems = exit_problems(sent, abrupt, code, text, segments.logdir)
        if problems:
            return problems
        notes, problem = segments.next()
        if notes:
            events.append(f"[{', '.join(notes)}]")
        if problem:
            return [problem]
        problems = refused_edit(trial, segments, events) + refused_hide(trial, segments,
                                                                        events)
        if problems:
            return problems


def run_trial(trial, workdir):
    """Run one trial in `workdir`; returns (passed, summary line)."""
    started = time.monotonic()
    segments, events = Segments(trial, workdir), []
    problems = run_segments(trial, segments, events)
    budget, logdir = segments.budget, segments.logdir
    if not problems:
        problems += check_run(trial, logdir, budget, all_trained=not segments.unrepayable)
    if not problems and trial.exact:
        straight = os.path.join(workdir, "straight")
        code, _, text, _ = run_segment([segments.script, *trial.args(straight, budget)], None, 0)
        if code != 0:
            problems.append(f"the straight run failed ({code}):\n{text[-2000:]}")
        elif logs(straight) != logs(logdir):
            problems.append(f"the logs differ from the same run uninterrupted "
                            f"(--timesteps={budget})")
    return trial_result(trial, events, problems, started)


# --- suites and the checkout path (--suites): trials drawn from a stream of their own, so
# that a seed's run trials above draw what they always drew.

SUITE_ATTACKS = ("SIGINT", "SIGTERM", "kill-child", "suite.json", "config.json", "checkout")
SUITE_GAME = "pong"  # the suite runs Atari games by name; GAMES["pong"]'s flags after --


@dataclasses.dataclass
class SuiteTrial:
    """A tiny suite (pong, 1-2 seeds, --parallel 1) and one attack, or ("checkout") a
    CartPole run from a copy of the checkout under a non-UTF-8 name, stopped by SIGINT."""
    seed: int
    attack: str = "SIGINT"
    seeds: int = 1
    at: float = 0.5        # the stop: this fraction of the runs' time after the first starts
    stop: str = "SIGINT"   # the signal that stops the suite before a damage attack
    damage: str = None     # suite.json, config.json: how (attacks.JSON_DAMAGES)
    loop: str = "fast"     # checkout: the run's loop

    @classmethod
    def draw(cls, seed):
        rng = random.Random(f"suite-trial-{seed}")  # not Trial.draw's stream
        attack = rng.choice(SUITE_ATTACKS)
        seeds = rng.randint(1, 2)
        at = round(rng.uniform(0.1, 0.9), 2)
        stop = attack if attack in ("SIGINT", "SIGTERM") else rng.choice(["SIGINT", "SIGTERM"])
        damage = rng.choice(attacks.JSON_DAMAGES) if attack.endswith(".json") else None
        loop = rng.choice(["fast", "nature"])
        return cls(seed, attack, seeds, at, stop, damage, loop)

    def run_trial(self):
        """checkout: the run trial it is."""
        return Trial(self.seed, "cartpole", self.loop, stops=[("SIGINT", self.at)],
                     checkout=True)

    def describe(self):
        if self.attack == "checkout":
            return f"checkout {self.run_trial().describe()} SIGINT@{self.at:g}"
        text = f"suite {SUITE_GAME}x{self.seeds} {self.attack}"
        if self.attack.endswith(".json"):
            text += f"-{self.damage} after {self.stop}"
        return text + f"@{self.at:g}"

    def command(self, logdir):
        game = GAMES[SUITE_GAME]
        return ["-m", "fast_dqn", "suite", f"--games={SUITE_GAME}", f"--seeds={self.seeds}",
                f"--timesteps={game['budget']}", "--parallel=1", "--plain",
                f"--logdir={logdir}", "--",
                *[flag for flag in game["flags"] if not flag.startswith("--game=")],
                f"--prepopulate={game['prepopulate']}", f"--train-freq={game['train_freq']}",
                f"--evaluate={game['evaluate']}", f"--target-update-freq={game['periods'][0]}",
                f"--checkpoint-freq={CHECKPOINT_FREQS[0]}", f"--workers={game['workers']}",
                "--env-backend=python"]


def suite_segment(command, stop=None, at=0.0, seconds=0.0):
    """Run the suite `command`; with `stop`, send it (SIGKILL: to its running child) `at` of
    `seconds` after its first run starts. Returns (exit code or None for a hang, signal sent
    or None, output, stderr)."""
    process, sent = Process(command), None
    if stop:
        deadline = None
        while process.popen.poll() is None and (deadline is None or
                                                time.monotonic() < deadline):
            if deadline is None and any(": started" in line or ": resumed" in line
                                        for line in list(process.out)):
                deadline = time.monotonic() + at * seconds
            time.sleep(0.05)
        while process.popen.poll() is None and sent is None:
            targets = attacks.children(process.popen.pid) if stop == "SIGKILL" \
                else [process.popen.pid]
            for pid in targets[:1]:
                os.kill(pid, SIGNALS[stop])
                sent = stop if stop != "SIGKILL" else "SIGKILL-child"
            time.sleep(0.05)
    code = process.wait(RUN_TIMEOUT)
    return code, sent, process.text, "".join(process.err)


def suite_runs(trial, logdir):
    return [os.path.join(logdir, SUITE_GAME, f"seed-{s}") for s in range(trial.seeds)]


def check_suite_run(run_dir):
    """check_run for a suite's run, and no traceback in its log."""
    seed = int(run_dir.rpartition("-")[2])
    problems = check_run(Trial(seed, SUITE_GAME, "fast", period=GAMES[SUITE_GAME]["periods"][0]),
                         run_dir)
    if "Traceback" in (read_bytes(run_dir + ".log") or b"").decode(errors="replace"):
        problems.append(f"a traceback in {run_dir}.log")
    return [f"{os.path.basename(run_dir)}: {problem}" for problem in problems]


def refused_damage(trial, logdir, events):
    """Damage suite.json or a run's config.json, run the suite again and check it refuses
    (suite.json: exit 2, one line, nothing changed) or names the run and leaves it alone
    (config.json: exit 1, the other runs finished); then put the file back."""
    if trial.attack == "suite.json":
        path = os.path.join(logdir, "suite.json")
    else:
        path = next((os.path.join(run, "config.json") for run in suite_runs(trial, logdir)
                     if os.path.isfile(os.path.join(run, "config.json"))), None)
    if path is None or not os.path.isfile(path):
        events.append(f"[no {trial.attack} yet]")
        return []
    original = attacks.damage_json(path, trial.damage)
    run_dir = os.path.dirname(path)
    events.append(f"[{trial.damage}:{os.path.relpath(path, logdir)}]")
    before = attacks.suite_snapshot(run_dir)
    code, _, text, err = suite_segment(trial.command(logdir))
    events.append(f"refused->{code}")
    problems = [f"a traceback:\n{text[-2000:]}"] if "Traceback" in text else []
    if trial.attack == "suite.json":
        lines = [line for line in err.splitlines() if line.strip()]
        if code != 2 or len(lines) != 1:
            problems.append(f"a damaged suite.json gave exit {code} and {len(lines)} lines, "
                            f"not 2 with one line:\n{err[-2000:]}")
    else:
        name = f"{SUITE_GAME}/{os.path.basename(run_dir)}"
        if code != 1 or f"{name} is left out" not in err:
            problems.append(f"a damaged config.json gave exit {code}, not 1 naming {name}:"
                            f"\n{err[-2000:]}")
        for other in suite_runs(trial, logdir):
            if other != run_dir:
                problems += check_suite_run(other)
    if attacks.suite_snapshot(run_dir) != before:
        changed = attacks.suite_snapshot(run_dir)
        problems.append("the refused suite changed " + str(sorted(
            p for p in set(before) | set(changed) if before.get(p) != changed.get(p))))
    with open(path, "wb") as f:
        f.write(original)
    return problems


def suite_attack(trial, logdir, events):
    """The drawn attack on the suite, up to the rerun that must finish it."""
    command = trial.command(logdir)
    stop = {"kill-child": "SIGKILL"}.get(trial.attack, trial.stop)
    code, sent, text, err = suite_segment(command, stop, trial.at,
                                          trial.seeds * GAMES[SUITE_GAME]["seconds"])
    events.append(f"{sent or 'suite'}->{code}" + (" (retried)" if "retrying once" in text
                                                   else ""))
    if code is None:
        return [f"the suite hung:\n{text[-2000:]}"]
    if "Traceback" in text:
        return [f"a traceback ({sent}):\n{text[-2000:]}"]
    if sent == "SIGKILL-child":
        expected = (0, 1)
    elif sent:
        expected = (128 + SIGNALS[sent], 0)
        if code != 0 and f"stopped by {sent}" not in err:
            return [f"{sent} to the suite did not say 'stopped by {sent}':\n{err[-2000:]}"]
    else:
        expected = (0,)
    if code not in expected:
        return [f"the suite gave exit {code} after {sent}, not one of {expected}:"
                f"\n{text[-2000:]}"]
    return refused_damage(trial, logdir, events) if trial.attack.endswith(".json") else []


def run_suite_trial(trial, workdir):
    """Run one SuiteTrial in `workdir`; returns (passed, summary line)."""
    if trial.attack == "checkout":
        passed, line = run_trial(trial.run_trial(), workdir)
        return passed, line.replace(trial.run_trial().describe(), trial.describe(), 1)
    started, events = time.monotonic(), []
    logdir = os.path.join(workdir, "suite")
    problems = suite_attack(trial, logdir, events)
    for again in ("finish", "nothing"):  # the same command finishes it, then starts nothing
        if problems:
            break
        code, _, text, _ = suite_segment(trial.command(logdir))
        events.append(f"{'again' if again == 'finish' else 'rerun'}->{code}")
        if code != 0 or "Traceback" in text:
            problems.append(f"the same command again gave exit {code}:\n{text[-2000:]}")
        elif again == "nothing" and (": started" in text or ": resumed" in text):
            problems.append(f"a finished suite's rerun started a run:\n{text[-2000:]}")
    if not problems:
        for run_dir in suite_runs(trial, logdir):
            problems += check_suite_run(run_dir)
    return trial_result(trial, events, problems, started)


# --- a GPU session's damaged output folder (--tables): benchmarks.gpu_table, not a run,
# from a stream of its own.

@dataclasses.dataclass
class TableTrial:
    """One file of a GPU session's output folder damaged (attacks.TABLE_DAMAGES), then
    benchmarks.gpu_table run on the folder (attacks.table_problems says what it must do)."""
    seed: int
    file: str = "speedtest.csv"
    how: str = "cut"
    at: float = 0.5  # the byte, figure or column the damage picks, as a fraction

    @classmethod
    def draw(cls, seed):
        rng = random.Random(f"table-trial-{seed}")  # neither Trial's stream nor SuiteTrial's
        return cls(seed, rng.choice(attacks.TABLE_FILES), rng.choice(attacks.TABLE_DAMAGES),
                   round(rng.random(), 3))

    def describe(self):
        return f"table {self.how}:{self.file}@{self.at:g}"


def run_table_trial(trial, workdir):
    """Run one TableTrial in `workdir`; returns (passed, summary line)."""
    started, events = time.monotonic(), []
    folder = os.path.join(workdir, "session")
    shutil.copytree(attacks.SESSION, folder)
    events.append(attacks.damage_table_file(folder, trial.file, trial.how, trial.at))
    before = attacks.snapshot(folder)
    code, out, err = attacks.run_table(folder)
    events.append(f"gpu_table->{code}")
    problems = attacks.table_problems(trial.file, trial.how, code, out, err, before,
                                      attacks.snapshot(folder))
    return trial_result(trial, events, problems, started)


def trial_result(trial, events, problems, started):
    """(passed, the trial's line): what it did, ok or FAILED, its time, then each problem."""
    passed = not problems
    line = (f"trial {trial.seed}: {trial.describe()} | {' '.join(events)} | "
            f"{'ok' if passed else 'FAILED'} ({time.monotonic() - started:.0f} s)")
    for problem in problems:
        line += "\n    " + problem.replace("\n", "\n    ")
    return passed, line


# The fixed trials, each built by hand for one case (python -m benchmarks.crash_fuzzer
# --fixed). Their seeds are their names: 1 to 9, none drawn. tests/faults/test_stops_and_kills.py
# runs trials 1 and 9, each of which reproduces a defect that was fixed (that file names them);
# what the others stop and check is proven in the suite by tests of its own (docs/testing.md,
# "The crash fuzzer's fixed trials").
FIXED = [
    # The reported failure: Ctrl-C mid-period without --save-replay, then resume.
    # evaluate and plot run beside it all along, and before the resume a value of the
    # checkpoint's state.json is replaced: that resume refuses in one line, changing nothing.
    Trial(1, "cartpole", "fast", "python", False, 800, [("SIGINT", 0.5)], beside=True,
          edit=(1, "state.json")),
    # kill -9, then a clean stop: the logs must equal an uninterrupted run's.
    Trial(2, "pong", "fast", "python", True, 96, [("SIGKILL", 0.5), ("SIGINT", 0.3)]),
    # Games that cannot be saved, no replay: the Nature loop and the vector backend.
    Trial(3, "pong", "nature", "python", False, 96, [("SIGTERM", 0.4)]),
    Trial(4, "pong", "fast", "vector", False, 800, [("SIGTERM", 0.6), ("SIGKILL", 0.2)]),
    # kill -9 the instant config.json appears (none is periodic), then --resume: it starts
    # again from step 0 with the saved settings, and logs what a straight run logs.
    Trial(6, "cartpole", "nature", "python", True, 96, [("SIGKILL", 0.3)],
          checkpoint_freq=100_000, on_disk="config.json"),
    # Ctrl-C mid-period on the fast loop, the instant its first checkpoint is begun, resumed
    # with --timesteps a tenth of the way from the checkpoint to the budget, off a multiple
    # of the workers: the period's minibatches past the new end are taken back, and the logs
    # equal a straight run's with that budget.
    Trial(7, "cartpole", "fast", "python", True, 800, [("SIGINT", 0.5)],
          cut=(1, 0.1, True), on_disk=".partial-"),
    # The budget cut at the first resume, then Ctrl-C: the second resume gives no
    # --timesteps, goes on to the cut budget its checkpoint recorded, and says so.
    # Before the second resume, its step-* folders renamed: that resume refuses in one line
    # and changes nothing (it once discarded the logs and started again from step 0).
    Trial(9, "cartpole", "nature", "python", True, 96, [("SIGINT", 0.4), ("SIGINT", 0.4)],
          cut=(1, 0.8, False), hide=(2, "renamed")),
    # eval.csv deleted and episodes.csv converted by dos2unix between runs: both rebuilt from
    # the checkpoint's copy, the converted one kept aside, and the logs as a straight run's.
    # A value of config.json replaced too: that resume refuses it first.
    Trial(8, "cartpole", "nature", "python", True, 96, [("SIGTERM", 0.5)],
          damage=[(1, "delete", "eval.csv"), (1, "dos2unix", "episodes.csv")],
          edit=(1, "config.json")),
]
# What a fixed trial's line must show it did, or the trial did not test what it is there for
# (a stop that came too late to be resumed, say): by the trial's seed.
FIXED_SIGNS = {1: ["(evaluate->", "[state:/", "refused->2"], 6: ["SIGKILL->", "[from 0]"],
               7: ["[timesteps="],
               9: ["[timesteps=", "kept", "step-* renamed]", "refused->2"],
               8: ["delete:eval.csv,", "dos2unix:episodes.csv]", "[config:", "refused->2"]}


def fixed_trial(seed):
    """The fixed trial of that seed."""
    return next(trial for trial in FIXED if trial.seed == seed)


def run_fixed_trial(trial, workdir):
    """run_trial, and a fixed trial that passed but did not do what it is there for fails."""
    passed, line = run_trial(trial, workdir)
    missing = [sign for sign in FIXED_SIGNS.get(trial.seed, []) if sign not in line]
    if passed and missing:
        passed = False
        head, _, tail = line.rpartition("| ok (")
        line = f"{head}| FAILED ({tail}\n    it did not do what it is there for: no " \
               f"{missing} in its line"
    return passed, line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, help="how many trials to draw (default 100)")
    parser.add_argument("--seed", type=int, help="trial i uses seed + i (default 0)")
    parser.add_argument("--fixed", action="store_true",
                        help=f"run the {len(FIXED)} fixed trials (FIXED), not drawn ones")
    parser.add_argument("--suites", action="store_true",
                        help="draw suite trials and the checkout path's (SuiteTrial), not runs")
    parser.add_argument("--tables", action="store_true",
                        help="draw damaged GPU session folders for benchmarks.gpu_table "
                             "(TableTrial), not runs")
    parser.add_argument("--keep", help="keep each trial's runs under this directory")
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args(argv)
    if args.fixed and (args.trials is not None or args.seed is not None):
        parser.error("--fixed runs the fixed trials, which are not drawn: drop --trials and "
                     "--seed")
    kinds = [flag for flag, given in (("--fixed", args.fixed), ("--suites", args.suites),
                                      ("--tables", args.tables)) if given]
    if len(kinds) > 1:
        parser.error(f"{' and '.join(kinds)} are {('two', 'three')[len(kinds) - 2]} kinds of "
                     "trial: give one")
    first = 0 if args.seed is None else args.seed
    count = 100 if args.trials is None else args.trials
    if args.fixed:
        trials, run = FIXED, run_fixed_trial
    elif args.suites:
        trials = [SuiteTrial.draw(seed) for seed in range(first, first + count)]
        run = run_suite_trial
    elif args.tables:
        trials = [TableTrial.draw(seed) for seed in range(first, first + count)]
        run = run_table_trial
    else:
        trials, run = [Trial.draw(seed) for seed in range(first, first + count)], run_trial
    results = []
    for trial in trials:
        seed = trial.seed
        workdir = tempfile.mkdtemp(prefix=f"fuzz-{seed}-", dir=args.keep)
        passed, line = run(trial, workdir)
        print(line, flush=True)
        results.append({"seed": seed, "trial": dataclasses.asdict(trial), "passed": passed,
                        "line": line})
        if passed and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    failed = [r["seed"] for r in results if not r["passed"]]
    print(f"{len(results)} trials, {len(results) - len(failed)} passed"
          f"{', failed: ' + ' '.join(map(str, failed)) if failed else ''}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
