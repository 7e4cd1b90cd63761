"""A suite's runs on this machine, K at a time, each the training command in its own process.

Threads: one per lane (K), each only starting a run's process and waiting for it; they share
nothing but `Lanes.processes`, under its lock, which the stop reads to signal every run once.
Each run's process has a session of its own, so a Ctrl-C at the terminal reaches the suite
alone, which then sends each run one SIGTERM: the run checkpoints and exits.
"""

import os
import signal
import subprocess
import threading
import time

from fast_dqn.suite.plan import (
    FINISHED,
    command,
    form_groups,
    group_command,
    group_log,
    last_checkpoint_step,
    log_tail,
    run_state,
)

# A training command's exit statuses after a stop by a signal: its checkpoint is written.
STOPPED = (128 + signal.SIGINT, 128 + signal.SIGTERM)


class Outcome:
    """How a run's last attempt ended: finished, stopped, refused or failed.

    Args:
        run: the suite's Run that was attempted.
        state: "finished", "stopped" (by the suite, checkpointed), "refused" or "failed".
        status: the training command's exit status, or None where it has none.
        last_line: the last line of the run's log, for a refusal or failure; or None.
    """

    def __init__(self, run, state, status=None, last_line=None):
        self.run, self.state, self.status, self.last_line = run, state, status, last_line


def classify(run, suite, status, finished=None):
    """The Outcome of a run's attempt, from its exit `status` and its files.

    `finished` says whether the run's files say it finished, read where it ran; None reads
    them here, against the suite's budget.
    """
    if status == 0:
        if finished is None:
            finished = run_state(run, suite.timesteps) == FINISHED
        return Outcome(run, "finished" if finished else "failed", status, last_line(run.log))
    if status in STOPPED:
        return Outcome(run, "stopped", status)
    return Outcome(run, "refused" if status == 2 else "failed", status, last_line(run.log))


def classify_member(run, suite, status):
    """The Outcome of a run of a group: finished by its own files, else by the group's exit.

    A group's exit status speaks for all its runs (1: one failed), not for each.
    """
    if run_state(run, suite.timesteps) == FINISHED:
        return Outcome(run, "finished", status, last_line(run.log))
    return classify(run, suite, status, finished=False)


def last_line(path):
    """The last line a run printed, for a failure's report."""
    tail = log_tail(path)
    if tail is None:
        return "(no log)"
    lines = [line.strip() for line in tail if line.strip()]
    return lines[-1] if lines else "(empty log)"


