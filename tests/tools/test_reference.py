"""--preset dopamine against Dopamine's own code, and plot --reference against its curves.

Each value of the preset is pinned to the line of Dopamine's code it comes from
(google/dopamine, the TensorFlow DQN of its published baselines); the behaviours that need
code of their own (epsilon held through the warm-up, no FIRE at a game's start, the network's
padding and initialiser, TF1's RMSProp) are checked by hand; and the reference table is
checked on logs whose answer is known.
"""

import csv
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from fake_ale import FakeAtariEnv
from helpers import ROOT
from test_learner import nature_lua_gradients, pong_like_batch

from fast_dqn.envs import atari_wrappers as w
from fast_dqn.errors import ConfigError
from fast_dqn.run.components import loop_settings
from fast_dqn.run.settings.hyperparameters import Config, FastConfig
from fast_dqn.run.settings.presets import PRESETS
from fast_dqn.run.settings.validation import resolve
from fast_dqn.tools.reference import compare, load_reference

GIN = "dopamine/agents/dqn/configs/dqn.gin"
ATARI_LIB = "dopamine/discrete_domains/atari_lib.py"
AGENT = "dopamine/agents/dqn/dqn_agent.py"
RUNNER = "dopamine/discrete_domains/run_experiment.py"

# Setting: (Dopamine's value, where it is). docs/protocol.md prints the same table.
DOPAMINE = {
    "sticky_actions": (0.25, f"{GIN}: Runner.sticky_actions = True; {ATARI_LIB}: "
                       "create_atari_environment makes '<Game>NoFrameskip-v0', whose ALE "
                       "repeats an action with probability 0.25"),
    "full_action_space": (False, f"{ATARI_LIB}: gym.make's default, the minimal set"),
    "episodic_life": (False, f"{ATARI_LIB}: AtariPreprocessing(terminal_on_life_loss=False)"),
    "noop_max": (0, f"{ATARI_LIB}: AtariPreprocessing.reset only resets the emulator"),
    "fire_start": (False, f"{ATARI_LIB}: AtariPreprocessing.reset presses nothing"),
    "max_episode_steps": (27_000, f"{GIN}: Runner.max_steps_per_episode = 27000"),
    "replay_capacity": (1_000_000, f"{GIN}: WrappedReplayBuffer.replay_capacity = 1000000"),
    "prepopulate": (20_000, f"{GIN}: DQNAgent.min_replay_history = 20000"),
    "batch_size": (32, f"{GIN}: WrappedReplayBuffer.batch_size = 32"),
    "train_freq": (4, f"{GIN}: DQNAgent.update_period = 4"),
    "target_update_freq": (8_000, f"{GIN}: DQNAgent.target_update_period = 8000"),
    "discount": (0.99, f"{GIN}: DQNAgent.gamma = 0.99"),
    "n_step": (1, f"{GIN}: DQNAgent.update_horizon = 1"),
    "eps_start": (1.0, f"{AGENT}: linearly_decaying_epsilon starts at 1"),
    "eps_end": (0.01, f"{GIN}: DQNAgent.epsilon_train = 0.01"),
    "eps_decay_steps": (250_000, f"{GIN}: DQNAgent.epsilon_decay_period = 250000"),
    "eps_decay_start": (20_000, f"{AGENT}: linearly_decaying_epsilon(..., warmup_steps="
                        "min_replay_history)"),
    "eval_epsilon": (0.001, f"{GIN}: DQNAgent.epsilon_eval = 0.001"),
    "optimizer": ("rmsprop", f"{GIN}: DQNAgent.optimizer = @tf.train.RMSPropOptimizer()"),
    "lr": (0.00025, f"{GIN}: tf.train.RMSPropOptimizer.learning_rate = 0.00025"),
    "optimizer_epsilon": (0.00001, f"{GIN}: tf.train.RMSPropOptimizer.epsilon = 0.00001"),
    "rmsprop_init": (1.0, "tensorflow/python/training/rmsprop.py: the 'rms' slot's "
                     "ones_initializer"),
    "loss_reduction": ("mean", f"{AGENT}: _build_train_op minimizes "
                       "tf.reduce_mean(huber_loss(..., reduction=NONE))"),
    "network": ("dopamine", f"{ATARI_LIB}: nature_dqn_network, slim.conv2d's defaults "
                "('SAME', xavier_initializer)"),
    "precision": ("float32", f"{ATARI_LIB}: tf.cast(state, tf.float32)"),
    "timesteps": (50_000_000, f"{GIN}: Runner.num_iterations = 200 x training_steps = 250000"),
    "evaluate": (0, "ours: the published values are the training games' returns"),
    "checkpoint_freq": (250_000, f"{RUNNER}: a checkpoint after every iteration"),
}


