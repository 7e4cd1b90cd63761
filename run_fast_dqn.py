#!/usr/bin/env python3
"""Train DQN fast (Daley & Amato 2021): W samplers act through the target network in batched
rounds while a background thread trains the main network. Same protocol as run_dqn.py."""

import sys

from fast_dqn.run.cli import main
from fast_dqn.run.run_kinds import FAST

if __name__ == "__main__":
    sys.exit(main(FAST, __doc__, script=True))
