"""The markers: every marker a test uses is declared in pyproject.toml (--strict-markers makes
an undeclared one an error at collection, not a silent no-op that `-m` would never select),
and every claim marker declared there selects some test."""

import glob
import os
import re

from helpers import ROOT

# The claims a test is marked with, beside the `slow` tier (docs/testing.md, "Markers").
OURS = {"slow", "faults", "learning", "backends", "ray"}


def used_markers():
    used = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True):
        used |= set(re.findall(r"pytest\.mark\.(\w+)", open(path, encoding="utf-8").read()))
    return used


def declared_markers(config):
    """pyproject.toml's markers, and pytest's own (its plugins declare them the same way)."""
    return {re.match(r"\w+", line).group() for line in config.getini("markers")}


def test_an_undeclared_marker_is_an_error(pytestconfig):
    assert pytestconfig.getoption("strict_markers")


def test_every_marker_used_is_declared_and_each_claim_marks_some_test(pytestconfig):
    assert used_markers() <= declared_markers(pytestconfig)
    assert OURS <= declared_markers(pytestconfig) and OURS <= used_markers()
