"""The named sets of Atari games a suite can run, and the parsing of --games.

nature49: the 49 games of Mnih et al. (2015). atari57: those and the
8 that Badia et al. (2020, Agent57) completed the benchmark with. dopamine60: the 60 games of
Dopamine's published baselines (google/dopamine, baselines/atari/data), whose DQN curves
ship with fast-dqn (fast_dqn/reference_data/dopamine). Names are our snake_case ones.
"""

from fast_dqn.errors import ConfigError

NATURE49 = (
    "alien", "amidar", "assault", "asterix", "asteroids", "atlantis", "bank_heist",
    "battle_zone", "beam_rider", "bowling", "boxing", "breakout", "centipede",
    "chopper_command", "crazy_climber", "demon_attack", "double_dunk", "enduro",
    "fishing_derby", "freeway", "frostbite", "gopher", "gravitar", "hero", "ice_hockey",
    "jamesbond", "kangaroo", "krull", "kung_fu_master", "montezuma_revenge", "ms_pacman",
    "name_this_game", "pong", "private_eye", "qbert", "riverraid", "road_runner", "robotank",
    "seaquest", "space_invaders", "star_gunner", "tennis", "time_pilot", "tutankham",
    "up_n_down", "venture", "video_pinball", "wizard_of_wor", "zaxxon")

ATARI57 = tuple(sorted(NATURE49 + ("berzerk", "defender", "phoenix", "pitfall", "skiing",
                                   "solaris", "surround", "yars_revenge")))

DOPAMINE60 = tuple(sorted(
    set(NATURE49) - {"surround"} | {"air_raid", "berzerk", "carnival", "elevator_action",
                                    "journey_escape", "phoenix", "pitfall", "pooyan", "skiing",
                                    "solaris", "yars_revenge"}))

SETS = {"nature49": NATURE49, "atari57": ATARI57, "dopamine60": DOPAMINE60}


def parse_games(text, available):
    """The games that --games names, in the order given, each once.

    An unknown name is refused in one line that names it and the closest games.

    Args:
        text: --games as typed: named sets and games (snake_case or CamelCase), separated by
            commas, mixed as the user likes.
        available: the snake_case names of the games the installed ale-py has.

    Returns:
        [game], snake_case names.

    Raises:
        ConfigError: ("games") a name is unknown or not installed, or none is given.
    """
    from fast_dqn.envs.games import resolve_game
    games = []
    for word in [w.strip() for w in text.split(",")]:
        if not word:
            continue
        names = SETS.get(word.lower())
        if names is None:
            try:
                names = (resolve_game(word, available),)
            except ConfigError as error:
                raise ConfigError("games", f"{error.message}; or a set: "
                                  f"{', '.join(SETS)}") from None
        games += [name for name in names if name not in games]
    if not games:
        raise ConfigError("games", "no game given; give games separated by commas "
                          f"(pong,breakout) or a set: {', '.join(SETS)}")
    missing = [name for name in games if name not in available]
    if missing:
        raise ConfigError("games", f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'}"
                          " not in the installed ale-py; --list-games on run_dqn.py lists "
                          "the games it has")
    return games
