#!/usr/bin/env python3
"""Train the Nature DQN of Mnih et al. (2015); installed, the same command is `fast-dqn nature`."""

import sys

from fast_dqn.run.cli import main
from fast_dqn.run.run_kinds import NATURE

if __name__ == "__main__":
    sys.exit(main(NATURE, script=True))