def test_the_preset_is_dopamines_table_value_for_value():
    assert {name: value for name, (value, _) in DOPAMINE.items()} == PRESETS["dopamine"]
    config = resolve(Config(**PRESETS["dopamine"], preset="dopamine", game="breakout"))
    for name, (value, source) in DOPAMINE.items():
        assert getattr(config, name) == value, source
    # What the preset leaves at Config's defaults is Dopamine's too.
    assert (config.action_repeat, config.history_length, config.interp) == (4, 4, "area")
    assert not (config.double or config.dueling)


def dopamine_epsilon(step, decay_period=250_000, warmup_steps=20_000, epsilon=0.01):
    """linearly_decaying_epsilon of dqn_agent.py, transcribed."""
    steps_left = decay_period + warmup_steps - step
    bonus = (1.0 - epsilon) * steps_left / decay_period
    return epsilon + np.clip(bonus, 0.0, 1.0 - epsilon)


def test_epsilon_is_held_through_the_warm_up_then_decays_as_dopamines():
    settings = loop_settings(Config(**PRESETS["dopamine"]))
    steps = np.array([0, 1, 19_999, 20_000, 20_001, 100_000, 145_000, 269_999, 270_000,
                      270_001, 1_000_000])
    np.testing.assert_allclose(settings.epsilon(steps), dopamine_epsilon(steps), atol=1e-12)
    assert settings.epsilon(145_000) == pytest.approx(0.505)
    # Nature's schedule is unchanged: it decays from step 0 (1M steps to 0.1).
    nature = loop_settings(Config(prepopulate=0))
    assert nature.epsilon(500_000) == pytest.approx(0.55)


def test_no_fire_at_the_start_of_a_game_when_fire_start_is_off():
    fake = FakeAtariEnv()  # has FIRE (action 1)
    w.GameStart(fake, noop_max=0, fire=False).reset(seed=3)
    assert fake.actions == []
    fake = FakeAtariEnv()
    w.GameStart(fake, noop_max=0).reset(seed=3)
    assert fake.actions == [1]


def test_dopamines_network_pads_same_and_starts_glorot_uniform():
    from fast_dqn.agent.q_network import nature_cnn
    keras.utils.set_random_seed(0)
    net = nature_cnn((4, 84, 84), 4, style="dopamine")
    convs = [layer for layer in net.layers if isinstance(layer, keras.layers.Conv2D)]
    assert [c.output.shape[1:] for c in convs] == [(21, 21, 32), (11, 11, 64), (11, 11, 64)]
    dense = [layer for layer in net.layers if isinstance(layer, keras.layers.Dense)]
    assert dense[0].kernel.shape == (11 * 11 * 64, 512)
    for layer in convs + dense:
        kernel = np.asarray(layer.kernel)
        receptive = int(np.prod(kernel.shape[:-2])) if kernel.ndim == 4 else 1
        fan_in, fan_out = kernel.shape[-2] * receptive, kernel.shape[-1] * receptive
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        assert np.abs(kernel).max() <= limit and np.abs(kernel).max() > 0.9 * limit
        assert not np.asarray(layer.bias).any()
    nature = nature_cnn((4, 84, 84), 4)
    assert nature.layers[2].output.shape[1:] == (20, 20, 32)


