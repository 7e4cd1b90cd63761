"""The command line's flags: one per Config field, generated with its default, unit and help
topic, parsed so that only what the user typed comes back (so a preset can sit between the
defaults and the command line, and --resume can spot conflicts)."""

import argparse
import dataclasses
import fractions
import math
import sys

from fast_dqn.run.settings import hyperparameters as hp

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line that names the flag, with no usage block."""

    def error(self, message):
        """Print `message` as one line on stderr and exit with status 2.

        Args:
            message: argparse's words for what is wrong, naming the flag.
        """
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class _PrintVersion(argparse.Action):
    """--version: print the version and a checkout's commit; only it, not --help, runs git."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest=dest, nargs=0,
                         help="print the fast-dqn version (and git commit) and exit", **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from fast_dqn.code_version import version_line
        try:
            line = version_line(parser.prog)  # asks git, which may take seconds
        except KeyboardInterrupt:
            parser.exit(130, f"{parser.prog}: interrupted; nothing was made\n")
        print(line)  # on stdout, as argparse's own version action
        parser.exit(0)


def add_version_flag(parser):
    """Add --version, which prints the version (and git commit) and exits.

    Args:
        parser: an argparse parser or argument group, which gains the flag.
    """
    parser.add_argument("--version", action=_PrintVersion)


# As the docs write step counts: 100k, 1M, 1.5M (M is million, never milli).
_MULTIPLIERS = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}
_LONGEST_COUNT = 40  # characters: 1_000_000_000_000 is 17


def parse_count(text):
    """An integer, also written 50_000_000, 5e7, 50M or 100k: argparse's type for counts.

    Args:
        text: the count as typed.

    Returns:
        The count, an int.
    """
    if len(text) > _LONGEST_COUNT:
        # Parsing is not linear in the text: a thousand digits or an exponent of a hundred
        # million would take minutes. No count anyone means is this long.
        raise argparse.ArgumentTypeError(f"'{text[:20]}...' ({len(text)} characters) is too "
                                         "long for a count")
    multiplier = _MULTIPLIERS.get(text[-1:], 1)
    number = text[:-1] if multiplier > 1 else text
    exponent = number.lower().partition("e")[2]
    if exponent.lstrip("+-").isdigit() and abs(int(exponent)) > 30:
        # 1e400 is no count anyone means, nor 1e-400; 1e±100000000 would take minutes to
        # expand.
        raise argparse.ArgumentTypeError(f"'{text}' is too large or too small for a count")
    try:
        # Fraction, not float: 2.5k and 1e6 are exact, and a count above 2**53 stays whole.
        value = fractions.Fraction(number.replace("_", "")) * multiplier
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a whole number (like 50000, 5e4 or 50k), "
                                         f"got '{text}'")
    if value.denominator != 1:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text}'")
    return int(value)


def parse_real(text):
    """A finite float: argparse's type for real-valued settings.

    Args:
        text: the number as typed.

    Returns:
        The number, a float.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got '{text}'")
    return value


class BoolFlag(argparse.Action):
    """--flag, --no-flag, and the original fast-dqn's --flag=False / --flag=0 forms."""

    def __init__(self, option_strings, dest, default=None, help=None, **kwargs):
        negatives = [f"--no-{s[2:]}" for s in option_strings if s.startswith("--")]
        super().__init__(option_strings + negatives, dest, nargs="?", default=default,
                         help=help, metavar="BOOL")

    def __call__(self, parser, namespace, value, option_string=None):
        if option_string.startswith("--no-"):
            if value is not None:
                parser.error(f"argument {option_string}: takes no value")
            setattr(namespace, self.dest, False)
            return
        if value is None:
            setattr(namespace, self.dest, True)
        elif value.lower() in TRUE_WORDS:
            setattr(namespace, self.dest, True)
        elif value.lower() in FALSE_WORDS:
            setattr(namespace, self.dest, False)
        else:
            parser.error(f"argument {option_string}: expected true/false or 1/0, got '{value}'")


