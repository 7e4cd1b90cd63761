"""Where each setting's value comes from: the defaults, then the preset, then the flags typed."""

import dataclasses

from fast_dqn.errors import ConfigError
from fast_dqn.run.settings import hyperparameters as hp
from fast_dqn.run.settings.flags import explicit_values


def build_config(explicit, config_class=hp.Config):
    """The Config a command line asks for: the defaults, then the preset, then its flags.

    Args:
        explicit: the settings the user typed, {setting: value} (explicit_values' answer).
        config_class: the Config class to build, Config or FastConfig.

    Returns:
        A `config_class` whose values are the preset's where the user typed none.

    Raises:
        ConfigError: the flags contradict each other or the preset (--env with --game, --env
            with an Atari preset, --workers with --backend ray).
    """
    from fast_dqn.run.settings.presets import ATARI_PRESETS, preset_values
    if explicit.get("env") is not None and "game" in explicit:
        raise ConfigError("env", "--env and --game are exclusive; give only one of them")
    preset = explicit.get("preset") or ("classic" if explicit.get("env") else "nature")
    names = {f.name for f in dataclasses.fields(config_class)}
    values = {k: v for k, v in preset_values(preset).items() if k in names}
    if explicit.get("optimizer", values.get("optimizer")) != values.get("optimizer"):
        # A preset's epsilon and loss reduction belong to its optimizer: another optimizer
        # typed on the command line takes its own source's values.
        for name in ("optimizer_epsilon", "loss_reduction", "rmsprop_init"):
            values.pop(name, None)
    values.update(explicit)
    values["preset"] = preset
    if values.get("backend") == "ray" and "workers" in explicit:
        raise ConfigError("workers", "counts the games of --backend threads; with --backend "
                          "ray give --num-samplers and --envs-per-sampler instead")
    if values.get("env") is not None:
        if preset in ATARI_PRESETS:
            raise ConfigError("preset", f"'{preset}' is for Atari games; use --game with it, "
                              "or another --preset with --env")
        values["game"] = None
        if "env_backend" in names:
            if explicit.get("env_backend", "python") != "python":
                raise ConfigError("env_backend", "the vector backend runs Atari games only; "
                                  "drop it with --env (the python backend is used)")
            values["env_backend"] = "python"
    return config_class(**values)


def config_from_args(args, config_class=hp.Config):
    """The Config parsed command-line arguments ask for (see build_config)."""
    return build_config(explicit_values(args, config_class), config_class)


