"""A suite's runs as Ray tasks: each asks for its CPUs (and a GPU, or a share of one) and Ray
places it on a node that has them.

What Ray does, it does here: placement, and retrying a task whose node or worker died
(max_retries). A retried task starts the training command again on another node, which finds
the run's checkpoint in the run directory, so the run directory must be on storage every node
reaches (docs/ray.md). The run's process dies with the task's worker (PR_SET_PDEATHSIG), as
after a `kill -9`: nothing is lost that the last checkpoint holds, and its lock is released
for the retry. A run that fails is started once more by the driver, then left for the user.
The driver thread only submits, waits and cancels; the tasks run on the workers.
"""

import os
import signal
import time

from fast_dqn.run.logs.progress import counted
from fast_dqn.suite.local_runs import Outcome, classify

# A node that dies mid-run: Ray starts the task again elsewhere, up to this many times.
NODE_RETRIES = 3
# A run directory locked by a process on a node that died stays locked on NFS until the
# server's lease ends (about 90 s for NFSv4): the retry waits this long for it, at most.
LOCK_WAIT_SECONDS = 300


def counted_share(n, noun):
    """`n nouns` in good grammar, n a share as Ray counts them: 0.5 GPUs, 1 GPU, 2 GPUs."""
    return counted(int(n), noun) if float(n).is_integer() else f"{n:g} {noun}s"


