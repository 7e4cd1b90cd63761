import threading
import time

import pytest

from fast_dqn.loops.background_trainer import BackgroundTrainer, call_sizes, one_by_one


@pytest.mark.parametrize("prefetch", [True, False])
def test_trains_exactly_the_minibatches_asked_in_sample_order(prefetch):
    drawn, trained = [], []
    counter = iter(range(10_000))

    def sample():
        drawn.append(next(counter))
        return drawn[-1]

    trainer = BackgroundTrainer(*one_by_one(lambda b: trained.append(b) or 0.0, sample),
                                prefetch=prefetch)
    for n in (5, 0, 7):
        trainer.start(n)
        trainer.wait()
    trainer.close()
    assert trained == list(range(12)) and drawn == list(range(12))


def test_no_sampling_happens_between_periods():
    # Rule 1: after wait() returns, replay is not read until the next start().
    drawn = []
    trainer = BackgroundTrainer(*one_by_one(lambda b: 0.0, lambda: drawn.append(1) or 0),
                                prefetch=True)
    trainer.start(3)
    trainer.wait()
    time.sleep(0.3)
    assert len(drawn) == 3
    trainer.close()


def fail(*args):
    raise ValueError("boom in the background")


@pytest.mark.parametrize("where", ["train", "sample"])
@pytest.mark.parametrize("prefetch", [True, False])
def test_a_background_failure_reaches_the_caller(where, prefetch):
    train = fail if where == "train" else (lambda b: 0.0)
    sample = fail if where == "sample" else (lambda: 0)
    trainer = BackgroundTrainer(*one_by_one(train, sample), prefetch=prefetch)
    trainer.start(100)
    with pytest.raises(ValueError, match="boom in the background") as error:
        trainer.wait()
    # The original traceback is kept: it ends in the function that raised.
    tb = error.value.__traceback__
    while tb.tb_next:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_name == "fail"
    with pytest.raises(ValueError):
        trainer.check()
    trainer.close(timeout=5)
    assert not any(t.name.startswith("fast-dqn") and t.is_alive() for t in threading.enumerate())


def test_close_ends_threads_even_mid_period():
    trainer = BackgroundTrainer(*one_by_one(lambda b: time.sleep(0.01), lambda: 0),
                                prefetch=True)
    trainer.start(10_000)
    time.sleep(0.1)
    trainer.close(timeout=5)
    assert not any(t.name.startswith("fast-dqn") and t.is_alive() for t in threading.enumerate())


def test_losses_are_reported():
    seen = []
    trainer = BackgroundTrainer(*one_by_one(lambda b: b * 2.0, iter([1, 2]).__next__),
                                on_loss=seen.append)
    trainer.start(2)
    trainer.wait()
    trainer.close()
    assert seen == [2.0, 4.0]


def test_busy_seconds_count_only_the_time_in_train_steps():
    """What benchmarks.speedtest reports as the trainer's busy fraction."""
    def train(batch):
        time.sleep(0.01)
        return batch
    trainer = BackgroundTrainer(*one_by_one(train, lambda: 0))
    try:
        assert trainer.busy_seconds() == 0.0
        started = time.perf_counter()
        trainer.start(10)
        assert trainer.wait()
        elapsed = time.perf_counter() - started
        busy = trainer.busy_seconds()
        assert 10 * 0.01 <= busy <= elapsed
        time.sleep(0.05)  # idle between periods: not counted
        assert trainer.busy_seconds() == busy
    finally:
        trainer.close()


def test_a_window_opened_mid_step_is_charged_only_its_own_part():
    """So the busy fraction of any window is at most 1, however short the window."""
    entered, release = threading.Event(), threading.Event()

    def train(batch):
        entered.set()
        release.wait(5)
        return batch
    trainer = BackgroundTrainer(*one_by_one(train, lambda: 0))
    try:
        trainer.start(1)
        assert entered.wait(5)
        # Timed from when the step is known to have begun, not from start(): on a loaded
        # machine the thread may take a while to get there.
        inside = time.perf_counter()
        time.sleep(0.1)  # the step has run at least 0.1 s when the window opens
        wall0, busy0 = time.perf_counter(), trainer.busy_seconds()
        assert busy0 >= wall0 - inside >= 0.1
        time.sleep(0.05)
        release.set()
        assert trainer.wait()
        busy1, wall1 = trainer.busy_seconds(), time.perf_counter()
        assert 0 < busy1 - busy0 <= wall1 - wall0
    finally:
        release.set()
        trainer.close()


def test_a_period_is_cut_into_calls_by_its_length_alone():
    assert call_sizes(10, 4) == [4, 4, 2]
    assert call_sizes(37, 64) == [32, 4, 1]
    assert call_sizes(128, 64) == [64, 64]
    assert call_sizes(0, 64) == [] and call_sizes(5, 1) == [1] * 5
    for n in range(300):
        sizes = call_sizes(n, 16)
        assert sum(sizes) == n and len(set(sizes)) <= 5  # 16, 8, 4, 2, 1: five compiles


@pytest.mark.parametrize("prefetch", [True, False])
def test_calls_take_the_minibatches_in_order_and_train_each_once(prefetch):
    drawn, calls = [], []
    counter = iter(range(10_000))

    def sample(count):
        drawn.extend(next(counter) for _ in range(count))
        return drawn[-count:]

    def train(minibatches):
        calls.append(list(minibatches))
        return [-m for m in minibatches]
    seen = []
    trainer = BackgroundTrainer(train, sample, on_loss=seen.append, prefetch=prefetch,
                                per_call=4)
    for n in (11, 0, 5):
        trainer.start(n)
        trainer.wait()
    trainer.close()
    assert calls == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [10], [11, 12, 13, 14], [15]]
    assert seen == [-m for m in range(16)] and drawn == list(range(16))


def test_a_call_waits_until_all_its_minibatches_are_released():
    """Rule 4 per call: with 3 of a call of 4 released, nothing of it trains."""
    calls = []
    trainer = BackgroundTrainer(lambda batch: calls.append(len(batch)) or batch,
                                lambda count: [0] * count, prefetch=False, per_call=4)
    try:
        trainer.start(8, unplayed=5)    # 3 released: not a whole call
        time.sleep(0.2)
        assert calls == []
        trainer.pace(4)                 # 4 released: the first call
        deadline = time.time() + 5
        while not calls and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert calls == [4]
        trainer.pace(0)
        assert trainer.wait() and calls == [4, 4]
    finally:
        trainer.close()


def test_an_interrupt_ends_the_period_at_a_call_boundary():
    started, release = threading.Event(), threading.Event()

    def train(batch):
        started.set()
        release.wait(5)
        return batch
    trainer = BackgroundTrainer(train, lambda count: [0] * count, prefetch=True, per_call=3)
    try:
        trainer.start(10)
        assert started.wait(5)
        threading.Timer(0.1, release.set).start()
        assert trainer.interrupt() == 3  # the call in progress finishes, none after it
    finally:
        release.set()
        trainer.close()


def test_a_call_that_trains_fewer_minibatches_than_asked_fails_the_run():
    trainer = BackgroundTrainer(lambda batch: batch[:-1], lambda count: [0] * count,
                                per_call=4)
    try:
        trainer.start(4)
        with pytest.raises(RuntimeError, match="a call of 4 minibatches trained 3"):
            trainer.wait()
    finally:
        trainer.close()
