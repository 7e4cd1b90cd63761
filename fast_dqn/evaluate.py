"""`python -m fast_dqn.evaluate`, the command's name before the package had subpackages; the tool
is fast_dqn.tools.evaluate."""

import sys

from fast_dqn.tools.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
