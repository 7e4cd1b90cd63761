"""benchmarks/probe.py's parts that need no device: its refusals, the table it prints, the
acting calls sorted by whether the trainer trained, and the kernels it reads from a
profile (a GPU's streams, XLA:CPU's thunks). tests/benchmarks/test_gpu_session.py runs the
whole probe on the CPU through gpu_probe.sh."""

from types import SimpleNamespace

import pytest

from benchmarks import probe


def test_unknown_parts_and_another_backend_are_refused(monkeypatch, capsys):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    with pytest.raises(SystemExit) as exit_:
        probe.main(["--parts", "variants,speed"])
    assert exit_.value.code == 2 and "--parts: unknown speed" in capsys.readouterr().err
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    with pytest.raises(SystemExit) as exit_:
        probe.main(["--tiny"])
    assert exit_.value.code == 2 and "KERAS_BACKEND=jax" in capsys.readouterr().err


def test_acting_calls_are_sorted_by_whether_a_train_call_ran():
    timed = probe.Timed()
    act = timed.acting_call(lambda states: states)
    act("before the window")  # not recorded: the measured window has not begun
    timed.recording = True
    act(1)

    def train(drawn):
        act(2)  # an acting call while the train call runs
        return drawn
    assert timed.train_call(train)("batch") == "batch"
    act(3)
    assert [len(timed.acting[True]), len(timed.acting[False])] == [1, 2]
    assert len(timed.train_calls) == 1 and not timed.training.is_set()


def event(name, ns):
    return SimpleNamespace(name=name, duration_ns=ns)


def test_kernels_are_a_gpus_streams_else_xla_cpus_thunks():
    gpu = SimpleNamespace(planes=[
        SimpleNamespace(name="/device:GPU:0", lines=[
            SimpleNamespace(name="Stream #13(compute)", events=[event("fusion_1", 5)]),
            SimpleNamespace(name="XLA Ops", events=[event("fusion_1", 5)])]),
        SimpleNamespace(name="/host:CPU", lines=[
            SimpleNamespace(name="tf_XLACpu", events=[event("dot.1", 9)])])])
    assert [(where, [e.name for e in events]) for where, events in
            [probe._kernel_lines(gpu, True)]] == [("GPU", ["fusion_1"])]
    # A GPU the profiler could not trace reads as no kernels, never as the CPU's.
    untraced = SimpleNamespace(planes=[gpu.planes[1]])
    assert probe._kernel_lines(untraced, True) == ("GPU", [])
    cpu = SimpleNamespace(planes=[SimpleNamespace(name="/host:CPU", lines=[
        SimpleNamespace(name="python", events=[event("PjitFunction", 9)]),
        SimpleNamespace(name="tf_XLAPjRtCpuClient/1", events=[
            event("dot.1", 3), event("end: dot.1", 0), event("ThunkExecutor::Execute", 7)])])])
    where, events = probe._kernel_lines(cpu, False)
    assert where == "CPU" and [e.name for e in events] == ["dot.1"]


def test_the_table_shows_each_part_and_what_was_not_measured():
    results = {
        "sizes": {"k": 64}, "tiny": False,
        "variants": [{"variant": "default", "updates_per_s": 2000.0, "us_per_update": 500.0,
                      "first_call_s": 9.5},
                     {"variant": "optimizer step fused", "updates_per_s": 3000.0,
                      "us_per_update": 333.3, "first_call_s": 9.0}],
        "profile": {"where": "GPU", "kernels": 1600, "kernels_per_update": 25.0,
                    "call_us": 32000.0, "busy_us": 8000.0, "busy_share": 0.25,
                    "top": [("fusion_7", 64, 2000.0, 0.25)]},
        "loop": [{"workers": 32, "k": 16, "train": True, "steps_per_s": 5604.2,
                  "trainer_busy": 0.84, "acting_p50_ms": {True: 1.5, False: 0.9},
                  "acting_p99_ms": {True: 9.25, False: 2.0}, "train_call_ms": 11.0,
                  "python_ms_per_round": 0.71, "emulator_cpu_ms_per_round": 0.2},
                 {"workers": 64, "k": 16, "train": False, "steps_per_s": 11340.0,
                  "trainer_busy": None, "acting_p50_ms": {True: None, False: 0.8},
                  "acting_p99_ms": {True: None, False: 1.9}, "train_call_ms": None,
                  "python_ms_per_round": 0.66, "emulator_cpu_ms_per_round": 1.5}],
        "not_measured": ["variant K = 256 (budget)"]}
    lines = probe.table("H200; 16 cores; commit abc", results).splitlines()
    assert lines[0] == "# Probe: H200; 16 cores; commit abc"
    assert "| optimizer step fused | 3,000 | 333.3 | 1.50 | 9.0 |" in lines
    assert ("One K = 64 call under the profiler: 1,600 kernels (GPU), 25.0 an update; the call "
            "took 32,000 µs, its kernels 8,000 µs summed over streams and threads (25% of "
            "it).") in lines
    assert "| `fusion_7` | 64 | 2,000 | 25.0% |" in lines
    assert ("| W = 32, K = 16 | 5,604 | 0.84 | 1.50 / 9.25 | 0.90 / 2.00 | 11.0 | 0.71 / 0.20 |"
            in lines)
    assert ("| samplers alone, W = 64 | 11,340 | – | – / – | 0.80 / 1.90 | – | "
            "0.66 / 1.50 |") in lines
    assert lines[-1] == "not measured: variant K = 256 (budget)"
