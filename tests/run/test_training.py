"""Both loops as fast_dqn.run.training builds them, run in-process on CartPole, watched through
the learner: which network acts, and how many minibatches are trained."""

import numpy as np
import pytest
from helpers import TINY_CARTPOLE, flags, on_every_minibatch

from fast_dqn.agent.learner import DQNLearner
from fast_dqn.loops.minibatch_schedule import minibatches_due
from fast_dqn.run.settings.hyperparameters import Config, FastConfig
from fast_dqn.run.training import train_fast, train_nature

SMALL = TINY_CARTPOLE


@pytest.fixture
def train_calls(monkeypatch):
    calls = []
    on_every_minibatch(monkeypatch, lambda learner, batch: calls.append(len(batch.actions)))
    return calls


def small_config(loop, tmp_path, **overrides):
    """loop: nature, fast (concurrent) or fast-lockstep."""
    values = dict(SMALL, logdir=str(tmp_path), **overrides)
    if loop == "nature":
        return Config(**values)  # train_* validate and resolve it as the command line does
    return FastConfig(**values, workers=8, env_backend="python", concurrent=loop == "fast")


def run_loop(loop, config):
    (train_nature if loop == "nature" else train_fast)(config)


@pytest.mark.parametrize("loop,acting,idle", [("fast", "acting_q_values", "q_values"),
                                              ("nature", "q_values", "acting_q_values")])
def test_the_fast_loop_acts_through_the_target_network_in_batched_rounds(
        tmp_path, monkeypatch, loop, acting, idle):
    """The fast loop's samplers act through acting_q_values, the target network's
    (tests/agent/test_update_variants.py holds it to target_q_values); the Nature loop
    through the main network."""
    sizes = {"q_values": [], "acting_q_values": []}
    for name in sizes:
        original = getattr(DQNLearner, name)

        def recorded(self, states, name=name, original=original):
            sizes[name].append(len(states))
            return original(self, states)
        monkeypatch.setattr(DQNLearner, name, recorded)
    run_loop(loop, small_config(loop, tmp_path, timesteps=800, eps_end=0.0,
                                eps_decay_steps=200))
    assert sizes[idle] == []
    assert len(sizes[acting]) > 50
    if loop == "fast":
        # After warm-up, epsilon 0: every round sends all 8 samplers' states at once.
        assert sizes[acting][-1] == 8
    else:
        assert set(sizes[acting]) == {1}


