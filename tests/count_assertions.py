"""Counts the suite's assertions, so that moving or merging test modules can be shown to keep
every one: `assert` statements plus uses of `pytest.raises` and `pytest.warns`, per file and
in all. The shared helpers and fakes count too, since a check moved out of a test module into
tests/helpers.py is still made. With --collect it also asks pytest how many tests it
collects.

    python tests/count_assertions.py [--collect] [--per-file]

Not a test module (pytest collects test_*.py only); docs/testing.md says when to run it.
"""

import ast
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CHECKS = {"raises", "warns"}


def count(path):
    """The asserts and pytest.raises/pytest.warns uses of one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    total = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            total += 1
        # pytest.raises(...) as a call, a context manager or a decorator argument alike.
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in CHECKS and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "pytest":
            total += 1
    return total


def test_modules():
    return sorted(TESTS.rglob("test_*.py"))


def shared_files():
    """conftest.py, helpers.py, the fakes: every other .py file under tests/ but this one."""
    return sorted(path for path in TESTS.rglob("*.py")
                  if not path.name.startswith("test_") and path != Path(__file__).resolve())


def collected():
    """pytest's own last line of --collect-only -q: "N tests collected in ..."."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q"],
                            cwd=TESTS.parent, capture_output=True, text=True)
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else result.stderr.strip()[-500:]


def main(argv):
    modules = test_modules()
    per_file = {path.relative_to(TESTS.parent).as_posix(): count(path)
                for path in modules + shared_files()}
    lines = sum(len(path.read_text(encoding="utf-8").splitlines())
                for path in modules + shared_files())
    if "--per-file" in argv:
        for name, n in per_file.items():
            print(f"{n:6d}  {name}")
    print(f"test modules: {len(modules)}, shared files: {len(shared_files())}")
    print(f"lines of tests (every .py under tests/ but this one): {lines}")
    in_modules = sum(count(path) for path in modules)
    print(f"assertions: {sum(per_file.values())} ({in_modules} in test modules)")
    if "--collect" in argv:
        print(f"collected: {collected()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