def tf1_centered_rmsprop_step(grads, ms, mg, lr=0.00025, decay=0.95, epsilon=1e-5):
    """One step of TF1's ApplyCenteredRMSProp with momentum 0: ms and mg move towards g^2
    and g; w -= lr * g / sqrt(ms - mg^2 + epsilon)."""
    deltas = []
    for i, g in enumerate(grads):
        ms[i] = ms[i] + (1 - decay) * (g * g - ms[i])
        mg[i] = mg[i] + (1 - decay) * (g - mg[i])
        deltas.append(-lr * g / np.sqrt(ms[i] - mg[i] ** 2 + epsilon))
    return deltas


def test_the_dopamine_learner_takes_tf1_rmsprops_steps_on_the_mean_huber_loss():
    """Five updates from TF1's starting state (ms = 1, mg = 0): each layer's step matches
    the transcription within 2%, so neither the ones nor the mean over the batch is lost."""
    from fast_dqn.run.components import build_learner
    keras.utils.set_random_seed(0)
    config = resolve(Config(**PRESETS["dopamine"], preset="dopamine", game="breakout"))
    learner = build_learner(config, (4, 84, 84), 6)
    rng = np.random.default_rng(0)
    ms = [np.ones_like(v) for v in learner.main.get_weights()]
    mg = [np.zeros_like(v) for v in learner.main.get_weights()]
    for _ in range(5):
        batch = pong_like_batch(rng)
        # The Huber loss's gradient is the TD error clipped to [-1, 1]: the Nature code's
        # summed gradient over the batch, divided by its size for the mean.
        grads = [g / len(batch[1]) for g in nature_lua_gradients(learner, batch)]
        expected = tf1_centered_rmsprop_step(grads, ms, mg)
        before = learner.main.get_weights()
        learner.train(batch)
        for layer, (b, a, e) in enumerate(zip(before, learner.main.get_weights(), expected)):
            ratio = np.linalg.norm(a - b) / np.linalg.norm(e)
            assert 0.98 <= ratio <= 1.02, f"layer {layer}: update {ratio:.3f} x TF1's"


# --- the reference data and plot --reference


def test_the_shipped_references_have_five_runs_an_iteration():
    for game in ("breakout", "pong", "space_invaders"):
        rows = load_reference("dopamine", game)
        assert [r.iteration for r in rows] == list(range(len(rows))) and len(rows) >= 199
        assert all(len(r.returns) == 5 for r in rows)
        assert [r.agent_steps_end for r in rows[:2]] == [250_000, 500_000]
    breakout = load_reference("dopamine", "breakout")
    assert (min(breakout[1].returns), max(breakout[1].returns)) == (2.8268, 3.27)
    assert (min(breakout[3].returns), max(breakout[3].returns)) == (5.8816, 7.511)


def write_run(run_dir, games, game="breakout", loop="fast", seed=0, checkpoint=None):
    """A run directory with a config.json and the given (end step, return) games."""
    os.makedirs(run_dir)
    config = {**FastConfig(**PRESETS["dopamine"], preset="dopamine", game=game).to_dict(),
              "loop": loop, "seed": seed}
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(run_dir, "episodes.csv"), "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["episode", "agent_step", "length", "return", "mean_100", "epsilon",
                      "hours"])
        for n, (step, value) in enumerate(games, 1):
            out.writerow([n, step, 100, value, value, 0.5, step / 1e6])
    if checkpoint is not None:
        os.makedirs(os.path.join(run_dir, "checkpoints", f"step-{checkpoint:012d}"))


