"""Every command the README and docs show still parses: its script, tool or benchmark exists,
and so do its flags and presets, with values of the right form. A user copies these lines;
a flag renamed since they were written must fail here, not in their terminal.

Commands are read from the fenced code blocks of README.md and docs/*.md (docs/data's run
notes too): continuation lines joined, comments dropped, transcripts (`$ ...`, which show a
refusal on purpose) and non-Python commands (pip, ray, git) left out. Parsing stops at
argparse: nothing is trained, downloaded or written. The scripts' end-to-end tests run them.
"""

import argparse
import glob
import importlib
import os
import re
import shlex

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted([os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "*.md"))
               + glob.glob(os.path.join(ROOT, "docs", "data", "*", "README.md")))
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
# Commands of other programs, shown for setting up: nothing of ours to parse.
_OTHERS = ("pip", "ray", "git", "export", "cd", "ruff", "nvidia-smi", "bash", "tensorboard",
           "ls", "cat", "mkdir")


def shown_commands():
    """[(page:line, argv)] of the Python commands in the pages' fenced blocks."""
    found = []
    for page in PAGES:
        text = open(page, encoding="utf-8").read()
        for block in _FENCE.finditer(text):
            first = text.count("\n", 0, block.start(1)) + 1
            lines = block.group(1).split("\n")
            joined, start = "", None
            for number, line in enumerate(lines, start=first):
                if start is None:
                    start = number
                if line.rstrip().endswith("\\"):
                    joined += line.rstrip()[:-1] + " "
                    continue
                joined += line
                command, start_line, joined, start = joined.strip(), start, "", None
                where = f"{os.path.relpath(page, ROOT)}:{start_line}"
                argv = _python_argv(command)
                if argv is not None:
                    found.append((where, argv))
    return found


def _python_argv(command):
    """The words after `python` (or `fast-dqn`), or None for what is not such a command."""
    if not command or command.startswith(("$", "#", ">", "|")):
        return None
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None  # not shell: a diagram or a table
    while words and _ENV_ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or words[0] in _OTHERS:
        return None
    if words[0] == "fast-dqn":
        return ["-m", "fast_dqn"] + words[1:]
    if words[0] in ("python", "python3"):
        return words[1:]
    return None


class Parsed(Exception):
    def __init__(self, namespace):
        super().__init__("parsed")
        self.namespace = namespace


@pytest.fixture
def parse_only(monkeypatch):
    """argparse parses as usual, then stops the program there."""
    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        raise Parsed(original(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)


def _check_run_flags(kind, argv):
    """A training command: its flags parse, and its preset applies."""
    from fast_dqn.run.settings.flags import build_parser, explicit_values
    from fast_dqn.run.settings.precedence import build_config
    try:
        args = build_parser(kind.script, "", kind.config_class).parse_args(argv)
    except Parsed as parsed:  # under parse_only
        args = parsed.namespace
    if getattr(args, "resume", None) or getattr(args, "list_games", False):
        return
    build_config(explicit_values(args, kind.config_class), kind.config_class)


def check_command(argv, monkeypatch):
    from fast_dqn.run.run_kinds import FAST, NATURE
    scripts = {"run_dqn.py": NATURE, "run_fast_dqn.py": FAST}
    if argv[0] in scripts:
        return _check_run_flags(scripts[argv[0]], argv[1:])
    assert argv[0] == "-m", f"not a script or module of ours: {argv[0]}"
    module, rest = argv[1], argv[2:]
    if module in ("pytest", "venv"):  # others' modules: `python3 -m venv .venv`
        return
    if module == "fast_dqn":  # fast-dqn COMMAND, or python -m fast_dqn COMMAND
        if rest and rest[0] in ("fast", "nature"):
            return _check_run_flags({"fast": FAST, "nature": NATURE}[rest[0]], rest[1:])
        if rest and rest[0] == "suite" and "--" in rest:
            # Its flags after -- go to every run, of --loop (fast by default).
            split = rest.index("--")
            loop = rest[rest.index("--loop") + 1] if "--loop" in rest[:split] else "fast"
            _check_run_flags(FAST if loop == "fast" else NATURE, rest[split + 1:])
        if rest and rest[0] == "group":  # each --run is one run's flags, as fast takes them
            for flag in rest[1:]:
                assert flag.startswith("--run="), f"not a --run: {flag}"
                _check_run_flags(FAST, shlex.split(flag.removeprefix("--run=")))
        from fast_dqn.commands import main as command
        if not rest or rest[0] in ("--version", "-h", "--help"):
            assert command(rest[:1]) in (0, 2)
            return
        with pytest.raises(Parsed):
            assert command(rest) != 2, f"unknown command {rest[0]}"
        return
    if module == "benchmarks.learning" and "--" in rest:
        # Its flags after -- go to the run script of --loop (fast by default).
        split = rest.index("--")
        loop = rest[rest.index("--loop") + 1] if "--loop" in rest[:split] else "fast"
        _check_run_flags(FAST if loop == "fast" else NATURE, rest[split + 1:])
    main = importlib.import_module(module).main
    monkeypatch.setattr("sys.argv", [module] + rest)
    with pytest.raises(Parsed):
        main(rest) if main.__code__.co_argcount else main()


COMMANDS = shown_commands()


def test_the_pages_show_commands():
    """The reader below finds the README's quickstart, so an empty list is not a pass."""
    shown = [" ".join(argv) for where, argv in COMMANDS if where.startswith("README.md")]
    assert {"run_dqn.py --env=CartPole-v1", "run_fast_dqn.py --preset pong-fastest",
            "run_fast_dqn.py --game pong --save-replay"} <= set(shown)
    assert len(COMMANDS) > 30


@pytest.mark.parametrize("where, argv", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_a_command_the_docs_show_parses(where, argv, parse_only, monkeypatch, capsys):
    try:
        check_command(argv, monkeypatch)
    except SystemExit as stop:  # argparse refused it
        raise AssertionError(f"{where}: `python {' '.join(argv)}` is refused: "
                             f"{capsys.readouterr().err.strip()}") from stop


def test_a_renamed_flag_is_caught(parse_only, monkeypatch):
    """The check fails on what it exists for: a flag that is not there any more."""
    for argv in (["run_fast_dqn.py", "--game=pong", "--wrokers=8"],
                 ["run_dqn.py", "--preset", "pong-fast"],
                 ["-m", "fast_dqn.tools.plot", "runs/x", "--aggregated"],
                 ["-m", "fast_dqn", "evaluate", "runs/x", "--exprot=a.keras"],
                 ["-m", "fast_dqn", "fast", "--game=pong", "--wrokers=8"],
                 ["-m", "benchmarks.speedtest", "--variants", "a"],
                 ["-m", "benchmarks.learning", "--preset", "pong-quick", "--", "--n-steps=3"]):
        with pytest.raises(SystemExit):
            check_command(argv, monkeypatch)
