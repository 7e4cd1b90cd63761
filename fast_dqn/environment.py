"""Building the preprocessed Atari environment from a Config."""

import gymnasium

from fast_dqn import atari_wrappers as w
from fast_dqn.games import env_id


def make_raw_atari_env(game, sticky_actions, full_action_space):
    """ALE/<Game>-v5 with every frame exposed: frame skipping and time limits are ours."""
    import ale_py
    gymnasium.register_envs(ale_py)
    return gymnasium.make(
        env_id(game),
        frameskip=1,
        repeat_action_probability=sticky_actions,
        full_action_space=full_action_space,
        max_num_frames_per_episode=0,  # 0 = no ALE limit; TimeLimit counts agent steps instead
        disable_env_checker=True,
    )


def wrap_atari(env, config, training):
    """Apply the Nature preprocessing stack (see fast_dqn.atari_wrappers) to a raw ALE env."""
    env = w.NoopReset(env, noop_max=config.noop_max)
    env = w.MaxAndSkip(env, skip=config.action_repeat)
    env = gymnasium.wrappers.TimeLimit(env, max_episode_steps=config.max_episode_steps)
    env = w.FullGameStats(env)
    env = w.EpisodicLife(env)
    env = w.FireReset(env)
    if training:
        env = w.ClipReward(env)
    env = w.GrayscaleResize(env, interp=config.interp)
    return w.FrameHistory(env, k=config.history_length)


class SeedOnFirstReset(gymnasium.Wrapper):
    """Pass `seed` to the first reset() only.

    gymnasium seeds an env through reset(seed=...). This keeps the seed with the factory, so
    the loops can just call reset() and a seeded env costs no extra throw-away reset.
    """

    def __init__(self, env, seed):
        super().__init__(env)
        self.pending_seed = seed
        env.action_space.seed(seed)

    def reset(self, **kwargs):
        if self.pending_seed is not None:
            kwargs.setdefault("seed", self.pending_seed)
            self.pending_seed = None
        return self.env.reset(**kwargs)


def make_atari_env(config, seed, training=True):
    """A preprocessed env that seeds itself with `seed` at its first reset()."""
    env = make_raw_atari_env(config.game, config.sticky_actions, config.full_action_space)
    return SeedOnFirstReset(wrap_atari(env, config, training), seed)
