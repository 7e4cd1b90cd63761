#!/usr/bin/env python3
"""Train DQN fast (Daley & Amato 2021): W samplers act through the target network in batched
rounds while a background thread trains the main network. Same protocol as run_dqn.py."""

import sys

from fast_dqn.run.cli import main, validate_fast
from fast_dqn.run.hyperparameters import FastConfig
from fast_dqn.run.training import train_fast

if __name__ == "__main__":
    sys.exit(main("run_fast_dqn.py", "fast", __doc__, train_fast, config_class=FastConfig,
                  validate_extra=validate_fast, script=True))
