"""Building the components of a run from its Config, and running the Nature loop with them."""

import numpy as np

from fast_dqn.environment import make_atari_env
from fast_dqn.monitor import Monitor
from fast_dqn.replay_memory import ReplayMemory
from fast_dqn.tf_setup import configure_tensorflow

# Seed offsets keep every random stream of a run distinct yet derived from the one --seed.
EVAL_ENV_SEED_OFFSET = 10_000
ACTION_RNG_STREAM, EVAL_RNG_STREAM, REPLAY_RNG_STREAM = 0, 1, 2


def rng_for(seed, stream):
    return np.random.default_rng([seed, stream])


def build_learner(config, observation_shape, num_actions):
    from fast_dqn.learner import DQNLearner, make_optimizer
    from fast_dqn.q_network import nature_cnn
    return DQNLearner(lambda: nature_cnn(observation_shape, num_actions),
                      make_optimizer(config.optimizer, config.lr), config.discount,
                      xla=config.xla)


def build_replay(config, frame_shape):
    return ReplayMemory(config.replay_capacity, frame_shape, config.history_length,
                        seed=rng_for(config.seed, REPLAY_RNG_STREAM).integers(2**31))


def train_nature(config):
    from fast_dqn.nature_loop import run_nature_loop

    devices = configure_tensorflow(config.seed, config.threads)
    print(f"TensorFlow devices: {', '.join(devices)}", flush=True)
    env = make_atari_env(config, seed=config.seed, training=True)
    eval_env = make_atari_env(config, seed=config.seed + EVAL_ENV_SEED_OFFSET, training=False)
    shape = env.observation_space.shape
    learner = build_learner(config, shape, env.action_space.n)
    replay = build_replay(config, shape[1:])
    monitor = Monitor(config.logdir, config.timesteps)
    try:
        run_nature_loop(config, env, eval_env, learner, replay, monitor,
                        rng_for(config.seed, ACTION_RNG_STREAM),
                        rng_for(config.seed, EVAL_RNG_STREAM))
    finally:
        monitor.close()
        env.close()
        eval_env.close()
