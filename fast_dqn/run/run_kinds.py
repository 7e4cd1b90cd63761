"""Which loop a run uses: the one table that maps a script, the "loop" its config.json
records, its Config class and its train function to each other."""

from dataclasses import dataclass

from fast_dqn.run.settings.hyperparameters import Config, FastConfig


@dataclass(frozen=True)
class RunKind:
    """One kind of run: the loop config.json names, its script, command, Config and trainer."""

    loop: str           # what config.json's "loop" says, and the run directory's name part
    script: str         # the script that starts and resumes such runs
    command: str        # its name as an installed command: fast-dqn COMMAND
    description: str    # what --help says first
    config_class: type
    train_name: str     # its train function in fast_dqn.run.training


NATURE = RunKind("dqn", "run_dqn.py", "nature",
                 "Train the Nature DQN of Mnih et al. (2015) on an Atari game: act 4 steps, "
                 "train 1 minibatch.", Config, "train_nature")
FAST = RunKind("fast", "run_fast_dqn.py", "fast",
               "Train DQN fast (Daley & Amato 2021): W samplers act through the target network "
               "in batched rounds while a background thread trains the main network. Same "
               "protocol as the Nature loop.", FastConfig, "train_fast")
RUN_KINDS = {kind.loop: kind for kind in (NATURE, FAST)}


def kind_of(config):
    """The RunKind (from RUN_KINDS) a Config, FastConfig or resolved one describes."""
    return RUN_KINDS[config.LOOP]


def kind_of_saved(saved):
    """The RunKind a config.json's settings record, or None where its "loop" names no loop here."""
    return RUN_KINDS.get(saved.get("loop"))