def _pdeathsig():
    """prctl, found in the parent (between fork and exec a threaded worker's child may call it,
    but not load a library), or None where the C library has none."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _pdeathsig()


def _die_with(parent):
    def arm():
        if _PRCTL is not None:
            _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the worker died before the line above took effect
            os._exit(1)
    return arm


def train_task(suite, run, threads, gpus=0.0):
    """The body of a run's task, on its node: the training command, to its end or a cancel.

    A cancel stops the run with a checkpoint. Whether it finished is read here, where the run
    wrote its files.

    Args:
        suite: the Suite the run belongs to.
        run: the run to train, of `suite.runs()`.
        threads: the run's --threads: its CPUs.
        gpus: the GPUs the task asked Ray for; a fraction shares one.

    Returns:
        (exit status of the training command, whether the run's files say it finished).
    """
    from fast_dqn.suite.local_runs import last_line
    from fast_dqn.suite.plan import FINISHED, run_state
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        status = _train_once(suite, run, threads, gpus)
        # Exit 2 with the lock of another host: a node that died still holds it on NFS.
        if status != 2 or "is in use by" not in last_line(run.log) or \
                time.monotonic() > deadline:
            return status, run_state(run, suite.timesteps) == FINISHED
        time.sleep(15)


def train_group_task(suite, runs, threads, gpus=0.0):
    """The body of a run group's task, on its node: `fast-dqn group` of `runs`, to its end.

    As train_task, for G runs in one process: the group's lines go to its own log
    (fast_dqn.suite.plan.group_log), each run's console to the run's.

    Args:
        suite: the Suite the runs belong to.
        runs: the group's runs, of `suite.runs()`, all going on from one agent step.
        threads: the group's --threads: its CPUs.
        gpus: the GPUs the task asked Ray for; a fraction shares one.

    Returns:
        (exit status of the group's command, [whether each run's files say it finished]).
    """
    from fast_dqn.suite.local_runs import last_line
    from fast_dqn.suite.plan import FINISHED, group_command, group_log, run_state
    log = group_log(runs)
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        for run in runs:
            os.makedirs(os.path.dirname(run.run_dir), exist_ok=True)
        status = _run_command(group_command(suite, runs, threads), log, gpus)
        if status != 2 or "is in use by" not in last_line(log) or \
                time.monotonic() > deadline:
            return status, [run_state(run, suite.timesteps) == FINISHED for run in runs]
        time.sleep(15)


def _train_once(suite, run, threads, gpus):
    from fast_dqn.suite.plan import command
    os.makedirs(os.path.dirname(run.run_dir), exist_ok=True)
    return _run_command(command(suite, run, threads), run.log, gpus)


def _run_command(argv, log_path, gpus):
    """argv on this node, its output appended to log_path; its exit status."""
    import subprocess

    import fast_dqn
    env = dict(os.environ)
    # The package as this worker imported it (Ray ships it to nodes that lack it).
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(fast_dqn.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if 0 < gpus < 1:  # a share of a GPU: JAX would otherwise take 75% of it
        env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 * gpus:.2f}")
    with open(log_path, "ab") as log:
        log.write(f"\n$ {' '.join(argv)}   # on {os.uname().nodename}\n".encode())
        log.flush()
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env,
                                   preexec_fn=_die_with(os.getpid()))
        try:
            while True:  # in steps: ray.cancel's KeyboardInterrupt lands between them
                try:
                    return process.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
        except KeyboardInterrupt:  # ray.cancel: the suite is stopping
            process.send_signal(signal.SIGTERM)
            return process.wait()


class RayTasks:
    """The suite's runs on a Ray cluster, or on a private one on this machine.

    Args:
        suite: the Suite the runs belong to.
        runs: the runs to do, of `suite.runs()`.
        address: the cluster's head to join; None starts a private cluster on this machine.
        cpus: the CPUs each run asks Ray for, and its --threads.
        gpus: the GPUs each run asks Ray for; a fraction shares one.
        stopping: a threading.Event, set to cancel the runs, each stopping with a checkpoint.
        tell: called with each line to show the user (a submit, a retry, an outcome).
        memory: bytes each run asks Ray for (replay and the rest), so no node gets more runs
            than its RAM holds; None asks for none.
        runs_per_process: G; above 1 each task trains G runs of one agent step as a run
            group (`fast-dqn group`) and asks for G times each run's CPUs, GPUs and memory.
    """

    def __init__(self, suite, runs, address, cpus, gpus, stopping, tell, memory=None,
                 runs_per_process=1):
        from fast_dqn.suite.plan import form_groups
        self.suite, self.runs, self.address = suite, list(runs), address
        self.cpus, self.gpus, self.stopping, self.tell = cpus, gpus, stopping, tell
        self.memory = memory
        self.runs_per_process = runs_per_process
        self.groups = [[run] for run in self.runs] if runs_per_process == 1 else \
            form_groups(self.runs, runs_per_process, suite.timesteps)
        self.pending = {}  # ObjectRef -> (runs, attempt, when submitted)
        self.cancelled = self.connected = False

    def running(self):
        """The names of the runs whose task started: it writes the run's log first."""
        started = []
        for runs, _, since in list(self.pending.values()):
            for run in runs:
                try:
                    if os.path.getmtime(run.log) >= since:
                        started.append(run.name)
                except OSError:
                    pass
        return started

    def lanes(self):
        """How many runs go at once, for the table: those started, at least 1."""
        return max(1, len(self.running()))

    def kill_all(self):
        """Cancel every task by force: its run dies without a checkpoint (a second Ctrl-C)."""
        import ray
        for ref in list(self.pending):
            ray.cancel(ref, force=True)  # the worker dies, and its run with it (PDEATHSIG)

    def run(self):
        """Submit every run, wait for each, and retry a failed one once.

        Call `connect` first, from the main thread.

        Returns:
            {run name: Outcome} for each run.
        """
        import ray
        remote = ray.remote(max_retries=NODE_RETRIES, retry_exceptions=False)
        self.task, self.group_task = remote(train_task), remote(train_group_task)
        for runs in self.groups:
            self._submit(runs, 1)
            self.tell(f"{' + '.join(run.name for run in runs)}: submitted (log: "
                      + (runs[0].log if len(runs) == 1 else "each RUN_DIR.log") + ")")
        outcomes = {}
        while self.pending:
            if self.stopping.is_set() and not self.cancelled:
                self.cancelled = True
                for ref in self.pending:
                    ray.cancel(ref)
            done, _ = ray.wait(list(self.pending), num_returns=1, timeout=0.5)
            for ref in done:
                for outcome in self._settle(ref):
                    outcomes[outcome.run.name] = outcome
                    self.tell(f"{outcome.run.name}: {outcome.state}")
        return outcomes

    def _settle(self, ref):
        """The Outcomes of a task that ended; its failed runs, on a first attempt, are
        submitted again (regrouped by step) and left out."""
        from fast_dqn.suite.plan import form_groups
        runs, attempt, _ = self.pending.pop(ref)
        ended = self._outcomes(ref, runs)
        failed = [o.run for o in ended if o.state == "failed"]
        if not failed or attempt > 1 or self.cancelled:
            return ended
        self.tell(f"{', '.join(r.name for r in failed)} failed (exit {ended[0].status}): "
                  f"{ended[0].last_line}; retrying once from the last checkpoint")
        for group in form_groups(failed, self.runs_per_process, self.suite.timesteps):
            self._submit(group, 2)
        return [o for o in ended if o.state != "failed"]

    def _submit(self, runs, attempt):
        g = len(runs)
        options = dict(num_cpus=self.cpus * g, num_gpus=self.gpus * g,
                       name=f"fast-dqn {' + '.join(run.name for run in runs)}")
        if self.memory:
            options["memory"] = self.memory * g
        if g == 1:
            ref = self.task.options(**options).remote(self.suite, runs[0], self.cpus,
                                                      self.gpus)
        else:
            ref = self.group_task.options(**options).remote(self.suite, runs, self.cpus * g,
                                                            self.gpus * g)
        self.pending[ref] = (runs, attempt, time.time())

    def _outcomes(self, ref, runs):
        """Each run's Outcome of a task: a group's runs judged by their own files."""
        import ray
        try:
            status, finished = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return [Outcome(run, "stopped") for run in runs]
        except ray.exceptions.RayError as error:
            text = str(error).strip().splitlines()
            return [Outcome(run, "failed", None, text[-1] if text else repr(error))
                    for run in runs]
        if status < 0:
            status = 128 - status
        if len(runs) == 1:
            return [classify(runs[0], self.suite, status, finished)]
        # A group's exit speaks for all its runs: a run whose files say it finished is
        # finished, whatever the others did.
        return [Outcome(run, "finished", status) if done else
                classify(run, self.suite, status, finished=False)
                for run, done in zip(runs, finished)]

    def close(self):
        """Leave the cluster, where `connect` joined or started one."""
        import ray
        if self.connected:
            ray.shutdown()

    def connect(self, gpus=0):
        """Join the cluster at `address`, or start a private one with this machine's cores.

        Call it from the main thread, since Ray's driver sets signal handlers.

        Args:
            gpus: the GPUs a private cluster offers; unused when joining one.

        Raises:
            ConfigError: no node of the cluster has the CPUs and GPUs one run asks for.
        """
        import ray

        from fast_dqn.agent.backend_setup import keras_backend
        from fast_dqn.loops.ray_cluster import package_dir, start_private_cluster
        if ray.is_initialized():
            return
        runtime_env = {"py_modules": [package_dir()],
                       "env_vars": {"KERAS_BACKEND": keras_backend()}}
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            if self.address:
                ray.init(address=self.address, runtime_env=runtime_env,
                         logging_level="WARNING", log_to_driver=False)
            else:
                start_private_cluster(os.cpu_count() or 1, 256, num_gpus=gpus,
                                      runtime_env=runtime_env)
        finally:
            for signum, handler in handlers.items():  # Ray's driver replaces them
                signal.signal(signum, handler)
        self.connected = True
        self._check_placeable()

    def _check_placeable(self):
        """A run no node can hold would wait for ever: refused in one line."""
        import ray

        from fast_dqn.errors import ConfigError
        nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
        g = max((len(runs) for runs in self.groups), default=1)
        cpus, gpus = self.cpus * g, self.gpus * g
        if not any(n.get("CPU", 0) >= cpus and n.get("GPU", 0) >= gpus for n in nodes):
            best = max(((n.get("CPU", 0), n.get("GPU", 0)) for n in nodes), default=(0, 0))
            self.close()
            what = "a run" if g == 1 else f"a group of {g} runs"
            fewer = "" if g == 1 else ", or fewer --runs-per-process"
            raise ConfigError("cpus_per_run", f"no node of the cluster has "
                              f"{counted(cpus, 'CPU')} and {counted_share(gpus, 'GPU')}"
                              f" free for {what} (the largest has "
                              f"{counted_share(best[0], 'CPU')}, "
                              f"{counted_share(best[1], 'GPU')}); ask for less with "
                              f"--cpus-per-run and --gpus-per-run{fewer}")
