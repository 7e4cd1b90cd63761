"""benchmarks/learning.py's reading of episodes.csv: a threshold counts only once 100 games
have ended, and minutes are the run's own training hours."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest


def load_benchmark():
    from benchmarks import learning
    return learning


def test_thresholds_count_only_after_100_games(tmp_path):
    rows = [(1, 900, 20.0, 20.0)]  # one lucky early game: mean 20 over 1 game
    rows += [(n, 900 * n, -21.0 + n * 0.1, -21.0 + n * 0.1) for n in range(2, 260)]
    with open(tmp_path / "episodes.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["episode", "agent_step", "length", "return", "mean_100", "epsilon",
                         "hours"])
        for number, step, game_return, mean_100 in rows:
            writer.writerow([number, step, 900, game_return, round(mean_100, 3), 0.01,
                             step / 3600 / 10])
    benchmark = load_benchmark()
    table, last = benchmark.summary_rows(str(tmp_path), [0.0, 18.0, 30.0])
    # -21 + 0.1 n >= 0 first at n = 210; >= 18 at n = 390, never here; the lucky game
    # 1 does not count.
    assert table[0] == (0.0, 210 * 900, 210 * 900 / 3600 / 10 * 60)
    assert table[1] == (18.0, None, None) and table[2] == (30.0, None, None)
    assert last[0] == 259


def test_each_seed_gets_its_own_run_directory_and_runs_side_by_side_when_asked(monkeypatch,
                                                                              tmp_path):
    import argparse
    import threading

    from benchmarks import learning
    started, overlap, lock = [], [], threading.Lock()
    running = [0]
    together = [threading.Barrier(1)]

    def fake_run(job, extra):
        with lock:
            running[0] += 1
            overlap.append(running[0])
            started.append((job.seed, job.logdir, extra))
        # Side by side, the seeds meet here, however slowly the threads start; one after
        # another, the barrier breaks after 5 s and the test fails.
        together[0].wait(timeout=5)
        with lock:
            running[0] -= 1
        return 0

    monkeypatch.setattr(learning, "run", fake_run)
    monkeypatch.setattr(learning, "ROOT", str(tmp_path))  # no runs/ of this checkout's
    args = argparse.Namespace(seeds=[0, 1, 2], seed=9, parallel=1, logdir="runs/x",
                              preset="pong-fastest", loop="fast", resume=False)
    dirs, failed = learning.run_seeds(args, ["--lr=1e-4"])
    assert failed == []
    assert dirs == ["runs/x-seed0", "runs/x-seed1", "runs/x-seed2"]
    assert sorted(s for s, _, _ in started) == [0, 1, 2] and max(overlap) == 1
    assert all(extra == ["--lr=1e-4"] for _, _, extra in started)
    started.clear(), overlap.clear()
    args.parallel, args.logdir = 3, None
    together[0] = threading.Barrier(3)
    dirs, _ = learning.run_seeds(args, [])
    assert [d.split("/")[-1] for d in dirs] == [f"learning-pong-fastest-fast-seed{s}"
                                               for s in (0, 1, 2)]
    assert max(overlap) == 3


def test_resume_carries_on_the_seeds_that_have_runs_and_starts_the_others(tmp_path):
    import argparse
    import sys

    from benchmarks import learning
    (tmp_path / "x-seed1").mkdir()
    args = argparse.Namespace(preset="pong-fastest", seed=1, loop="fast", resume=True,
                              logdir=str(tmp_path / "x-seed1"))
    script = learning.os.path.join(learning.ROOT, "run_fast_dqn.py")
    assert learning.training_command(args, ["--save-replay"]) == [
        sys.executable, script, "--preset=pong-fastest", "--seed=1",
        f"--resume={tmp_path / 'x-seed1'}", "--save-replay"]
    args.seed, args.logdir = 2, str(tmp_path / "x-seed2")  # no run yet: it starts
    assert learning.training_command(args, []) == [
        sys.executable, script, "--preset=pong-fastest", "--seed=2",
        f"--logdir={tmp_path / 'x-seed2'}", "--evaluate=0"]
    args.resume = False
    assert learning.training_command(args, ["--evaluate=5000"])[-2:] == [
        f"--logdir={tmp_path / 'x-seed2'}", "--evaluate=5000"]


def test_an_existing_seed_is_refused_before_any_seed_runs_unless_resumed(tmp_path,
                                                                        monkeypatch):
    import argparse

    import pytest

    from benchmarks import learning
    (tmp_path / "x-seed1").mkdir()
    started = []
    monkeypatch.setattr(learning, "run", lambda job, extra: started.append(job.seed) or 0)
    args = argparse.Namespace(seeds=[0, 1, 2], seed=0, parallel=1, logdir=str(tmp_path / "x"),
                              preset="pong-fastest", loop="fast", resume=False)
    with pytest.raises(SystemExit) as stop:
        learning.run_seeds(args, [])
    assert str(stop.value) == (f"benchmarks.learning: error: {tmp_path / 'x-seed1'} already "
                               "holds a run; add --resume to carry them on, or give another "
                               "--logdir")
    assert started == []
    args.resume = True
    assert learning.run_seeds(args, [])[1] == [] and sorted(started) == [0, 1, 2]


def test_a_run_that_fails_by_itself_is_reported_as_failed_not_as_done(tmp_path, monkeypatch,
                                                                       capsys):
    import argparse
    import sys

    from benchmarks import learning
    monkeypatch.setattr(learning, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(learning, "training_command", lambda args, extra: [
        sys.executable, "-c",
        "import sys; print('step 5/9'); sys.exit('run_fast_dqn.py: error: --lr: too big')"])
    args = argparse.Namespace(logdir=str(tmp_path / "run"), minutes=1, thresholds=[0.0, 18.0],
                              seeds=None, seed=0, parallel=1, preset="pong-quick",
                              loop="fast", resume=False)
    assert learning.run(args, []) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "stopped: the run failed; its last line: run_fast_dqn.py: error: --lr: too big; "
        "exit status 1")
    with pytest.raises(SystemExit) as stop:
        learning.main(["--logdir", str(tmp_path / "again"), "--minutes", "1"])
    assert str(stop.value).startswith(f"benchmarks.learning: error: {tmp_path / 'again'} "
                                      "failed; see its log")


@pytest.mark.parametrize("status", [130, 143])
def test_a_run_stopped_from_outside_is_a_stop_not_a_failure(tmp_path, monkeypatch, capsys,
                                                            status):
    # A Ctrl-C or kill -INT / -TERM sent to the training script, not by the watch: the run
    # checkpointed and exits 130 or 143, and --resume carries it on.
    import argparse
    import sys

    from benchmarks import learning
    monkeypatch.setattr(learning, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(learning, "training_command", lambda args, extra: [
        sys.executable, "-c", "import sys; print('run_fast_dqn.py: stopped after a "
        f"checkpoint; continue with: --resume'); sys.exit({status})"])
    args = argparse.Namespace(logdir=str(tmp_path / "run"), minutes=1, thresholds=[0.0],
                              seeds=None, seed=0, parallel=1, preset="pong-quick",
                              loop="fast", resume=False)
    assert learning.run(args, []) == status
    assert capsys.readouterr().out.splitlines()[-1] == (
        "stopped: a signal from outside stopped it; its last line: run_fast_dqn.py: stopped "
        f"after a checkpoint; continue with: --resume; exit status {status}")
    monkeypatch.setattr(learning, "run", lambda job, extra: status)
    assert learning.run_seeds(args, [])[1] == []


# A stand-in for the training script: records the stop signals it gets. The real one takes a
# second SIGINT more than a second after the first as "abort without a checkpoint"; SIGTERM
# never aborts. argv: run directory, seconds before its handlers are set (imports).
FAKE_TRAINING = """
import os, signal, sys, time
run_dir, delay = sys.argv[1], float(sys.argv[2])
os.makedirs(run_dir, exist_ok=True)
open(os.path.join(run_dir, "spawned"), "w").close()
time.sleep(delay)
received = []
for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, lambda signum, frame: received.append(signal.Signals(signum).name))
open(os.path.join(run_dir, "started"), "w").close()
deadline = time.monotonic() + 60
while not received and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(2.5)  # later signals, if any come, land here
with open(os.path.join(run_dir, "signals"), "w") as f:
    f.write(" ".join(received))