def games_with_means(means, per_iteration=4, last_end=None):
    """Games in each 250k iteration whose mean is means[k]: pairs at mean -/+ 0.5, the last
    ending at the iteration's end."""
    games = []
    for k, mean in enumerate(means):
        start = k * 250_000
        ends = start + 250_000 // per_iteration * np.arange(1, per_iteration + 1)
        values = [mean - 0.5, mean + 0.5] * (per_iteration // 2)
        games += list(zip(ends.tolist(), values))
    if last_end is not None:
        games[-1] = (last_end, games[-1][1])
    return games


def test_an_iteration_plays_whole_games_as_dopamines_runner_does(tmp_path):
    # The game that reaches 250k steps (ending at 260k) is iteration 0's last, so iteration
    # 1 runs from 260k until a game ends at or past 510k (the one at 512k).
    write_run(tmp_path / "r", [(10, 1.0), (260_000, 3.0), (270_000, 10.0), (505_000, 2.0),
                               (512_000, 4.0), (600_000, 7.0)], checkpoint=600_000)
    rows = compare([str(tmp_path / "r")], "dopamine", "breakout")
    assert [(row.iteration, row.ours, row.finished) for row in rows] == [
        (0, (2.0,), True), (1, (16 / 3,), True), (2, (7.0,), False)]
    # The last iteration of a run stopped at its nominal end is finished without its
    # closing game: here iteration 1 ends at the 500k checkpoint.
    write_run(tmp_path / "s", [(10, 1.0), (250_000, 3.0), (250_001, 10.0), (499_000, 2.0)],
              checkpoint=500_000)
    rows = compare([str(tmp_path / "s")], "dopamine", "breakout")
    assert [(row.iteration, row.ours, row.finished) for row in rows] == [
        (0, (2.0,), True), (1, (6.0,), True)]


def test_inside_and_outside_the_published_range(tmp_path):
    # Breakout's published ranges: 1.57-1.70, 2.83-3.27, 3.33-4.51, 5.88-7.51.
    write_run(tmp_path / "inside", games_with_means([1.65, 3.0, 4.0, 6.5]), checkpoint=1_000_000)
    write_run(tmp_path / "outside", games_with_means([1.65, 2.0, 4.0, 8.0]),
              checkpoint=1_000_000)
    inside = compare([str(tmp_path / "inside")], "dopamine", "breakout")
    outside = compare([str(tmp_path / "outside")], "dopamine", "breakout")
    assert [row.inside for row in inside] == [1, 1, 1, 1]
    assert [row.inside for row in outside] == [1, 0, 1, 0]
    assert [round(row.mean, 6) for row in outside] == [1.65, 2.0, 4.0, 8.0]


def test_an_unfinished_iteration_is_shown_but_not_judged(tmp_path):
    # Checkpoint at 600k: iteration 2 (500k-750k) is under way.
    write_run(tmp_path / "r", games_with_means([1.65, 3.0, 4.0])[:-2], checkpoint=600_000)
    assert [row.finished for row in compare([str(tmp_path / "r")], "dopamine", "breakout")] \
        == [True, True, False]
    # Logs copied without checkpoints: a game in an iteration's last tenth finishes it.
    write_run(tmp_path / "copied", games_with_means([1.65, 3.0], last_end=499_100))
    write_run(tmp_path / "cut", games_with_means([1.65, 3.0], last_end=400_000))
    assert [row.finished for row in compare([str(tmp_path / "copied")], "dopamine",
                                            "breakout")] == [True, True]
    assert [row.finished for row in compare([str(tmp_path / "cut")], "dopamine",
                                            "breakout")] == [True, False]


def plot(*args):
    return subprocess.run([sys.executable, "-m", "fast_dqn.tools.plot", *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_plot_reference_draws_the_band_and_prints_the_table(tmp_path):
    for seed, means in enumerate(([1.65, 3.0, 4.0, 6.5], [1.6, 3.1, 3.0, 7.0])):
        write_run(tmp_path / f"fast-s{seed}", games_with_means(means), seed=seed,
                  checkpoint=1_000_000)
    write_run(tmp_path / "nature-s0", games_with_means([1.65, 2.0]), loop="nature",
              checkpoint=500_000)
    image = tmp_path / "ref.png"
    result = plot(tmp_path / "fast-s0", tmp_path / "fast-s1", tmp_path / "nature-s0",
                  "--reference", "dopamine", "-o", image)
    assert result.returncode == 0, result.stderr
    assert image.stat().st_size > 10_000
    lines = result.stdout.splitlines()
    assert "| 1 | 500,000 | 3.05 [3.00, 3.10] | 3.06 | 2.83 – 3.27 | 2 of 2 runs |" in lines
    assert "| 2 | 750,000 | 3.50 [3.00, 4.00] | 3.94 | 3.33 – 4.51 | 1 of 2 runs |" in lines
    assert "| 1 | 500,000 | 2.00 | 3.06 | 2.83 – 3.27 | no |" in lines
    assert "| 0 | 250,000 | 1.65 | 1.64 | 1.57 – 1.70 | yes |" in lines


def test_the_legend_says_how_many_runs_each_iteration_averages():
    from fast_dqn.tools.reference import Comparison, runs_label
    rows = [Comparison(k, 250_000 * (k + 1), (1.0,) * n, True, None)
            for k, n in enumerate([2, 2, 1, 1])]
    assert runs_label("breakout fast", rows) == \
        "breakout fast (2 runs to 500,000 agent steps, then 1)"
    assert runs_label("x", rows[:2]) == "x (2 runs)"
    assert runs_label("x", rows[2:]) == "x (1 run)"
    three = [Comparison(k, 10 * (k + 1), (1.0,) * n, True, None) for k, n in
             enumerate([3, 2, 1])]
    assert runs_label("x", three) == "x (3 runs to 10 agent steps, 2 runs to 20 agent steps, " \
        "then 1)"



def test_an_iteration_only_one_of_the_runs_reached_is_judged_on_it_alone():
    import io

    from fast_dqn.tools.reference import Comparison, ReferenceIteration, print_comparison
    published = ReferenceIteration(2, 750_000, (3.0, 4.0))
    rows = [Comparison(1, 500_000, (3.5, 5.0), True, ReferenceIteration(1, 500_000, (3.0, 4.0))),
            Comparison(2, 750_000, (3.5,), True, published)]
    out = io.StringIO()
    print_comparison(rows, "x", 2, out)
    lines = out.getvalue().splitlines()
    assert "| 1 | 500,000 | 4.25 [3.50, 5.00] | 3.50 | 3.00 – 4.00 | 1 of 2 runs |" in lines
    assert "| 2 | 750,000 | 3.50 | 3.50 | 3.00 – 4.00 | yes (1 run) |" in lines


@pytest.mark.parametrize("edit,reference,message", [
    (None, "nope", "--reference: no reference named 'nope'; the references are: dopamine"),
    ("missing", "dopamine", "has no episodes.csv"),
    ("no-config", "dopamine", "has no config.json; give run directories made by"),
])
def test_what_plot_reference_cannot_compare_is_one_line(tmp_path, edit, reference, message):
    write_run(tmp_path / "r", [(1000, 1.0), (2000, 2.0)], game="alien" if edit == "game"
              else "breakout")
    if edit == "missing":
        os.remove(tmp_path / "r" / "episodes.csv")
    if edit == "no-config":
        os.remove(tmp_path / "r" / "config.json")
    result = plot(tmp_path / "r", "--reference", reference, "-o", tmp_path / "x.png")
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_game_without_reference_data_and_a_run_without_games_are_left_out_by_name(
        tmp_path):
    write_run(tmp_path / "alien", [(1000, 100.0)], game="surround")
    write_run(tmp_path / "empty", [], seed=1)
    write_run(tmp_path / "breakout", games_with_means([1.65]), seed=2, checkpoint=250_000)
    runs = [tmp_path / "alien", tmp_path / "empty", tmp_path / "breakout"]
    result = plot(*runs, "--reference", "dopamine", "-o", tmp_path / "x.png")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"note: '{runs[0]}' is left out: 'dopamine' has no data for surround (it has 60 "
        "games; fast_dqn/reference_data/dopamine)",
        f"note: '{runs[1]}' is left out: it has no finished game yet"]
    assert "| 0 | 250,000 | 1.65 | 1.64 | 1.57 – 1.70 | yes |" in result.stdout.splitlines()
    result = plot(runs[0], "--reference", "dopamine", "-o", tmp_path / "y.png")
    assert result.returncode == 2 and "none of the runs can be compared" in result.stderr
    assert plot(runs[2], "--reference", "dopamine", "--window", "20").returncode == 2


def test_rows_are_read_whole_not_as_columns(tmp_path):
    """A row missing its step and another missing its return must not pair up; nor is
    'nan' a return."""
    write_run(tmp_path / "r", [(1000, 1.0), (2000, 3.0)], checkpoint=250_000)
    with open(tmp_path / "r" / "episodes.csv", "a") as f:
        f.write("3,,100,50.0,0,0.5,0.1\n4,3000,100,,0,0.5,0.1\n5,4000,100,nan,0,0.5,0.1\n")
    assert compare([str(tmp_path / "r")], "dopamine", "breakout")[0].ours == (2.0,)


def test_an_iteration_short_of_nine_tenths_is_not_finished_however_far_the_run_went(tmp_path):
    """Games that overshoot 250k by 20k each push every next iteration's start later: the
    fourth starts at 810k, so at a checkpoint of 1M it has played 190k steps, 76%."""
    games = [(270_000, 1.0), (540_000, 2.0), (810_000, 3.0), (1_000_000, 4.0)]
    write_run(tmp_path / "r", games, checkpoint=1_000_000)
    rows = compare([str(tmp_path / "r")], "dopamine", "breakout")
    assert [row.finished for row in rows] == [True, True, True, False]
    write_run(tmp_path / "s", games, checkpoint=1_050_000)  # 240k of it: 96%
    assert compare([str(tmp_path / "s")], "dopamine", "breakout")[3].finished


def test_a_row_being_written_is_left_for_later_and_another_protocol_is_named(tmp_path):
    """plot beside a training run: the run may be halfway through writing a row."""
    write_run(tmp_path / "r", [(1000, 1.0), (2000, 2.0)])
    with open(tmp_path / "r" / "episodes.csv", "a") as f:
        f.write("3,24")
    assert compare([str(tmp_path / "r")], "dopamine", "breakout")[0].ours == (1.5,)
    with open(tmp_path / "r" / "config.json") as f:
        saved = json.load(f)
    with open(tmp_path / "r" / "config.json", "w") as f:
        json.dump({**saved, "preset": "machado"}, f)
    result = plot(tmp_path / "r", "--reference", "dopamine", "-o", tmp_path / "x.png")
    assert result.returncode == 0 and "| 0 | 250,000 | 1.50 |" in result.stdout
    assert "ran --preset machado, not dopamine" in result.stderr


def test_load_reference_names_a_damaged_row(tmp_path, monkeypatch):
    import fast_dqn.tools.reference as reference
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "breakout.csv").write_text(
        "iteration,agent_steps_end,run_returns\n0,250000,1.0 x\n")
    monkeypatch.setattr(reference.resources, "files", lambda package: tmp_path)
    with pytest.raises(ConfigError, match="breakout.csv, line 2"):
        load_reference("mine", "breakout")


@pytest.mark.slow  # real ROMs for a thousand steps: the slow tier
def test_the_same_frames_on_dopamines_protocol():
    from test_frame_identity import drive_both
    config = FastConfig(**{**PRESETS["dopamine"], "max_episode_steps": 300}, game="breakout")
    counts = drive_both(config, num_samplers=2, steps=1000, seed=7)
    assert counts["game_overs"] + counts["cuts"] >= 1 and counts["life_losses"] == 0
