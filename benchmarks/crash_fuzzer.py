"""Crash fuzzer: tiny runs stopped at random moments, resumed until done, then checked.

    python -m benchmarks.crash_fuzzer [--trials 100] [--seed 0] [--keep DIR]

Trial i (seed + i) draws a run: CartPole or Pong, the Nature or the fast loop, the python or
the vector backend (Pong, fast loop), replay saved or not, a short or a long target period.
It starts the run and stops it one to three times, each with SIGINT, SIGTERM or SIGKILL at a
random moment, resuming it each time, then lets the last resume finish. A stop that comes
before the run's first checkpoint leaves nothing to resume, so the trial starts the run
again, as a user would. Then it checks what a user relies on:
- a stop by SIGINT or SIGTERM exits 128 + the signal after a checkpoint, and no process
  that was not killed prints a traceback or leaves minibatches untrained;
- the last process exits 0, and the newest checkpoint is at the budget and has trained
  exactly the Nature loop's number of minibatches;
- episodes.csv numbers its games 1, 2, 3, ... at increasing agent steps; eval.csv has exactly
  the evaluations the schedule makes, in order;
- at most 2 checkpoints, and no partial checkpoint directory;
- python backend with replay saved: the same logs as the same run uninterrupted.
It prints a line per trial and exits 1 if any trial failed.
"""

import argparse
import csv
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from fast_dqn.loops.fast_loop import next_sync_point
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.run.checkpoint import CheckpointStore

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
                     flags=["--env=CartPole-v1", "--eval-episodes=2", "--checkpoint-freq=400"]),
    "pong": dict(budget=1200, evaluate=600, workers=4, seconds=18, periods=(96, 800),
                 prepopulate=300, train_freq=4,
                 flags=["--game=pong", "--replay-capacity=2000", "--max-episode-steps=300",
                        "--eval-episodes=1", "--checkpoint-freq=400"]),
}


@dataclasses.dataclass
class Trial:
    seed: int
    game: str = "cartpole"
    loop: str = "fast"              # fast or nature
    backend: str = "python"         # python or vector (Pong's fast loop only)
    save_replay: bool = False
    period: int = 96
    stops: list = dataclasses.field(default_factory=list)  # (signal name, fraction of run)

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
        return cls(seed, game, loop, backend, rng.random() < 0.5,
                   rng.choice(GAMES[game]["periods"]), stops)

    @property
    def script(self):
        return "run_fast_dqn.py" if self.loop == "fast" else "run_dqn.py"

    @property
    def exact(self):
        """Whether a split run must log exactly what a straight run logs."""
        return self.save_replay and self.backend == "python"

    def args(self, logdir):
        game = GAMES[self.game]
        args = [*game["flags"], f"--timesteps={game['budget']}",
                f"--prepopulate={game['prepopulate']}", f"--train-freq={game['train_freq']}",
                f"--evaluate={game['evaluate']}", f"--target-update-freq={self.period}",
                f"--seed={self.seed}", f"--logdir={logdir}"]
        if self.save_replay:
            args.append("--save-replay")
        if self.loop == "fast":
            args += [f"--workers={game['workers']}", f"--env-backend={self.backend}"]
        return args

    def describe(self):
        return (f"{self.game} {self.loop} {self.backend} "
                f"replay={'saved' if self.save_replay else 'no'} period={self.period}")


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


def run_segment(command, stop, seconds):
    """Run `command`; with stop = (signal name, fraction), signal it that far into the run.
    Returns (exit code or None for a hang, signal sent or None, output, started)."""
    process = Process(command)
    sent = None
    if stop:
        name, fraction = stop
        if fraction < 0:
            time.sleep(-fraction * 10)  # somewhere in the startup
        else:
            while not process.started.wait(0.1) and process.popen.poll() is None:
                pass
            time.sleep(fraction * seconds)
        if process.popen.poll() is None:
            process.popen.send_signal(SIGNALS[name])
            sent = name
        code = process.wait(EXIT_TIMEOUT)
    else:
        code = process.wait(RUN_TIMEOUT)
    return code, sent, process.text, process.started.is_set()


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def logs(logdir):
    return [[{k: v for k, v in row.items() if k != "hours"}
             for row in rows(os.path.join(logdir, name))]
            for name in ("episodes.csv", "eval.csv")]


