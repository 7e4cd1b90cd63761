"""`fast-dqn COMMAND [options]`: the installed command (pip install .), and `python -m
fast_dqn`. Each command is the script or tool of the same job, under the same flags:

    fast-dqn fast       run_fast_dqn.py
    fast-dqn nature     run_dqn.py
    fast-dqn evaluate   python -m fast_dqn.tools.evaluate
    fast-dqn plot       python -m fast_dqn.tools.plot
    fast-dqn suite      games × seeds of one protocol (fast_dqn.suite)
    fast-dqn group      fast-loop runs of one protocol in one process (fast_dqn.run.group_cli)
"""

import sys

from fast_dqn.code_version import version_line

_SUMMARIES = {"fast": "train the fast DQN of Daley & Amato (2021), as run_fast_dqn.py",
              "nature": "train the Nature DQN of Mnih et al. (2015), as run_dqn.py",
              "evaluate": "play a run's checkpoint, record a video, export its network",
              "plot": "draw runs' learning curves, against published ones too",
              "suite": "run games × seeds, here or on a Ray cluster, resumable",
              "group": "train fast-loop runs of one protocol in one process (JAX)"}


def _usage(name):
    lines = [f"usage: {name} COMMAND [options]   ({name} COMMAND --help for its options)", "",
             "commands:"]
    lines += [f"  {command:<9} {what}" for command, what in _SUMMARIES.items()]
    lines += ["", "options:", "  --version  print the fast-dqn version (and git commit) and exit"]
    return "\n".join(lines)


def main(argv=None, name="fast-dqn"):
    """Run `fast-dqn COMMAND [options]`: the COMMAND with the rest of argv; return its status.

    Training ends as fast_dqn.run.cli says; everything else as fast_dqn.tools.tool_exits says.

    Args:
        argv: the command and its options; None reads sys.argv, as the installed command.
        name: the program's name, for usage lines and messages.
    """
    from fast_dqn.run.run_kinds import FAST, NATURE
    whole_process = argv is None  # the installed command or python -m fast_dqn
    argv = sys.argv[1:] if argv is None else list(argv)
    kinds = {kind.command: kind for kind in (FAST, NATURE)}
    if argv and argv[0] in kinds:
        from fast_dqn.run.cli import main as train
        return train(kinds[argv[0]], argv[1:], script=True, prog=f"{name} {argv[0]}")
    if argv and argv[0] == "group":
        from fast_dqn.run.group_cli import main as group
        return group(argv[1:], prog=f"{name} group", script=True)
    from fast_dqn.tools.tool_exits import run_tool
    prog = f"{name} {argv[0]}" if argv and argv[0] in _SUMMARIES else name
    return run_tool(prog, lambda: _tool(argv, name), then_ignore=whole_process)


def _tool(argv, name):
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(name))
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "--version":
        print(version_line(name))
        return 0
    prog = f"{name} {command}"
    if command == "evaluate":
        from fast_dqn.tools.evaluate import main as evaluate
        return evaluate(rest, prog=prog)
    if command == "plot":
        from fast_dqn.tools.plot import main as plot
        return plot(rest, prog=prog)
    if command == "suite":
        from fast_dqn.suite.cli import main as suite
        return suite(rest, prog=prog)
    choices = ", ".join(_SUMMARIES)
    print(f"{name}: error: unknown command '{command}'; choose one of {choices} (see "
          f"{name} --help)", file=sys.stderr)
    return 2
