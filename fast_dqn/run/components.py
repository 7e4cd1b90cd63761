"""The parts of a run, each built from the run's ResolvedConfig
(fast_dqn.run.settings.validation.resolve): the Q-network, the learner, replay and the
samplers, each seeded from its stream (fast_dqn.rng_streams); and the settings the layers
below run/ are given instead of the Config (EnvSettings, LoopSettings, RaySettings).

Both the run builder (fast_dqn.run.training) and the Ray sampler actors (fast_dqn.loops.ray_backend)
build from here, so neither needs the other.
"""

import functools

import numpy as np

from fast_dqn.agent.replay_memory import ReplayMemory
from fast_dqn.agent.schedules import LinearSchedule
from fast_dqn.envs.environment import game_seed, make_env
from fast_dqn.envs.settings import EnvSettings
from fast_dqn.loops.settings import LoopSettings, RaySettings
from fast_dqn.rng_streams import REPLAY_RNG_STREAM, rng_for
from fast_dqn.run.settings import hyperparameters as hp
from fast_dqn.run.settings.validation import ResolvedConfig


def env_settings(config, evaluation=False):
    """What the games are built from; an evaluation's games under their own time limit.

    Args:
        config: the run's ResolvedConfig (fast_dqn.run.settings.validation.resolve).
        evaluation: whether the games are an evaluation's, cut at its own limit in agent steps.

    Returns:
        The EnvSettings of one game.
    """
    return EnvSettings(
        game=config.game, env=config.env, history_length=config.history_length,
        noop_max=config.noop_max, fire_start=config.fire_start,
        action_repeat=config.action_repeat,
        max_episode_steps=hp.evaluation_cap(config) if evaluation else config.max_episode_steps,
        episodic_life=config.episodic_life, sticky_actions=config.sticky_actions,
        full_action_space=config.full_action_space, interp=config.interp)


def loop_settings(config):
    """The LoopSettings both loops follow, in agent steps; the minibatch in transitions."""
    return LoopSettings(config.timesteps, config.prepopulate, config.train_freq,
                        config.target_update_freq, config.batch_size, config.evaluate,
                        LinearSchedule(config.eps_start, config.eps_end,
                                       config.eps_decay_steps, config.eps_decay_start))


def ray_settings(config):
    """The Ray backend's cluster and actors (RaySettings)."""
    return RaySettings(address=config.ray_address, object_store_mb=config.ray_object_store_mb,
                       num_samplers=config.num_samplers,
                       envs_per_sampler=config.envs_per_sampler,
                       rollout_steps=config.rollout_steps,
                       requests_in_flight=config.requests_in_flight, seed=config.seed)


def network_builder(config, observation_shape, num_actions):
    """A function of no arguments that builds one fresh Q-network for this config.

    A Nature CNN for Atari, an MLP for --env; with a dueling head if asked, in the asked
    compute type. Raises TypeError when `config` is not a ResolvedConfig.
    """
    from fast_dqn.agent.q_network import mlp, nature_cnn
    if not isinstance(config, ResolvedConfig):  # its open settings would be guessed here
        raise TypeError("build from the config fast_dqn.run.settings.validation.resolve "
                        f"returns, not a {type(config).__name__}")
    policy = {"float32": None, "bfloat16": "mixed_bfloat16",
              "float16": "mixed_float16"}[config.precision]
    dueling, style = config.dueling, config.network
    if config.env is None:
        return lambda: nature_cnn(observation_shape, num_actions, policy, dueling=dueling,
                                  style=style)
    return lambda: mlp(observation_shape, num_actions, dtype_policy=policy, dueling=dueling)


def build_learner(config, observation_shape, num_actions):
    """The DQNLearner: its Q-network and target, and the optimizer the config asks for."""
    from fast_dqn.agent.learner import DQNLearner, make_optimizer
    return DQNLearner(network_builder(config, observation_shape, num_actions),
                      # float16 needs loss scaling; bfloat16 has float32's range and does not.
                      make_optimizer(config.optimizer, config.lr, config.optimizer_epsilon,
                                     config.precision == "float16", config.rmsprop_init),
                      compile_options(config), loss_reduction=config.loss_reduction,
                      double=config.double)


