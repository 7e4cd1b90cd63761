"""Building a run's environment from its EnvSettings: an Atari game, or any gymnasium env."""

import difflib
import pickle

import gymnasium
import numpy as np

from fast_dqn.envs import atari_wrappers as w
from fast_dqn.errors import ConfigError
from fast_dqn.state_schema import GAME, WHOLE, StateMismatch, check_state, optional

# ALE takes its seed as a C int. A run derives its games' seeds from --seed by adding offsets
# (game i of W, the step a resumed vector env restarts at), so every derived seed is folded
# into [0, SEED_RANGE): unchanged below it, valid above. Evaluation games draw theirs from a
# SeedSequence, within the range.
SEED_RANGE = 2**31


def game_seed(seed, games=1):
    """The seed of the first of `games` games seeded seed, seed + 1, ..., each one in range.

    Args:
        seed: the seed asked for.
        games: how many games take consecutive seeds from it.

    Returns:
        `seed` itself where all `games` seeds fit below SEED_RANGE, else it folded into it.
    """
    return seed % (SEED_RANGE - games + 1)


def make_raw_atari_env(game, sticky_actions, full_action_space):
    """The emulator, one frame per step: frame skipping and time limits are the wrappers'.

    Args:
        game: the game's snake_case name, as fast_dqn.envs.games resolves it.
        sticky_actions: ALE's repeat_action_probability, per emulator frame.
        full_action_space: whether the env takes all 18 actions, not the game's minimal set.

    Returns:
        The emulator, an AleGame.
    """
    from fast_dqn.envs.ale_game import AleGame
    return AleGame(game, sticky_actions=sticky_actions, full_action_space=full_action_space)


def wrap_atari(env, settings, training):
    """Apply the preprocessing stack of fast_dqn.envs.atari_wrappers to a raw emulator env.

    Args:
        env: the emulator, as `make_raw_atari_env` builds it.
        settings: the EnvSettings of the run.
        training: whether the env is the learner's: only then are rewards clipped.

    Returns:
        The wrapped env, whose steps are agent steps and whose states are stacked frames.
    """
    env = w.GameStart(env, noop_max=settings.noop_max, fire=settings.fire_start)
    env = w.MaxAndSkip(env, skip=settings.action_repeat)
    env = w.TimeLimit(env, max_episode_steps=settings.max_episode_steps)
    env = w.FullGameStats(env)
    if settings.episodic_life:
        env = w.EpisodicLife(env)
    if training:
        env = w.ClipReward(env)
    env = w.Resize(env, interp=settings.interp)
    return w.FrameHistory(env, k=settings.history_length)


class SeedOnFirstReset(gymnasium.Wrapper):
    """Pass `seed` to the first reset() only, so the loops just call reset(), none thrown away.

    Args:
        env: the env to seed.
        seed: the seed of its first game (folded by `game_seed`); None leaves it unseeded.
    """

    def __init__(self, env, seed):
        super().__init__(env)
        self.pending_seed = None if seed is None else game_seed(seed)
        env.action_space.seed(self.pending_seed)

    def reset(self, **kwargs):
        """Start a game, with the pending seed if this is the first.

        Args:
            **kwargs: gymnasium's reset arguments; a seed given here wins over the pending one.

        Returns:
            (observation, info), as the wrapped env's reset.
        """
        if self.pending_seed is not None:
            kwargs.setdefault("seed", self.pending_seed)
            self.pending_seed = None
        return self.env.reset(**kwargs)

    STATE = {"pending_seed": optional(WHOLE)}

    def state_dict(self):
        """The wrapper's state, as data.

        Returns:
            {"pending_seed": the seed the next reset takes, or None}.
        """
        return {"pending_seed": self.pending_seed}

    def load_state_dict(self, state):
        """Put the wrapper in a saved state.

        Args:
            state: what `state_dict` returned, as a checkpoint gives it back.
        """
        self.pending_seed = state["pending_seed"]


def make_atari_env(settings, seed, training=True):
    """An Atari game with its preprocessing, seeded at its first reset() (see `make_env`)."""
    env = make_raw_atari_env(settings.game, settings.sticky_actions, settings.full_action_space)
    return SeedOnFirstReset(wrap_atari(env, settings, training), seed)


def make_env(settings, seed, training=True):
    """The run's env: an Atari game with its preprocessing, or the --env one.

    Args:
        settings: the EnvSettings of the run.
        seed: the seed of its first game; None leaves it unseeded.
        training: whether it is the learner's env: only then are an Atari game's rewards clipped.

    Returns:
        The env, a SeedOnFirstReset.
    """
    if settings.env is None:
        return make_atari_env(settings, seed, training)
    env = gymnasium.make(settings.env, disable_env_checker=True)
    env = w.FrameHistory(w.FullGameStats(env), k=settings.history_length)
    return SeedOnFirstReset(env, seed)


