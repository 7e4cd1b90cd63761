"""The package's modules and the layer each belongs to, for the tests that check its shape
(tests/test_architecture.py, tests/test_test_map.py, tests/test_docstrings.py): test modules
import from here, never from each other."""

import os

from helpers import ROOT

PACKAGE = os.path.join(ROOT, "fast_dqn")
# run/ has three rooms, each importing nothing of the others, and the assembly on top of
# them (run/*.py).
RUN_ROOMS = ("run.settings", "run.storage", "run.logs")
# The command line's entries sit on top of every layer: `fast-dqn` (commands, __main__) and
# the tools' old names (`python -m fast_dqn.evaluate`, `... .plot`), each only calling a tool.
COMMAND_ALIASES = {"evaluate", "plot", "commands", "__main__"}


def package_modules():
    """{'envs.games': path, 'errors': path, ...}: every module of the package, __init__ aside."""
    modules = {}
    for folder, _, files in os.walk(PACKAGE):
        prefix = os.path.relpath(folder, PACKAGE).replace(os.sep, ".").strip(".")
        for name in files:
            if name.endswith(".py") and name != "__init__.py":
                modules[f"{prefix}.{name[:-3]}".strip(".")] = os.path.join(folder, name)
    return modules


def layer(module):
    """The layer of a module: "" (the package's top), a folder, or a room of run/."""
    if module in COMMAND_ALIASES:
        return "tools"
    room = ".".join(module.split(".")[:2])
    if room in RUN_ROOMS:
        return room
    return module.split(".")[0] if "." in module else ""