class Lanes:
    """The suite's runs on this machine, at most `parallel` at a time.

    A run that fails is started once more (from its checkpoint), then left for the user.

    Args:
        suite: the Suite whose runs are played.
        runs: the Runs to play, in order.
        parallel: the most runs at a time (K), one lane each.
        threads: the --threads (and --env-threads) each run is given, or None.
        env: the environment variables of each run's process.
        stopping: a threading.Event asking every run to checkpoint, and no new one to start.
        tell: a callable that hears, as a sentence, each start, end and retry.
        runs_per_process: G; above 1 each lane's process trains G runs of one agent step as a
            run group (`fast-dqn group`); a failed group's unfinished runs are retried regrouped.
    """

    def __init__(self, suite, runs, parallel, threads, env, stopping, tell,
                 runs_per_process=1):
        self.suite, self.parallel, self.threads = suite, parallel, threads
        self.env, self.stopping, self.tell = env, stopping, tell
        self.runs_per_process = runs_per_process
        self.queue = [[run] for run in runs] if runs_per_process == 1 else \
            form_groups(runs, runs_per_process, suite.timesteps)
        self.outcomes = {}
        self.processes = {}  # run name -> Popen, while it runs
        self.signalled = set()
        self.lock = threading.Lock()

    def run(self):
        """Play every run, and return {run name: Outcome} once every lane is done."""
        lanes = [threading.Thread(target=self._lane, name=f"suite-lane-{i}", daemon=True)
                 for i in range(min(self.parallel, len(self.queue)))]
        for lane in lanes:
            lane.start()
        while any(lane.is_alive() for lane in lanes):
            if self.stopping.is_set():
                self.signal_all()
            time.sleep(0.5)
        return self.outcomes

    def running(self):
        """The names of the runs whose process is running now."""
        with self.lock:
            return [run for name in self.processes for run in name.split(" + ")]

    def lanes(self):
        """The most runs at a time (K)."""
        return self.parallel

    def close(self):
        pass  # nothing held: each lane's process has ended

    def signal_all(self):
        """One SIGTERM to every run not yet sent one: each checkpoints, then exits."""
        with self.lock:
            for name, process in self.processes.items():
                if name not in self.signalled and process.poll() is None:
                    self.signalled.add(name)
                    try:
                        process.send_signal(signal.SIGTERM)
                    except ProcessLookupError:
                        pass

    def kill_all(self):
        """Kill every run still running, checkpoint or not."""
        with self.lock:
            for process in self.processes.values():
                if process.poll() is None:
                    process.kill()

    def _next(self):
        with self.lock:
            if self.stopping.is_set() or not self.queue:
                return None
            return self.queue.pop(0)

    def _lane(self):
        try:
            self._take_runs()
        except Exception as error:  # noqa: BLE001 - the lane's run is named, not lost
            self.tell(f"a lane stopped on {type(error).__name__}: {error}")

    def _take_runs(self):
        while (runs := self._next()) is not None:
            if len(runs) > 1:
                self._take_group(runs)
                continue
            run = runs[0]
            outcome = self._attempt(run)
            if outcome.state == "failed" and not self.stopping.is_set():
                self.tell(f"{run.name} failed (exit {outcome.status}): {outcome.last_line}; "
                          f"retrying once from its last checkpoint (log: {run.log})")
                outcome = self._attempt(run)
            self.outcomes[run.name] = outcome
            self.tell(_ended(outcome))

    def _take_group(self, runs):
        outcomes = self._attempt_group(runs)
        failed = [o.run for o in outcomes if o.state == "failed"]
        if failed and not self.stopping.is_set():
            self.tell(f"{', '.join(r.name for r in failed)} failed (exit "
                      f"{outcomes[0].status}); retrying once from their last checkpoints, "
                      "regrouped by step")
            again = {}
            for group in form_groups(failed, self.runs_per_process, self.suite.timesteps):
                tried = self._attempt_group(group) if len(group) > 1 else \
                    [self._attempt(group[0])]
                again.update((o.run.name, o) for o in tried)
            outcomes = [again.get(o.run.name, o) for o in outcomes]
        for outcome in outcomes:
            self.outcomes[outcome.run.name] = outcome
            self.tell(_ended(outcome))

    def _attempt(self, run):
        argv = command(self.suite, run, self.threads)
        os.makedirs(os.path.dirname(run.run_dir), exist_ok=True)
        with open(run.log, "ab") as log:
            log.write(f"\n$ {' '.join(argv)}\n".encode())
            log.flush()
            status = self._process(run.name, argv, log, f"{run.name}: "
                                   f"{'resumed' if '--resume' in ' '.join(argv) else 'started'}"
                                   f" (log: {run.log})")
        return classify(run, self.suite, status)

    def _attempt_group(self, runs):
        """One process for the group; each run's console goes to its own log."""
        argv = group_command(self.suite, runs, self.threads)
        name = " + ".join(run.name for run in runs)
        for run in runs:
            os.makedirs(os.path.dirname(run.run_dir), exist_ok=True)
            with open(run.log, "ab") as log:
                log.write(f"\n$ {' '.join(argv)}\n(this run's console, one of a group of "
                          f"{len(runs)}: {name})\n".encode())
        path = group_log(runs)
        with open(path, "ab") as log:
            log.write(f"\n$ {' '.join(argv)}\n".encode())
            log.flush()
            status = self._process(name, argv, log, f"{name}: a group of {len(runs)} in one "
                                   f"process (its log: {path}; each run's console: RUN_DIR.log)")
        return [classify_member(run, self.suite, status) for run in runs]

    def _process(self, name, argv, log, started):
        """Start argv with its output in log, and wait for it; its exit status."""
        with self.lock:
            if self.stopping.is_set():
                return STOPPED[1]
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=self.env,
                                       start_new_session=True)
            self.processes[name] = process
            self.signalled.discard(name)
        self.tell(started)
        status = process.wait()
        with self.lock:
            del self.processes[name]
        if status < 0:  # killed by a signal before its handlers were set: as the shell counts
            status = 128 - status
        return status


def _ended(outcome):
    run = outcome.run
    if outcome.state == "finished":
        return f"{run.name}: finished"
    if outcome.state == "stopped":
        step = last_checkpoint_step(run.run_dir)
        return (f"{run.name}: stopped with a checkpoint at step {step:,}" if step is not None
                else f"{run.name}: stopped before its first checkpoint; it starts again")
    return f"{run.name}: {outcome.state} (exit {outcome.status}): {outcome.last_line}"