def check_gym_env(name):
    """Check that a gymnasium env is one the MLP Q-network handles, and say its observations.

    Args:
        name: the gymnasium env id given to --env.

    Returns:
        (shape, dtype) of one observation.
    """
    if name.startswith("ALE/"):
        raise ConfigError("env", f"'{name}' is an Atari game; use ${{game}} "
                          f"{name[4:].split('-')[0]} for the Atari preprocessing and CNN")
    if name not in gymnasium.registry:
        close = difflib.get_close_matches(name, list(gymnasium.registry), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else "see gymnasium's env list"
        raise ConfigError("env", f"unknown gymnasium env '{name}'; {hint}")
    try:
        env = gymnasium.make(name, disable_env_checker=True)
    except Exception as error:  # an env that cannot even be built is the user's input error
        raise ConfigError("env", f"cannot create '{name}' ({error}); choose another ${{env}}")
    try:
        actions, observations = env.action_space, env.observation_space
    finally:
        env.close()
    if not isinstance(actions, gymnasium.spaces.Discrete):
        raise ConfigError("env", f"'{name}' has {type(actions).__name__} actions; DQN needs "
                          "discrete ones")
    if not isinstance(observations, gymnasium.spaces.Box) or len(observations.shape) != 1:
        raise ConfigError("env", f"'{name}' observations are not a flat vector; the MLP "
                          "Q-network needs one")
    return observations.shape, np.dtype(observations.dtype)


class EnvStateMismatch(ValueError):
    """A saved env state whose layers are not this env's (another wrapper stack)."""


def _layers(env):
    """The env's layers, outermost first, down to the first not ours (AleGame, or a --env env)."""
    layers = [env]
    while hasattr(env, "state_dict") and isinstance(env, gymnasium.Wrapper):
        env = env.env
        layers.append(env)
    return layers


def env_state(env):
    """The complete state of a built env, mid-game included, as data.

    A --env gymnasium env has no state API; it alone is kept pickled (its classes are
    gymnasium's, which our renames cannot break).

    Args:
        env: an env as `make_env` builds it.

    Returns:
        {"layers": each layer's class name, outermost first, "states": the state_dict of each
        layer that has one, the emulator's included, "foreign": the pickled --env env, or None}.
    """
    layers = _layers(env)
    inner = layers[-1]
    return {"layers": [type(layer).__name__ for layer in layers],
            "states": [layer.state_dict() for layer in layers if hasattr(layer, "state_dict")],
            "foreign": None if hasattr(inner, "state_dict")
            else pickle.dumps(inner, protocol=pickle.HIGHEST_PROTOCOL)}


def check_env_state(env, state, where="/env"):
    """Check, changing nothing, that `load_env_state` can load `state` into `env`.

    Args:
        env: the env to load into, built as the saved one was.
        state: what `env_state` returned, as a checkpoint gives it back.
        where: the path of `state` in the checkpoint, which the errors name.

    Returns:
        The layers of `env` that have a state, outermost first.

    Raises:
        EnvStateMismatch: the saved env has other layers.
        StateMismatch: a value has another form; it is named by its path under `where`.
    """
    check_state(state, GAME, where)
    layers = _layers(env)
    names = [type(layer).__name__ for layer in layers]
    if names != state["layers"]:
        raise EnvStateMismatch(f"the saved env has the layers {state['layers']}, this one "
                               f"{names}")
    stateful = [layer for layer in layers if hasattr(layer, "state_dict")]
    if len(state["states"]) != len(stateful):
        raise StateMismatch(f"{where}/states holds {len(state['states'])} states for the "
                            f"{len(stateful)} layers that have one")
    for i, (layer, layer_state) in enumerate(zip(stateful, state["states"])):
        # Each layer declares what its state holds (STATE); some check more (check_saved).
        check_state(layer_state, layer.STATE, f"{where}/states/{i}")
        if hasattr(layer, "check_saved"):
            layer.check_saved(layer_state, f"{where}/states/{i}")
    # Only an env whose innermost layer has no state of its own (a gymnasium --env) is kept
    # pickled. A checkpoint is the user's own file, but a pickle is unpickled only where the
    # run writes one.
    pickled = not hasattr(layers[-1], "state_dict")
    if pickled and state["foreign"] is None:
        raise StateMismatch(f"{where}/foreign is null, not this env's pickle")
    if not pickled and state["foreign"] is not None:
        raise StateMismatch(f"{where}/foreign holds bytes, but this env keeps no pickle")
    if state["foreign"] is not None:
        try:
            pickle.loads(state["foreign"])
        except Exception as error:  # anything unpickling garbage raises
            raise StateMismatch(f"{where}/foreign cannot be unpickled ({error})") from error
    return stateful


def load_env_state(env, state, where="/env"):
    """Put `env` in a saved state, checked first by check_env_state: a refused one changes nothing.

    Args:
        env: the env to load into, built as the saved one was.
        state: what `env_state` returned, as a checkpoint gives it back.
        where: the path of `state` in the checkpoint, which the errors name.

    Returns:
        The env to use: `env` itself, or a new one where the outermost layer was kept pickled.
    """
    stateful = check_env_state(env, state, where)
    for layer, layer_state in zip(stateful, state["states"]):
        layer.load_state_dict(layer_state)
    layers = _layers(env)
    if state["foreign"] is None:
        return env
    inner = pickle.loads(state["foreign"])
    try:
        layers[-1].close()
    except Exception:  # an env that failed may not close cleanly; it is replaced anyway
        pass
    if len(layers) == 1:
        return inner
    layers[-2].env = inner
    return env
