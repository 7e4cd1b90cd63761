"""The package's shape: no import cycles between its modules, counting imports inside
functions too, and no import of a script, a benchmark or a test."""

import ast
import os

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fast_dqn")


def import_graph():
    modules = {name[:-3] for name in os.listdir(PACKAGE) if name.endswith(".py")}
    graph, foreign = {}, []
    for module in modules:
        tree = ast.parse(open(os.path.join(PACKAGE, module + ".py")).read())
        targets = set()
        for node in ast.walk(tree):
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
                if parts[0] == "fast_dqn" and len(parts) > 1 and parts[1] in modules:
                    targets.add(parts[1])
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


def test_no_import_cycles_and_no_imports_of_scripts_or_tests():
    graph, foreign = import_graph()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    assert foreign == []


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
