"""--preset dopamine against Dopamine's own code.

Each value of the preset is pinned to the line of Dopamine's code it comes from
(google/dopamine, the TensorFlow DQN of its published baselines); the behaviours that need
code of their own (epsilon held through the warm-up, no FIRE at a game's start, the network's
padding and initialiser, TF1's RMSProp) are checked by hand. plot --reference against its
curves is tested in tests/tools/test_reference.py, and the preset's frames on both env
backends in tests/envs/test_frame_identity.py.
"""

import keras
import numpy as np
import pytest
from backend_math import nature_lua_gradients, pong_like_batch
from fake_ale import FakeAtariEnv

from fast_dqn.envs import atari_wrappers as w
from fast_dqn.run.components import loop_settings
from fast_dqn.run.settings.hyperparameters import Config
from fast_dqn.run.settings.presets import PRESETS
from fast_dqn.run.settings.validation import resolve

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
