"""Building the components of a run from its Config, and running either loop with them."""

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
    policy = "mixed_float16" if config.mixed_precision else None
    return DQNLearner(lambda: nature_cnn(observation_shape, num_actions, policy),
                      make_optimizer(config.optimizer, config.lr, config.mixed_precision),
                      config.discount, xla=config.xla)


def build_replay(config, frame_shape, num_shards=1):
    return ReplayMemory(config.replay_capacity, frame_shape, config.history_length,
                        seed=rng_for(config.seed, REPLAY_RNG_STREAM).integers(2**31),
                        num_shards=num_shards)


def start_tensorflow(config):
    devices = configure_tensorflow(config.seed, config.threads)
    print(f"TensorFlow devices: {', '.join(devices)}", flush=True)


def build_samplers(config):
    """The fast loop's W games: sampler i is seeded with seed + i."""
    from fast_dqn.samplers import PythonSamplers, VectorSamplers
    if config.env_backend == "vector":
        return VectorSamplers(config, config.workers, config.seed, config.env_threads)
    return PythonSamplers([make_atari_env(config, seed=config.seed + i, training=True)
                           for i in range(config.workers)])


def train_fast(config, samplers_factory=build_samplers):
    from fast_dqn.background_trainer import BackgroundTrainer
    from fast_dqn.fast_loop import make_evaluate_fn, run_fast_loop

    start_tensorflow(config)
    samplers = samplers_factory(config)
    eval_env = make_atari_env(config, seed=config.seed + EVAL_ENV_SEED_OFFSET, training=False)
    shape = (config.history_length, 84, 84)
    learner = build_learner(config, shape, samplers.num_actions)
    replay = build_replay(config, shape[1:], num_shards=config.workers)
    monitor = Monitor(config.logdir, config.timesteps)
    trainer = None
    if config.concurrent:
        trainer = BackgroundTrainer(learner.train,
                                    lambda: replay.sample(config.batch_size),
                                    on_loss=lambda result: monitor.record_train(result[0]),
                                    prefetch=config.prefetch)
    try:
        run_fast_loop(config, samplers, learner.target_q_values, learner, replay, trainer,
                      monitor, rng_for(config.seed, ACTION_RNG_STREAM),
                      make_evaluate_fn(config, eval_env, learner.target_q_values, monitor,
                                       rng_for(config.seed, EVAL_RNG_STREAM)))
    finally:
        if trainer is not None:
            trainer.close()
        monitor.close()
        samplers.close()
        eval_env.close()


def train_nature(config):
    from fast_dqn.nature_loop import run_nature_loop

    start_tensorflow(config)
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
