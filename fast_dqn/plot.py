"""`python -m fast_dqn.plot`, the command's name before the package had subpackages; the tool
is fast_dqn.tools.plot."""

import sys

from fast_dqn.tools.plot import PROG, main
from fast_dqn.tools.tool_exits import run_tool

if __name__ == "__main__":
    sys.exit(run_tool(PROG, main, then_ignore=True))
