"""`python -m fast_dqn COMMAND`: the installed `fast-dqn` command without installing it."""

import sys

from fast_dqn.commands import main

if __name__ == "__main__":
    sys.exit(main(name="python -m fast_dqn"))