sys.exit(128 + getattr(signal, received[0]) if received else 0)
"""


def stop_benchmark(tmp_path, signum, to_group, delay=0.0, wait_for="started"):
    """Run benchmarks.learning on seeds 0 1 2 with the stand-in, signal it once seed 0 has
    reached `wait_for`, and return (exit status, stdout, stderr)."""
    learning = load_benchmark()
    driver = (
        "import sys; from benchmarks import learning; learning.POLL_SECONDS = 0.05; "
        f"learning.training_command = lambda args, extra: [sys.executable, '-c', "
        f"{FAKE_TRAINING!r}, args.logdir, '{delay}']; "
        f"learning.main(['--seeds', '0', '1', '2', '--logdir', {str(tmp_path / 'run')!r}, "
        "'--minutes', '1'])")
    # Its own process group, as a shell gives a job: a terminal's Ctrl-C signals that group.
    benchmark = subprocess.Popen([sys.executable, "-c", driver], cwd=learning.ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
    try:
        reached = tmp_path / "run-seed0" / wait_for
        deadline = time.monotonic() + 60
        while not reached.exists() and time.monotonic() < deadline and benchmark.poll() is None:
            time.sleep(0.02)
        assert reached.exists(), benchmark.communicate(timeout=60)
        if to_group:
            os.killpg(benchmark.pid, getattr(signal, signum))
        else:
            os.kill(benchmark.pid, getattr(signal, signum))
        out, err = benchmark.communicate(timeout=60)
    finally:
        if benchmark.poll() is None:
            os.killpg(benchmark.pid, signal.SIGKILL)
            benchmark.wait()
    return benchmark.returncode, out, err


# Ctrl-C in the fast tier; the two kills of the benchmark alone in the slow one (about 2.6 s
# each: the fast tier's time goes to one case per claim).
@pytest.mark.parametrize("signum, to_group, signals_seen", [
    ("SIGINT", True, "SIGINT SIGTERM"),  # Ctrl-C at the terminal: the run gets it too
    pytest.param("SIGINT", False, "SIGTERM", marks=pytest.mark.slow),  # kill -INT of it alone
    pytest.param("SIGTERM", False, "SIGTERM", marks=pytest.mark.slow),
])
def test_stopping_the_benchmark_stops_its_run_with_a_checkpoint_and_starts_no_other_seed(
        tmp_path, signum, to_group, signals_seen):
    # Before, Ctrl-C gave a KeyboardInterrupt traceback. A second SIGINT from the watch, late,
    # would have aborted the run's checkpoint; SIGTERM never does.
    status, out, err = stop_benchmark(tmp_path, signum, to_group)
    assert status == 128 + {"SIGINT": 2, "SIGTERM": 15}[signum], err
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith(f"benchmarks.learning: stopped by {signum}; each "
                                           "run it watched was asked to checkpoint")
    assert (tmp_path / "run-seed0" / "signals").read_text() == signals_seen
    assert out.count("running:") == 1 and "seed0" in out.split("running:")[1]
    assert "stopped: the benchmark was asked to stop; exit status 1" in out  # 130 or 143


def test_a_run_stopped_while_it_starts_up_is_a_stop_not_a_failure(tmp_path):
    # Ctrl-C right after the launch: the run has no handler yet and dies of the signal itself
    # (Popen's -15), with nothing to save. Counted as a failure before.
    status, out, err = stop_benchmark(tmp_path, "SIGINT", False, delay=30, wait_for="spawned")
    assert status == 130, err
    assert "stopped: the benchmark was asked to stop; exit status 143" in out
    assert "failed" not in err and not (tmp_path / "run-seed0" / "started").exists()


def test_sighup_ignored_by_nohup_stays_ignored_and_sigint_ignored_by_the_shell_is_taken():
    # Under nohup SIGHUP is ignored: a closed terminal must not stop the seeds then. A job
    # started with `&` by a script has SIGINT ignored, yet `kill -INT` must stop it (found by
    # doing so: the benchmark went on to the next seed).
    learning = load_benchmark()
    before = {signum: signal.signal(signum, signal.SIG_IGN)
              for signum in (signal.SIGHUP, signal.SIGINT)}
    try:
        saved = learning.stop_on_signals()
        try:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert sorted(saved) == [signal.SIGINT, signal.SIGTERM]
            assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