def flag_name(setting):
    """The flag of a Config field; a tool's own argument names ("-o", "RUN_DIR") stay.

    Args:
        setting: a Config field's name, or a tool's argument name.

    Returns:
        The flag as the command line writes it: "--replay-capacity" for replay_capacity.
    """
    if setting.startswith("-") or setting.isupper():
        return setting
    return "--" + setting.replace("_", "-")


def help_topics(config_class=hp.FastConfig):
    """{topic: its fields' names}, in --help's and the declaration's order."""
    topics = {title: [] for title in hp.TOPICS}
    for f in dataclasses.fields(config_class):
        topics[f.metadata["topic"]].append(f.name)
    return {title: tuple(names) for title, names in topics.items() if names}


HELP_TOPICS = help_topics()


def add_config_flags(parser, config_class=hp.Config):
    """Add one flag per Config field, grouped by topic, its help ending in the default and unit.

    Returns {setting: the argument group its flag is in}.
    """
    defaults = config_class()
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    groups = {}
    for topic, names in help_topics(config_class).items():
        group = parser.add_argument_group(topic)
        groups.update((name, group) for name in names)
    for f in fields.values():
        _add_flag(groups[f.name], f, getattr(defaults, f.name))
    return groups


def _add_flag(parser, f, default):
    meta = f.metadata
    unit = f" {meta['unit']}" if meta.get("unit") else ""
    shown = f"{default:_}" if f.type is int else default
    text = f"{meta['help']} (default: {shown}{unit})"
    kwargs = dict(meta.get("argparse", {}))
    if f.type is bool:
        parser.add_argument(flag_name(f.name), action=BoolFlag, help=text)
        return
    convert = {int: parse_count, float: parse_real}.get(f.type, str)
    parser.add_argument(flag_name(f.name), type=convert, help=text, **kwargs)


BACKEND_HELP = ("Counts may be written 50_000_000, 5e7, 50M or 100k. "
                "The networks run on Keras 3's backend: TensorFlow, the default, which "
                "every install brings; KERAS_BACKEND=jax runs them on JAX, which "
                "pip install -e \".[jax]\" adds (on a GPU: docs/gpu.md). A run resumes "
                "on either. See 'The Keras backend' in docs/options.md.")


def build_parser(prog, description, config_class=hp.Config, help_flags=True):
    """The parser of a training command, whose parse_args returns only what the user typed.

    Args:
        prog: the program's name, as errors and --help show it.
        description: what --help says first.
        config_class: the Config class whose fields become flags.
        help_flags: add --help and --version; False for the suite's checks, which must not exit.

    Returns:
        A OneLineParser with every Config flag, --resume and --list-games.
    """
    parser = OneLineParser(prog=prog, description=description, usage="%(prog)s [options]",
                           argument_default=argparse.SUPPRESS, epilog=BACKEND_HELP,
                           add_help=help_flags)
    run = add_config_flags(parser, config_class)["logdir"]
    run.add_argument("--resume", metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its latest complete checkpoint, "
                     "with its saved config; only " + ", ".join(
                         flag_name(n) for n in hp.RESUME_OVERRIDES
                         if n in {f.name for f in dataclasses.fields(config_class)})
                     + " may change")
    run.add_argument("--list-games", action="store_true",
                     help="print the Atari games of the installed ROMs and exit")
    if help_flags:
        add_version_flag(run)
    return parser


def explicit_values(args, config_class=hp.Config):
    """The settings the user typed, from build_parser's parsed arguments.

    Args:
        args: the namespace build_parser's parse_args returned (typed flags only).
        config_class: the Config class whose fields count as settings.

    Returns:
        {setting: value} for each field of `config_class` given on the command line.
    """
    names = {f.name for f in dataclasses.fields(config_class)}
    return {k: v for k, v in vars(args).items() if k in names}


def fail(prog, error):
    """Print a ConfigError as one line in the command line's words (its flags).

    Args:
        prog: the program's name, which starts the line.
        error: the ConfigError, its setting worded as its flag.

    Returns:
        2, the exit status of bad input.
    """
    print(f"{prog}: error: {error.worded(flag_name)}", file=sys.stderr)
    return 2