def compile_options(config):
    """The learner's CompileOptions, from the settings that choose how its calls compile."""
    from fast_dqn.agent.compile_options import CompileOptions
    return CompileOptions(xla=config.xla, scan_unroll=config.scan_unroll,
                          fused_optimizer=config.fused_optimizer,
                          deterministic=config.deterministic,
                          act_on_cpu=config.LOOP == "fast" and config.act_on_cpu)


def build_replay(config, frame_shape, num_shards=1, frame_dtype=np.uint8):
    """An empty ReplayMemory of --replay-capacity transitions, seeded from the replay stream.

    One shard per game played at once; `frame_shape` is one frame's, not the stack's.
    """
    return ReplayMemory(config.replay_capacity, frame_shape, config.history_length,
                        frame_dtype=frame_dtype,
                        seed=rng_for(config.seed, REPLAY_RNG_STREAM).integers(2**31),
                        num_shards=num_shards, n_step=config.n_step,
                        discount=config.discount)


def build_samplers(config, count=None, seed=None):
    """`count` training games (None: --workers) stepped together, game i seeded with seed + i.

    The seed (None: --seed) is folded so that all of them are valid ALE seeds, as the vector env
    folds it. VectorSamplers for Atari on ale-py's vector env, else PythonSamplers.
    """
    from fast_dqn.envs.samplers import PythonSamplers, VectorSamplers
    count = config.workers if count is None else count
    seed = game_seed(config.seed if seed is None else seed, count)
    settings = env_settings(config)
    if config.env_backend == "vector" and config.env is None:
        return VectorSamplers(settings, count, seed, config.env_threads)
    return PythonSamplers([make_env(settings, seed=seed + i, training=True)
                           for i in range(count)])


def build_local_backend(config):
    """The fast loop's samplers in this process (--backend threads).

    In two groups that take turns with --sampler-groups 2 (fast_dqn.loops.overlapped_backend),
    else all W in each round (fast_dqn.loops.experience.LocalBackend).
    """
    from fast_dqn.loops.experience import LocalBackend
    if config.sampler_groups != 2:
        return LocalBackend(build_samplers(config), batched=config.synchronize)
    from fast_dqn.envs.samplers import VectorSamplers
    from fast_dqn.loops.overlapped_backend import OverlappedBackend
    half, seed = config.workers // 2, game_seed(config.seed, config.workers)
    # Game i is seeded seed + i, as with one group. Each group may use every C++ thread
    # (--env-threads, or one per core up to W/2): mostly one group steps while the main
    # thread acts for the other.
    groups = [VectorSamplers(env_settings(config), half, seed + first, config.env_threads)
              for first in (0, half)]
    return OverlappedBackend(groups, config.target_update_freq)


def build_evaluation_games(config):
    """Where evaluation plays (fast_dqn.loops.evaluation), its games under their own limit.

    --eval-workers Atari games at once on ale-py's vector env, or one game at a time on a
    Python env (--env, one worker, or an --interp the vector env cannot honour).

    Args:
        config: the run's ResolvedConfig (fast_dqn.run.settings.validation.resolve).

    Returns:
        An AtOnce or a OneAtATime.
    """
    from fast_dqn.loops.evaluation import AtOnce, OneAtATime
    settings = env_settings(config, evaluation=True)
    if config.env is None and config.eval_workers > 1 and config.interp == "area":
        from fast_dqn.envs.samplers import VectorSamplers
        # Threads of the samplers' own size: they run only while an evaluation plays.
        return AtOnce(VectorSamplers(settings, config.eval_workers, seed=0))
    return OneAtATime(make_env(settings, seed=None, training=False))


def ray_sampler_builders(config):
    """The two builders a Ray sampler actor runs, pickled to it.

    Returns:
        (make_samplers, make_network): a function of a seed that builds the actor's
        --envs-per-sampler games, and a function of (observation shape, number of actions)
        that returns its target network's builder.
    """
    return (functools.partial(build_samplers, config, config.envs_per_sampler),
            functools.partial(network_builder, config))
