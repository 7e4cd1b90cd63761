#!/usr/bin/env python3
"""Train the Nature DQN of Mnih et al. (2015) on an Atari game: act 4 steps, train 1 minibatch."""

import sys

from fast_dqn.run.cli import main
from fast_dqn.run.run_kinds import NATURE

if __name__ == "__main__":
    sys.exit(main(NATURE, __doc__, script=True))
