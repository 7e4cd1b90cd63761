"""Turning what the user typed after --game into an ALE environment id."""

import difflib
import re

from fast_dqn.errors import ConfigError


def snake_case(name):
    """'SpaceInvaders' -> 'space_invaders'; 'space_invaders' stays as it is."""
    name = name.strip()
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return name.replace("-", "_").lower()


def camel_case(snake):
    """'space_invaders' -> 'SpaceInvaders', as ale-py's ids spell the game."""
    return "".join(part.capitalize() for part in snake.split("_"))


def available_games():
    """The games that ship with the installed ale-py and have a v5 id.

    A few ROMs (two-player games such as combat) ship without a registered single-agent id.

    Returns:
        Their snake_case names, sorted.
    """
    import ale_py
    import gymnasium
    from ale_py import roms
    gymnasium.register_envs(ale_py)
    return sorted(g for g in roms.get_all_rom_ids() if env_id(g) in gymnasium.registry)


def resolve_game(name, games=None):
    """The game a name the user typed names, in any case, with or without underscores.

    Args:
        name: what the user typed after --game ("SpaceInvaders", "space_invaders").
        games: the snake_case names to choose from; None asks `available_games`.

    Returns:
        The game's snake_case name.

    Raises:
        ConfigError: no game has that name (the closest are named), or it is a gymnasium id
            (the game it names is).
    """
    games = available_games() if games is None else games
    wanted = snake_case(name)
    if wanted in games:
        return wanted
    squashed = {g.replace("_", ""): g for g in games}
    if wanted.replace("_", "") in squashed:
        return squashed[wanted.replace("_", "")]
    gym = _GYM_ID.match(name.strip())
    if gym and resolve_quietly(gym.group("game"), games):
        # Not accepted as the game: the id also names settings (v4: no sticky actions, v5:
        # sticky 0.25, NoFrameskip) that fast-dqn sets through its own flags and presets.
        game = resolve_quietly(gym.group("game"), games)
        raise ConfigError("game", f"'{name}' is a gymnasium id; fast-dqn builds its own Atari "
                          f"env from the game's name: did you mean --game {game}? (its "
                          "preprocessing is set by --preset and the flags; --list-games lists "
                          "the games)")
    close = difflib.get_close_matches(wanted, games, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "--list-games lists the games"
    raise ConfigError("game", f"unknown game '{name}'; {hint}")


# A gymnasium Atari id: ALE/Pong-v5, PongNoFrameskip-v4, Pong-ramDeterministic-v4, ...
_GYM_ID = re.compile(r"^(?:ALE/)?(?P<game>[A-Za-z0-9]+?)(?:-ram)?"
                     r"(?:NoFrameskip|Deterministic)?-v\d+$")


def resolve_quietly(name, games):
    """The snake_case game `name` names, or None."""
    try:
        return resolve_game(name, games)
    except ConfigError:
        return None


def env_id(game):
    """ALE/<CamelCase>-v5, the gymnasium id registered by ale-py."""
    return f"ALE/{camel_case(game)}-v5"
