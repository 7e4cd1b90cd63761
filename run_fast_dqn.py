#!/usr/bin/env python3
"""Train DQN fast (Daley & Amato 2021); installed, the same command is `fast-dqn fast`."""

import sys

from fast_dqn.run.cli import main
from fast_dqn.run.run_kinds import FAST

if __name__ == "__main__":
    sys.exit(main(FAST, script=True))
