"""The package's shape: its subpackages are layers, each importing only those below it, no
import cycles between modules (imports inside functions count too), and no import of a script,
a benchmark or a test."""

import ast

import pytest
from package_map import RUN_ROOMS, layer, package_modules

# Bottom to top. "" is the package's own top-level modules (errors); run/'s rooms and the
# command line's entries: tests/package_map.py.
BELOW_RUN = {"", "envs", "agent", "loops"}
MAY_IMPORT = {"": set(), "envs": {""}, "agent": {""}, "loops": {"", "envs", "agent"},
              **{room: BELOW_RUN for room in RUN_ROOMS},
              "run": BELOW_RUN | set(RUN_ROOMS),
              # suite/ starts runs through the command line and reads their files.
              "suite": BELOW_RUN | set(RUN_ROOMS) | {"run"},
              "tools": BELOW_RUN | set(RUN_ROOMS) | {"run", "suite"}}


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
    assert layer("run.storage.checkpoint") == "run.storage" and layer("run.cli") == "run"


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


def names_of(path):
    """Every variable, parameter and attribute name a module's code uses."""
    names = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def test_nothing_below_run_takes_the_config():
    """envs/, agent/ and loops/ are given their own frozen settings (EnvSettings, LoopSettings,
    RaySettings), built from the Config in fast_dqn/run/components.py: a module below run/
    that names a `config` reads fields a reader cannot see from its signature."""
    below = [module for module in package_modules() if layer(module) in BELOW_RUN]
    assert "envs.environment" in below and "loops.ray_backend" in below
    readers = sorted(module for module in below
                     if "config" in names_of(package_modules()[module]))
    assert readers == []


def attributes_read(path):
    """(object name, attribute) of every `name.attribute` a module reads."""
    return {(node.value.id, node.attr) for node in ast.walk(ast.parse(open(path).read()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)}


def test_every_config_field_is_read_by_name():
    """A field declared on Config but read by nothing is an option that silently does nothing
    (Acme's max_gradient_norm). Each must be read as config.<field> somewhere in the package
    (generic loops over the fields, such as the checkpoint's settings, do not count)."""
    import dataclasses

    from fast_dqn.run.settings.hyperparameters import Config, FastConfig
    read = set()
    for path in package_modules().values():
        read |= {attr for name, attr in attributes_read(path) if name == "config"}
    fields = {field.name for config in (Config, FastConfig) for field in dataclasses.fields(config)}
    assert len(fields) > 50
    assert sorted(fields - read) == []
