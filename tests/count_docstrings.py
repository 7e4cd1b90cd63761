"""Counts the package's docstring lines against its lines of code (issue 63's aim: at most
half). A docstring line is a line of a module's, class's or function's docstring; a line of
code is any other line that is neither blank nor a comment.

    python tests/count_docstrings.py [FOLDER] [--per-file]

Not a test module (pytest collects test_*.py only).
"""

import ast
import sys
from pathlib import Path

OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def count(path):
    """(docstring lines, code lines) of one file."""
    source = path.read_text(encoding="utf-8")
    docstring = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, OWNERS) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstring.update(range(first.lineno, first.end_lineno + 1))
    code = sum(1 for number, line in enumerate(source.splitlines(), 1)
               if number not in docstring and line.strip()
               and not line.strip().startswith("#"))
    return len(docstring), code


def main(argv):
    folder = Path(next((a for a in argv if not a.startswith("--")), "fast_dqn"))
    rows = [(*count(path), str(path)) for path in sorted(folder.rglob("*.py"))]
    if "--per-file" in argv:
        for docstring, code, path in sorted(rows, key=lambda row: -row[0]):
            print(f"{docstring:5} {code:5} {docstring / max(code, 1):5.2f} {path}")
    docstring, code = sum(row[0] for row in rows), sum(row[1] for row in rows)
    ratio = docstring / max(code, 1)
    print(f"docstring lines {docstring:,}, code lines {code:,}, ratio {ratio:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