# The Nature ratio at every budget, counted by wrapping the learner's train step: budgets
# below, at and just above one target period (200), and several periods.
@pytest.mark.parametrize("budget", [152, 200, 208, 600])
@pytest.mark.parametrize("loop", ["nature", "fast", "fast-lockstep"])
def test_both_loops_train_the_nature_number_of_minibatches(tmp_path, train_calls, loop,
                                                           budget):
    run_loop(loop, small_config(loop, tmp_path, timesteps=budget))
    expected = minibatches_due(0, budget, SMALL["prepopulate"], SMALL["train_freq"])
    assert expected == max(0, budget // 4 - 25)  # the rule itself, by hand
    assert len(train_calls) == expected


# A stop during warm-up, mid-run (mid-period for the fast loop, whose trainer is busy) and
# close enough to the end that the refill outlasts the budget; each resumed without replay.
# The stop comes once stop_after minibatches are trained, or the samplers have played the
# step the Nature loop trains the last of them at (the fast loop's trainer may trail them).
# The fast tier keeps a stop mid-run in each loop and the fast loop's stop near the end,
# where minibatches are owed; the other cases are slow-tier (about 1.2 s each).
FAST_TIER_RESUMES = {("nature", 20), ("fast", 20), ("fast", 150)}
RESUMED_WITHOUT_REPLAY = [
    pytest.param(loop, stop_after,
                 marks=[] if (loop, stop_after) in FAST_TIER_RESUMES else [pytest.mark.slow])
    for loop in ["nature", "fast", "fast-lockstep"] for stop_after in [0, 20, 150]]


@pytest.mark.parametrize("loop,stop_after", RESUMED_WITHOUT_REPLAY)
@pytest.mark.faults
def test_a_run_resumed_without_replay_still_trains_the_nature_total(tmp_path, train_calls,
                                                                     fast_loops, loop,
                                                                     stop_after):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    config = small_config(loop, tmp_path, timesteps=800)
    run = train_nature if loop == "nature" else train_fast

    def stop():
        played = fast_loops[-1].state.step if fast_loops else 0
        return len(train_calls) >= stop_after or played >= SMALL["prepopulate"] + 4 * stop_after
    stopped_at = run(config, stop=stop)
    assert stopped_at < 800
    checkpoint = CheckpointStore(str(tmp_path)).latest()
    assert checkpoint.step == stopped_at and not checkpoint.has_replay
    before = len(train_calls)
    assert run(config, resume=checkpoint) == 800
    assert len(train_calls) == minibatches_due(0, 800, SMALL["prepopulate"], 4) == 175
    # The last checkpoint holds them all: the optimizer's first variable counts its steps.
    final = CheckpointStore(str(tmp_path)).latest()
    assert final.step == 800 and final.load_state()["learner"]["optimizer"][0] == 175
    if stop_after == 20:  # the refill of 100 steps ends well before the budget
        assert len(train_calls) - before > 0


@pytest.mark.slow  # trains a real network for seconds
@pytest.mark.faults
def test_a_stop_while_the_last_period_trains_lets_it_finish(tmp_path, monkeypatch, capsys):
    # The samplers reach the budget long before a slow trainer ends the last period: a stop
    # then must not leave minibatches owed, which a resume without replay could never train.
    import time

    from fast_dqn.run.storage.checkpoint import CheckpointStore
    calls = []

    def slow(learner, batch):
        calls.append(1)
        time.sleep(0.05)
    on_every_minibatch(monkeypatch, slow)
    config = small_config("fast", tmp_path, timesteps=800)
    assert train_fast(config, stop=lambda: len(calls) >= 170) == 800
    assert len(calls) == 175
    assert "stopping: the run's last steps are played and their minibatches are still " \
        "training; the final checkpoint is written as soon as they are done" \
        in capsys.readouterr().out
    state = CheckpointStore(str(tmp_path)).latest().load_state()
    assert state["loop"]["owed"] == 0 and state["learner"]["optimizer"][0] == 175


def test_the_nature_loop_trains_right_after_each_fourth_step_past_warm_up(tmp_path,
                                                                         monkeypatch):
    # The Lua agent trains when numSteps % update_freq == 0 and numSteps > learn_start,
    # just after storing that step: counted here by replay writes at each train call.
    from fast_dqn.agent.replay_memory import ReplayMemory
    added, trained_at = [0], []
    add, train = ReplayMemory.add, DQNLearner.train

    def counted_add(self, *args, **kwargs):
        added[0] += 1
        return add(self, *args, **kwargs)

    def recorded_train(self, batch):
        trained_at.append(added[0])
        return train(self, batch)
    monkeypatch.setattr(ReplayMemory, "add", counted_add)
    monkeypatch.setattr(DQNLearner, "train", recorded_train)
    run_loop("nature", small_config("nature", tmp_path, timesteps=400))
    assert trained_at == [s for s in range(101, 401) if s % 4 == 0]


# The run builder's RunParts, in process: what a checkpoint collects, what restore puts back.

class SavedGame:
    """The Nature loop's own part, as it saves a game (fast_dqn.state_schema.NATURE_RUN)."""

    def state_dict(self):
        return {"env": {"layers": [], "states": [], "foreign": None}}

    def check_state_dict(self, state):
        pass


def built_parts(config, resume=None):
    import numpy as np

    from fast_dqn.run.settings.validation import resolve
    from fast_dqn.run.training import RunParts
    return RunParts(resolve(config), (1, 4), np.dtype(np.float32), 2, 1, "main", resume,
                    own=SavedGame())


def filled_parts(tmp_path, save_replay):
    import numpy as np
    config = small_config("nature", tmp_path, save_replay=save_replay)
    parts = built_parts(config)
    for t in range(300):
        parts.replay.add(np.full(4, t, np.float32), t % 2, 1.0, t % 50 == 49, t % 50 == 49)
    parts.learner.train(parts.replay.sample(8))
    parts.rng.random(5)
    schedule = {"train_start": 100, "refill_until": 0, "deferred": 0}
    parts.checkpoints.save(300, {"step": 300, "obs": np.zeros((1, 4), np.float32),
                                 "eval_pending": False, "last_eval": None,
                                 "schedule": schedule})
    parts.close()
    return config, parts


@pytest.mark.parametrize("save_replay", [True, False])
@pytest.mark.faults
def test_run_parts_restore_what_they_collected(tmp_path, save_replay):
    import numpy as np

    from fast_dqn.run.storage.checkpoint import latest_checkpoint
    config, before = filled_parts(tmp_path, save_replay)
    after = built_parts(config, latest_checkpoint(str(tmp_path), "resume"))
    loop = after.restore()
    after.close()
    assert loop["step"] == 300
    for a, b in zip(before.learner.main.get_weights() + before.learner.target.get_weights(),
                    after.learner.main.get_weights() + after.learner.target.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert after.rng.random() == before.rng.random()
    assert after.replay.rng.random() == before.replay.rng.random()
    if save_replay:
        assert len(after.replay) == 300
        np.testing.assert_array_equal(after.replay.sample(8).states, before.replay.sample(8).states)
        assert loop["schedule"]["refill_until"] == 0
    else:
        # No replay: training waits while --prepopulate steps refill it.
        assert len(after.replay) == 0
        assert loop["schedule"]["refill_until"] == 300 + config.prepopulate


@pytest.mark.faults
def test_run_parts_refuse_a_checkpoint_of_another_run(tmp_path):
    from fast_dqn.errors import ConfigError
    from fast_dqn.run.storage.checkpoint import latest_checkpoint
    config, _ = filled_parts(tmp_path, save_replay=False)
    other = dict(SMALL, logdir=str(tmp_path), env="Acrobot-v1")
    other = Config(**other)
    with pytest.raises(ConfigError, match="does not belong to this run") as error:
        built_parts(other, latest_checkpoint(str(tmp_path), "resume"))
    assert error.value.setting == "resume"
    assert "was trained on CartPole-v1 (2 actions, observations of shape (1, 4)), but " \
        "config.json describes Acrobot-v1 (2 actions, observations of shape (1, 4))" \
        in str(error.value)


# Double, dueling and n-step together, in every loop: the learner and replay they build,
# and a stop with replay saved that resumes into exactly the straight run.
@pytest.mark.slow  # three real runs, each stopped and resumed
@pytest.mark.parametrize("loop", ["nature", "fast", "fast-lockstep"])
@pytest.mark.faults
def test_the_dqn_extensions_build_and_resume_exactly_in_every_loop(tmp_path, loop,
                                                                   monkeypatch):
    import numpy as np

    from fast_dqn.run.storage.checkpoint import CheckpointStore
    batches = []

    def recorded(learner, batch):
        batches.append(batch)
        assert learner.double and learner.main.get_layer("value") is not None
    on_every_minibatch(monkeypatch, recorded)
    extensions = dict(double=True, dueling=True, n_step=3, save_replay=True, timesteps=600)
    run = train_nature if loop == "nature" else train_fast
    run(small_config(loop, tmp_path / "straight", **extensions))
    straight = CheckpointStore(str(tmp_path / "straight")).latest().load_state()
    assert len(batches) == minibatches_due(0, 600, SMALL["prepopulate"], 4)
    # Each transition with its bootstrap discount, gamma^m for the m steps it sums.
    assert {round(float(d), 6) for batch in batches for d in batch.discounts} <= {
        round(0.99 ** m, 6) for m in (1, 2, 3)}

    config = small_config(loop, tmp_path / "split", **extensions)
    start = len(batches)
    assert run(config, stop=lambda: len(batches) - start >= 30) < 600
    assert run(config, resume=CheckpointStore(str(tmp_path / "split")).latest()) == 600
    split = CheckpointStore(str(tmp_path / "split")).latest().load_state()
    for a, b in zip(straight["learner"]["main"], split["learner"]["main"]):
        np.testing.assert_array_equal(a, b)


@pytest.fixture
def fast_loops(monkeypatch):
    """The FastLoops run in this test, so a test can read a loop's state as it goes."""
    from fast_dqn.loops.fast_loop import FastLoop
    loops, run = [], FastLoop.run

    def remembered(self, state=None):
        loops.append(self)
        return run(self, state)
    monkeypatch.setattr(FastLoop, "run", remembered)
    return loops


# A resume that lowers --timesteps into the period the checkpoint stopped in, whose
# minibatches the trainer had been handed whole. The samplers are slowed so the trainer could
# run ahead of them. Resumed at the stop's step, one round later, and mid-way to the period's
# end: each must train the Nature count of its new budget and play no step past it.
@pytest.mark.parametrize("cut", [0, 8, 48])
@pytest.mark.parametrize("save_replay", [True, False])
@pytest.mark.faults
def test_a_resume_that_cuts_the_budget_trains_the_nature_count_of_the_new_one(
        tmp_path, train_calls, fast_loops, monkeypatch, cut, save_replay):
    import time

    from fast_dqn.envs.samplers import PythonSamplers
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    step = PythonSamplers.step

    def slow(self, actions):
        time.sleep(0.01)
        return step(self, actions)
    monkeypatch.setattr(PythonSamplers, "step", slow)
    config = small_config("fast", tmp_path, timesteps=800, save_replay=save_replay)
    stopped_at = train_fast(config, stop=lambda: fast_loops[-1].state.step >= 296)
    state = CheckpointStore(str(tmp_path)).latest().load_state()["loop"]
    assert stopped_at == 296 and state["trained_through"] == 400  # mid-period
    # None of the handed-out minibatches of steps past the stop was trained before it.
    assert len(train_calls) <= minibatches_due(0, stopped_at, SMALL["prepopulate"], 4)
    budget = stopped_at + cut
    cut_config = small_config("fast", tmp_path, timesteps=budget, save_replay=save_replay)
    assert train_fast(cut_config, resume=CheckpointStore(str(tmp_path)).latest()) == budget
    assert fast_loops[-1].state.step == budget
    assert len(train_calls) == minibatches_due(0, budget, SMALL["prepopulate"], 4)
    final = CheckpointStore(str(tmp_path)).latest()
    assert final.step == budget
    assert final.load_state()["learner"]["optimizer"][0] == len(train_calls)


def test_the_trainer_never_trains_a_minibatch_of_a_step_not_yet_played(tmp_path, fast_loops,
                                                                         monkeypatch):
    # Checked at every train step: the samplers' step, read from the loop's state, against
    # the minibatches the Nature loop has trained by then (the trainer may trail, not lead).
    trained = []

    def checked(learner, batch):
        # Before a call, for each of its minibatches: the whole call must be played.
        trained.append(1)
        step = fast_loops[0].state.step
        assert len(trained) <= minibatches_due(0, step, SMALL["prepopulate"], 4), step
    on_every_minibatch(monkeypatch, checked)
    train_fast(small_config("fast", tmp_path, timesteps=600))
    assert len(trained) == minibatches_due(0, 600, SMALL["prepopulate"], 4)


# Cut to the very step of the checkpoint: the run's last evaluation still comes, at that step
# (found by the crash fuzzer: the Nature loop ended there without it).
@pytest.mark.parametrize("loop", ["nature", "fast"])
@pytest.mark.faults
def test_a_budget_cut_to_the_checkpoint_still_evaluates_there(tmp_path, train_calls, loop):
    from helpers import rows

    from fast_dqn.run.storage.checkpoint import CheckpointStore
    config = small_config(loop, tmp_path, timesteps=800, evaluate=160, eval_episodes=1,
                          save_replay=True)
    run = train_nature if loop == "nature" else train_fast
    stopped_at = run(config, stop=lambda: len(train_calls) >= 30)
    assert stopped_at % 160 and stopped_at < 800
    cut = small_config(loop, tmp_path, timesteps=stopped_at, evaluate=160, eval_episodes=1,
                       save_replay=True)
    assert run(cut, resume=CheckpointStore(str(tmp_path)).latest()) == stopped_at
    assert int(rows(tmp_path / "eval.csv")[-1]["agent_step"]) == stopped_at
    assert len(train_calls) == minibatches_due(0, stopped_at, SMALL["prepopulate"], 4)


# A stop in the warm-up, resumed without replay: the line says when training starts now,
# and the run still trains the Nature count.
@pytest.mark.parametrize("loop", ["nature", "fast"])
@pytest.mark.faults
def test_a_resume_without_replay_in_the_warm_up_says_when_training_starts(
        tmp_path, monkeypatch, train_calls, loop, capsys):
    from fast_dqn.run.logs.monitor import Monitor
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    steps, tick = [], Monitor.tick

    def ticked(self, step, epsilon):
        steps.append(step)
        return tick(self, step, epsilon)
    monkeypatch.setattr(Monitor, "tick", ticked)
    run = train_nature if loop == "nature" else train_fast
    config = small_config(loop, tmp_path, timesteps=400)
    stopped_at = run(config, stop=lambda: bool(steps) and steps[-1] >= 40)
    assert 40 <= stopped_at < SMALL["prepopulate"] and not train_calls
    capsys.readouterr()
    assert run(config, resume=CheckpointStore(str(tmp_path)).latest()) == 400
    starts = stopped_at + SMALL["prepopulate"]
    missed = minibatches_due(stopped_at, starts, SMALL["prepopulate"], 4)
    done = starts + 4 * missed  # one made up with each minibatch due
    assert ("replay was not saved in the checkpoint (--save-replay saves it): the run was "
            "still in its warm-up; 100 steps refill replay, so training starts at step "
            f"{starts:,}, not 100; the {missed:,} minibatches missed meanwhile are made up "
            f"afterwards, one with each due, by about step {done:,}, so the run trains as many "
            "as an unbroken one") in capsys.readouterr().out
    assert len(train_calls) == minibatches_due(0, 400, SMALL["prepopulate"], 4)


@pytest.mark.slow  # three CartPole runs: 25 s
def test_a_seeded_run_is_the_same_run_whatever_the_updates_per_call(tmp_path):
    """On TensorFlow a call of K updates is the K single updates, bit for bit: so a seeded
    fast run with K = 1, 64 or 7 (which cuts each period of 50 minibatches differently)
    plays the same games and ends with the same networks and optimizer. (On JAX the scan
    rounds otherwise, within the tolerance tests/agent/test_fused_updates.py checks.)"""
    import keras
    import numpy as np

    from fast_dqn.run.storage.checkpoint import CheckpointStore
    if keras.backend.backend() != "tensorflow":
        pytest.skip("bit-for-bit only on TensorFlow")
    logs, states = {}, {}
    for k in (1, 64, 7):
        config = small_config("fast", tmp_path / f"k{k}", timesteps=800, updates_per_call=k)
        train_fast(config)
        logs[k] = (tmp_path / f"k{k}" / "episodes.csv").read_text().splitlines()
        states[k] = CheckpointStore(str(tmp_path / f"k{k}")).latest().load_state()["learner"]
    strip = lambda lines: [line.rsplit(",", 1)[0] for line in lines]  # noqa: E731 - not hours
    assert len(logs[1]) > 20 and strip(logs[1]) == strip(logs[64]) == strip(logs[7])
    for k in (64, 7):
        for part in ("main", "target", "optimizer"):
            for a, b in zip(states[1][part], states[k][part]):
                np.testing.assert_array_equal(a, b)
    assert states[1]["optimizer"][0] == minibatches_due(0, 800, SMALL["prepopulate"], 4)


# A fast-loop stop before its first sync point leaves replay empty (everything played is
# still held). With --save-replay that empty replay is saved as replay all the same: the
# resume must not take it for a checkpoint without replay, pause training for a refill, and
# so part from the straight run (found by crash-fuzzer trial 5005).
@pytest.mark.faults
def test_a_stop_before_the_first_sync_point_saves_its_empty_replay(tmp_path, fast_loops,
                                                                   capsys):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    config = small_config("fast", tmp_path, timesteps=400, save_replay=True)
    stopped_at = train_fast(config, stop=lambda: fast_loops[-1].state.step >= 40)
    checkpoint = CheckpointStore(str(tmp_path)).latest()
    assert stopped_at == checkpoint.step == 40 < SMALL["target_update_freq"]
    assert checkpoint.has_replay
    assert train_fast(config, resume=checkpoint) == 400
    assert "replay was not saved" not in capsys.readouterr().out
    assert fast_loops[-1].state.schedule.refill_until == 0


def test_the_replay_line_never_contradicts_the_device_line():
    """--replay-device device on a CPU keeps a second copy in RAM: the line after "device:
    CPU" must not say GPU memory."""
    import types

    import numpy as np

    from fast_dqn.run.logs.console_lines import replay_line
    replay = types.SimpleNamespace(capacity=2_000, frames=np.zeros((1, 1, 84, 84), np.uint8))
    on_cpu = replay_line(replay, 4, "device", on_cpu=True)
    assert "GPU" not in on_cpu and "a second copy in RAM the trainer gathers" in on_cpu
    assert "mirrored in GPU memory" in replay_line(replay, 4, "device", on_cpu=False)
    from fast_dqn.agent.backend_setup import accelerator_memory
    if accelerator_memory() is None:  # the backend is asked where none is given
        assert replay_line(replay, 4, "device") == on_cpu


@pytest.mark.faults
def test_weights_that_diverge_behind_finite_losses_never_reach_a_checkpoint(tmp_path,
                                                                            monkeypatch,
                                                                            capsys):
    """The call that trains at step 400 leaves a NaN in the main network and returns finite
    losses; the checkpoint of step 400 is due next. The run stops there: exit 1, one line
    that names the last good checkpoint (200), no traceback, nothing written after it."""
    import re

    import keras
    import numpy as np

    from fast_dqn.run import cli
    from fast_dqn.run.run_kinds import NATURE
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    train = DQNLearner.train

    def diverging(self, batch):
        result = train(self, batch)
        if self.minibatches_trained() == (400 - SMALL["prepopulate"]) // 4:  # step 400's
            variable = self.main.weights[0]
            value = keras.ops.convert_to_numpy(variable.value).copy()
            value.flat[0] = np.nan
            variable.assign(value)
            self._compiled.variables_changed()
        return result
    monkeypatch.setattr(DQNLearner, "train", diverging)
    run_dir = tmp_path / "run"
    code = cli.main(NATURE, flags(dict(SMALL, timesteps=600, checkpoint_freq=200,
                                       logdir=str(run_dir))))
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    last = err.strip()
    good = re.escape(f"{run_dir / 'checkpoints' / 'step-000000000200'} (step 200); "
                     f"python run_dqn.py --resume {run_dir} continues from it")
    assert re.fullmatch(
        r"run_dqn\.py: error: the main network's \S+ is not finite: training diverged; "
        rf"nothing diverged was saved: the last good checkpoint is {good}, but with the same "
        r"settings it may diverge again: a new run with a lower --lr \(or, for --env, "
        r"smaller rewards\) is the fix", last), last
    store = CheckpointStore(str(run_dir))
    assert store.steps() == [200]
    state = store.latest().load_state()["learner"]
    assert all(np.isfinite(w).all() for w in state["main"] + state["target"]
               + [v for v in state["optimizer"] if v.dtype.kind == "f"])


# Each loop's own part says whether a checkpoint's games fit it, on its own (RunParts only
# orders the calls).

def test_the_nature_loops_game_refuses_a_saved_game_or_observation_that_does_not_fit(
        tmp_path):
    import numpy as np

    from fast_dqn.envs.environment import EnvStateMismatch, make_env
    from fast_dqn.run.components import env_settings
    from fast_dqn.run.settings.validation import resolve
    from fast_dqn.run.training import NatureGamePart
    from fast_dqn.state_schema import StateMismatch
    config = resolve(small_config("nature", tmp_path))
    env = make_env(env_settings(config), seed=0, training=True)
    try:
        env.reset()
        part = NatureGamePart(env)
        saved = {**part.state_dict(), "loop": {"obs": np.zeros((1, 4), np.float32)}}
        part.check_state_dict(saved)  # its own fits
        with pytest.raises(StateMismatch, match=r"^/loop/obs has shape \(4,\), not the "
                           r"observations' \(1, 4\)$"):
            part.check_state_dict({**saved, "loop": {"obs": np.zeros(4, np.float32)}})
        with pytest.raises(EnvStateMismatch, match="the saved env has the layers"):
            part.check_state_dict({**saved, "env": {**saved["env"], "layers": ["Other"]}})
        assert part.env is env  # nothing was loaded
    finally:
        env.close()


def test_the_fast_loops_games_refuse_held_steps_or_observations_that_do_not_fit(tmp_path):
    import numpy as np

    from fast_dqn.run.components import build_local_backend
    from fast_dqn.run.settings.validation import resolve
    from fast_dqn.run.training import SamplerGamesPart
    from fast_dqn.state_schema import StateMismatch
    config = resolve(FastConfig(**dict(SMALL, logdir=str(tmp_path)), workers=2,
                                env_backend="python", concurrent=True))
    backend = build_local_backend(config)
    try:
        part = SamplerGamesPart(backend)
        obs = np.zeros((2, 1, 4), np.float32)
        held = [(np.zeros((1, 2, 4), np.float32), np.zeros((1, 2), np.int32),
                 np.zeros((1, 2), np.float32), np.zeros((1, 2), bool), np.zeros((1, 2), bool),
                 np.array([0, 1]))]
        saved = {"samplers": {**part.state_dict()["samplers"], "obs": obs},
                 "loop": {"held": held}}
        part.check_state_dict(saved)  # its own fits
        other_shards = [(*held[0][:5], np.array([0, 2]))]
        with pytest.raises(StateMismatch, match=r"^/loop/held/0 names shards outside 0\.\.1$"):
            part.check_state_dict({**saved, "loop": {"held": other_shards}})
        with pytest.raises(StateMismatch, match=r"^/samplers/obs is not an array of shape "
                           r"\(2, 1, 4\)$"):
            part.check_state_dict({**saved, "samplers": {**saved["samplers"], "obs": obs[:1]}})
    finally:
        backend.close()


class RefusingGame(SavedGame):
    """An own part that refuses every checkpoint, as a game of another env would."""

    def check_state_dict(self, state):
        from fast_dqn.state_schema import StateMismatch
        raise StateMismatch("/env/states/0/frames holds 1 of shapes [(1, 4)], not 1 of (4,)")


def _swap_first_two(weights):
    weights[0], weights[1] = weights[1], weights[0]


def _unrecorded_and_swapped(state):
    del state["settings"]["dueling"]
    _swap_first_two(state["learner"]["main"])


# (edit of the checkpoint's state, own part, what the one line says)
REFUSALS = {
    "game": (lambda s: None, RefusingGame, "/env/states/0/frames holds 1 of shapes"),
    "replay": (lambda s: s["replay"]["pointers"].__setitem__(0, 5_000), SavedGame,
               "/replay/pointers is not an array of shape (1,) of whole numbers from 0 to "
               "1,999 (one per replay shard)"),
    # A pointer at the ring's end passed once, and the resume died in an IndexError.
    "replay pointer at its end": (
        lambda s: s["replay"].update(pointers=np.array([2_000]), sizes=np.array([2_000])),
        SavedGame, "/replay/pointers is not an array of shape (1,) of whole numbers from 0 "
        "to 1,999"),
    "replay pointer past its fill": (
        lambda s: s["replay"]["pointers"].__setitem__(0, 301), SavedGame,
        "/replay/pointers/0 is 301, but shard 0 holds 300 of its 2,000 records "
        "(/replay/sizes/0), so its next record is 300"),
    "best": (lambda s: s.update(best={"step": 400, "mean": 1.0,
                                      "weights": s["learner"]["main"]}), SavedGame,
             "/best is of step 400 or of another network's weights, not of this run up to "
             "step 300"),
    # Once accepted: best/ exported it, and `evaluate --best` blamed divergence.
    "best not finite": (lambda s: s.update(best={"step": 200, "mean": 1.0, "weights": [
        np.full_like(w, np.nan) for w in s["learner"]["main"]]}), SavedGame,
        "(/best/weights/0 holds a NaN or an infinity): it was edited"),
    # Networks of the run's own settings: the checkpoint was edited, not config.json.
    "learner": (lambda s: _swap_first_two(s["learner"]["target"]), SavedGame,
                "/state.json does not hold what this fast-dqn writes (/learner/target/0 holds "
                "shape (256,), not (4, 256) as this run's network needs): it was edited"),
    "optimizer slot": (
        lambda s: s["learner"]["optimizer"].__setitem__(3, np.zeros(3, np.float32)),
        SavedGame, "(/learner/optimizer/3 holds shape (3,), not (4, 256) as this run's "
        "network needs): it was edited"),
    # Once accepted: the resume cut the logs, then called the edit "the last good checkpoint".
    "optimizer count": (
        lambda s: s["learner"]["optimizer"].__setitem__(0, np.int64(-5)), SavedGame,
        "iteration) is -5, not a whole number of 0 or more: it counts the updates made): "
        "it was edited"),
    # A checkpoint that records no "dueling" (an earlier release's): config.json may say
    # another network, so both are named, the checkpoint first.
    "networks, a setting unrecorded": (_unrecorded_and_swapped, SavedGame,
        "its networks do not fit the ones this run's settings build (/learner/main/0 holds "
        "shape (256,), not (4, 256) as this run's network needs); it records no \"dueling\", "
        "so either config.json was edited there"),
}


@pytest.mark.parametrize("refused_by", REFUSALS)
@pytest.mark.faults
def test_a_refusal_by_one_part_leaves_every_part_unloaded_and_every_file_as_it_was(
        tmp_path, monkeypatch, refused_by):
    """RunParts checks every part before it loads any: the parts checked after the one that
    refuses are not loaded either, and nothing of the run directory changes."""
    import numpy as np

    from fast_dqn.agent.replay_memory import ReplayMemory
    from fast_dqn.errors import ConfigError
    from fast_dqn.run.settings.validation import resolve
    from fast_dqn.run.storage.best_weights import BestWeights
    from fast_dqn.run.storage.checkpoint import Checkpoint, latest_checkpoint
    from fast_dqn.run.training import RunParts
    edit, own, expected = REFUSALS[refused_by]
    config, _ = filled_parts(tmp_path, save_replay=True)
    files = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    read = Checkpoint.load_state

    def edited(self, schema=None):
        state = read(self, schema)
        edit(state)
        return state
    monkeypatch.setattr(Checkpoint, "load_state", edited)
    loaded = []
    for cls in (DQNLearner, ReplayMemory, BestWeights):
        monkeypatch.setattr(cls, "load_state_dict",
                            lambda self, state, name=cls.__name__: loaded.append(name))
    with pytest.raises(ConfigError) as refusal:
        RunParts(resolve(config), (1, 4), np.dtype(np.float32), 2, 1, "main",
                 latest_checkpoint(str(tmp_path), "resume"), own=own())
    assert refusal.value.setting == "resume" and expected in str(refusal.value)
    assert loaded == []
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == files



# Lockstep, stopped mid-period with minibatches still deferred by an earlier resume without
# replay, then resumed with --timesteps cut to its step: the resumed run plays no chunk, so
# only the run's end can train the deferred ones, as a straight run would. The second run
# saves replay: resumed without it, a lockstep run holds no transition to sample (its chunks
# were written at once), so the deferred ones are dropped with a warning.
@pytest.mark.faults
def test_a_lockstep_resume_cut_to_its_step_trains_the_deferred_minibatches(
        tmp_path, train_calls, fast_loops):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    config = small_config("fast-lockstep", tmp_path, timesteps=800)
    first = train_fast(config, stop=lambda: fast_loops[-1].state.step >= 160)
    # Resumed without replay: a refill of 100 steps defers their minibatches, repaid one per
    # minibatch due after it, so at step 304 some are still deferred.
    saving = small_config("fast-lockstep", tmp_path, timesteps=800, save_replay=True)
    second = train_fast(saving, resume=CheckpointStore(str(tmp_path)).latest(),
                        stop=lambda: fast_loops[-1].state.step >= 304)
    checkpoint = CheckpointStore(str(tmp_path)).latest()
    loop = checkpoint.load_state()["loop"]
    assert (first, second) == (160, 304) and checkpoint.has_replay
    assert not loop["boundary"] and loop["schedule"]["deferred"] > 0  # mid-period, owing
    cut = small_config("fast-lockstep", tmp_path, timesteps=second, save_replay=True)
    assert train_fast(cut, resume=checkpoint) == second
    assert len(train_calls) == minibatches_due(0, second, SMALL["prepopulate"],
                                               SMALL["train_freq"])


# The audit's sequence (concurrent loop): stopped mid-period after its first sync point,
# resumed without replay (the refill defers what the period owed), stopped again before the
# next sync point, then resumed with --timesteps cut to that step. Every sitting's trainer is
# checked at each call against the steps played, across the sittings: it may trail, never
# lead (a trainer that trails hides a lead here: tests/loops/test_period.py holds it). The
# second sitting saves replay or not. Stopped at 340, the refill outlasts the sync point at
# 400, whose hand-out defers the minibatches of steps 401 to 440.
@pytest.mark.parametrize("stops", [(296, 372), (340, 460)])
@pytest.mark.parametrize("workers", [1, 4, 7])
@pytest.mark.parametrize("save_replay", [False, True])
@pytest.mark.faults
def test_a_cut_resume_after_a_refill_trains_the_nature_count(tmp_path, fast_loops,
                                                             monkeypatch, stops, workers,
                                                             save_replay):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    trained = []

    def checked(learner, batch):
        trained.append(1)
        step = fast_loops[-1].state.step
        assert len(trained) <= minibatches_due(0, step, SMALL["prepopulate"], 4), step
    on_every_minibatch(monkeypatch, checked)

    def config(timesteps=800, save=False):
        return FastConfig(**dict(SMALL, logdir=str(tmp_path), timesteps=timesteps,
                                 save_replay=save), workers=workers, env_backend="python")
    first = train_fast(config(), stop=lambda: fast_loops[-1].state.step >= stops[0])
    second = train_fast(config(save=save_replay),
                        resume=CheckpointStore(str(tmp_path)).latest(),
                        stop=lambda: fast_loops[-1].state.step >= stops[1])
    assert first - stops[0] < workers and second - stops[1] < workers  # both mid-period
    assert first % 200 and second % 200 and second - first < 200 + workers
    assert train_fast(config(second, save_replay),
                      resume=CheckpointStore(str(tmp_path)).latest()) == second
    assert len(trained) == minibatches_due(0, second, SMALL["prepopulate"], 4)
