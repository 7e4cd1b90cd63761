"""The package's shape: its subpackages are layers, each importing only those below it, no
import cycles between modules (imports inside functions count too), and no import of a script,
a benchmark or a test."""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fast_dqn")
# Bottom to top. "" is the package's own top-level modules (errors).
MAY_IMPORT = {"": set(), "envs": {""}, "agent": {""}, "loops": {"", "envs", "agent"},
              "run": {"", "envs", "agent", "loops"},
              "tools": {"", "envs", "agent", "loops", "run"}}
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


def import_graph():
    modules = package_modules()
    graph, foreign = {}, []
    for module, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(open(path).read())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] in ("run_dqn", "run_fast_dqn", "benchmarks", "tests") or \
                        parts[0].startswith("test_"):
                    foreign.append((module, name))
                inner = ".".join(parts[1:])
                if parts[0] == "fast_dqn" and inner in modules:
                    targets.add(inner)
        graph[module] = targets - {module}
    return graph, foreign


def layer(module):
    if module in COMMAND_ALIASES:
        return "tools"
    return module.split(".")[0] if "." in module else ""


def find_cycle(graph):
    state = {}

    def visit(node, path):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target, path + [target])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def test_every_module_sits_in_a_known_layer():
    modules = package_modules()
    assert len(modules) > 30  # the walk found the subpackages
    assert {layer(module) for module in modules} == set(MAY_IMPORT)


def test_no_import_cycles_and_no_imports_of_scripts_or_tests():
    graph, foreign = import_graph()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    assert foreign == []


def test_each_layer_imports_only_the_layers_below_it():
    graph, _ = import_graph()
    upward = sorted(f"{module} -> {target}" for module, targets in graph.items()
                    for target in targets
                    if layer(target) != layer(module)
                    and layer(target) not in MAY_IMPORT[layer(module)])
    assert upward == []


@pytest.mark.parametrize("graph, cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set()}, None),
])
def test_the_cycle_finder(graph, cycle):
    assert find_cycle(graph) == cycle