def final_step(trial):
    """The budget, rounded up to whole rounds in the fast loop."""
    budget = GAMES[trial.game]["budget"]
    if trial.loop == "nature":
        return budget
    workers = GAMES[trial.game]["workers"]
    return -(-budget // workers) * workers


def expected_evaluations(trial):
    """The agent steps at which the run evaluates, from the loops' schedules."""
    game = GAMES[trial.game]
    total, every = game["budget"], game["evaluate"]
    if trial.loop == "nature":
        return sorted({*range(every, total + 1, every), total})
    round_size, steps, step, last = game["workers"], [], 0, 0
    total = final_step(trial)
    while step < total:
        step = next_sync_point(step, trial.period, round_size, total)
        if step // every > last // every or step >= total:
            steps.append(step)
            last = step
    return steps


def checkpoints(logdir):
    path = os.path.join(logdir, "checkpoints")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def check_run(trial, logdir):
    """What must hold of a finished run; returns a list of problems."""
    problems = []
    episodes, evals = logs(logdir)
    numbers = [int(row["episode"]) for row in episodes]
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"episodes.csv numbers its games {numbers[:3]}...{numbers[-3:]}")
    steps = [int(row["agent_step"]) for row in episodes]
    if any(b <= a for a, b in zip(steps, steps[1:])):
        problems.append("episodes.csv agent steps do not increase")
    budget = GAMES[trial.game]["budget"]
    if steps and steps[-1] > budget + GAMES[trial.game]["workers"]:
        problems.append(f"episodes.csv goes past the budget: {steps[-1]}")
    eval_steps = [int(row["agent_step"]) for row in evals]
    if eval_steps != expected_evaluations(trial):
        problems.append(f"eval.csv at {eval_steps}, expected {expected_evaluations(trial)}")
    names = checkpoints(logdir)
    if any(name.startswith(".partial") for name in names) or len(names) > 2:
        problems.append(f"checkpoints/ holds {names}")
    final = final_step(trial)
    newest = CheckpointStore(logdir).latest() if names else None
    if newest is None or newest.step != final:
        problems.append(f"the newest checkpoint is {names[-1:]}, not step {final}")
        return problems
    # Keras's optimizers count their updates in their first variable.
    trained = int(newest.load_state()["learner"]["optimizer"][0])
    game = GAMES[trial.game]
    due = minibatches_due(0, final, game["prepopulate"], game["train_freq"])
    if trained != due:
        problems.append(f"{trained} minibatches trained, the Nature loop trains {due}")
    return problems


def run_trial(trial, workdir):
    """Run one trial in `workdir`; returns (passed, summary line)."""
    started = time.monotonic()
    game = GAMES[trial.game]
    logdir = os.path.join(workdir, "run")
    script = os.path.join(ROOT, trial.script)
    events, problems = [], []
    stops = list(trial.stops)
    command = [script, *trial.args(logdir)]
    restarts = 0
    while True:
        stop = stops.pop(0) if stops else None
        code, sent, text, ready = run_segment(command, stop, game["seconds"])
        if code is None:
            problems.append(f"a process hung ({'after ' + sent if sent else 'running'})")
            break
        events.append(f"{sent or 'run'}->{code}")
        # SIGKILL, or a signal before the run handles signals, ends it where it stands.
        abrupt = sent is not None and (sent == "SIGKILL" or not ready)
        if not abrupt:
            problems += [f"'{sign}' in the output ({sent or 'no signal'}):\n{text[-2000:]}"
                         for sign in ("Traceback", "Exception in thread", "were not trained")
                         if sign in text]
            if problems:
                break
        if sent is None or code == 0:
            # It ran to its end: before its stop came, or it was finishing when the signal
            # came (a finished run ignores late signals). check_run says if it really ended.
            if code != 0:
                problems.append(f"exit {code} with no signal sent:\n{text[-2000:]}")
            break
        if not abrupt and code != 128 + SIGNALS[sent]:
            problems.append(f"{sent} gave exit {code}, not {128 + SIGNALS[sent]}:\n"
                            f"{text[-2000:]}")
            break
        if abrupt and code not in (-SIGNALS[sent], 128 + SIGNALS[sent], 1):
            problems.append(f"{sent} before signals were handled gave exit {code}")
            break
        has_checkpoint = any(name.startswith("step-") for name in checkpoints(logdir))
        if not abrupt and not has_checkpoint:
            problems.append(f"{sent} was handled but left no checkpoint:\n{text[-2000:]}")
            break
        if has_checkpoint:
            command = [script, f"--resume={logdir}"]
        else:
            # Stopped before any checkpoint: nothing to resume; start the run again.
            shutil.rmtree(logdir, ignore_errors=True)
            command = [script, *trial.args(logdir)]
            restarts += 1
    if not problems:
        problems += check_run(trial, logdir)
    if not problems and trial.exact:
        straight = os.path.join(workdir, "straight")
        code, _, text, _ = run_segment([script, *trial.args(straight)], None, 0)
        if code != 0:
            problems.append(f"the straight run failed ({code}):\n{text[-2000:]}")
        elif logs(straight) != logs(logdir):
            problems.append("the logs differ from the same run uninterrupted")
    passed = not problems
    line = (f"trial {trial.seed}: {trial.describe()} | {' '.join(events)}"
            f"{f' ({restarts} restarts)' if restarts else ''} | "
            f"{'ok' if passed else 'FAILED'} ({time.monotonic() - started:.0f} s)")
    for problem in problems:
        line += "\n    " + problem.replace("\n", "\n    ")
    return passed, line


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="trial i uses seed + i")
    parser.add_argument("--keep", help="keep each trial's runs under this directory")
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args(argv)
    results = []
    for seed in range(args.seed, args.seed + args.trials):
        trial = Trial.draw(seed)
        workdir = tempfile.mkdtemp(prefix=f"fuzz-{seed}-", dir=args.keep)
        passed, line = run_trial(trial, workdir)
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
