"""What a suite is: its settings, recorded in DIR/suite.json, and its runs, DIR/GAME/seed-S,
each an ordinary run directory made and resumed by the training command itself.

Everything here reads files and builds command lines; nothing trains. The checks run before
any run starts, so that a bad flag or a foreign directory is refused in one line with nothing
written.
"""

import dataclasses
import json
import os
import shlex
import sys

from fast_dqn.errors import ConfigError
from fast_dqn.run.logs.progress import counted

SUITE_FILE = "suite.json"
FORMAT = 1
LOOPS = ("fast", "nature")
# Given by the suite itself: in the run flags they would fight it.
SUITE_OWNS = {"game": "--games", "env": "--games", "seed": "--seeds",
              "timesteps": "--timesteps", "logdir": "--logdir", "resume": "--logdir",
              "preset": "--preset"}


@dataclasses.dataclass(frozen=True)
class Suite:
    """The settings every run of the suite shares; `identity` must match DIR's suite.json."""
    logdir: str
    games: tuple
    seeds: tuple
    timesteps: int
    loop: str = "fast"
    preset: str = None
    run_flags: tuple = ()

    @property
    def identity(self):
        return {"loop": self.loop, "preset": self.preset, "run_flags": list(self.run_flags)}

    def runs(self):
        """[Run] of every game × seed, game by game."""
        return [Run(game, seed, os.path.join(self.logdir, game, f"seed-{seed}"))
                for game in self.games for seed in self.seeds]


@dataclasses.dataclass(frozen=True)
class Run:
    game: str
    seed: int
    run_dir: str

    @property
    def name(self):
        return f"{self.game}/seed-{self.seed}"

    @property
    def log(self):
        """The run's console output, beside its directory: a run directory must start empty."""
        return f"{self.run_dir}.log"


# --- a run's state, from its files

def log_tail(path, size=16384):
    """The lines a run printed last, the progress bar's carriage returns read as line ends.

    Only the log's last `size` bytes are read; a missing log gives None.
    """
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    return text.replace("\r", "\n").splitlines()


NEW, UNFINISHED, FINISHED, DAMAGED = "new", "unfinished", "finished", "damaged"


def run_state(run, timesteps):
    """Where a run stands, from its files, in a suite of `timesteps` agent steps.

    Returns:
        NEW (nothing to resume: no directory, or one left while it was being made),
        DAMAGED (its config.json is no run's: neither resumed nor scored, see config_damage),
        FINISHED (its newest checkpoint ended it at or past `timesteps`), else UNFINISHED.
    """
    from fast_dqn.run.storage.run_directory import CONFIG_FILE, is_unborn_run
    if not os.path.isdir(run.run_dir) or is_unborn_run(run.run_dir):
        return NEW
    if not os.path.isfile(os.path.join(run.run_dir, CONFIG_FILE)):
        return UNFINISHED  # the training command says what is wrong with it
    if config_damage(run.run_dir):
        return DAMAGED
    step = last_checkpoint_step(run.run_dir)
    if step is not None and step >= timesteps and _newest_is_finished(run.run_dir):
        return FINISHED
    return UNFINISHED


def config_damage(run_dir):
    """What is wrong with the run's config.json where it is no JSON object.

    Such a file (unreadable, cut short, overwritten) makes the training command refuse to
    resume the run, and `plot --aggregate` leave it out. A value in a JSON object is the
    training command's to check.

    Args:
        run_dir: the run's directory, which holds its config.json.

    Returns:
        One sentence, or None where config.json is a JSON object or is missing.
    """
    path = os.path.join(run_dir, "config.json")
    try:
        with open(path, "rb") as f:
            saved = json.loads(f.read().decode())
    except OSError as error:
        return f"cannot read {path} ({error.strerror or error})"
    except ValueError as error:  # not UTF-8, or not JSON
        return f"{path} is damaged (not JSON: {error})"
    return None if isinstance(saved, dict) else f"{path} is damaged (not a JSON object)"


def damaged_note(run, suite):
    """The line that names a DAMAGED run, and how to have it again."""
    return (f"{run.name} is left out, neither trained nor scored: "
            f"{config_damage(run.run_dir)}; put back its config.json, or move {run.run_dir} "
            f"out of {suite.logdir} to train it again from the start")


def last_checkpoint_step(run_dir):
    """The agent step of the run's newest checkpoint, or None where it has none."""
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    steps = CheckpointStore(run_dir, warn=lambda message: None).steps()
    return steps[-1] if steps else None


def _newest_is_finished(run_dir):
    from fast_dqn.run.storage.checkpoint import CheckpointStore
    return CheckpointStore(run_dir, warn=lambda message: None).newest_is_finished()


def group_command(suite, runs, threads=None):
    """The argv that trains `runs` as one run group (`fast-dqn group`), each as `command`."""
    flags = [shlex.join(command(suite, run, threads)[4:]) for run in runs]
    return [sys.executable, "-m", "fast_dqn", "group"] + [f"--run={f}" for f in flags]


def group_log(runs):
    """Where a group's own lines go: RUN_DIR.group.log, beside the group's first run."""
    return f"{runs[0].run_dir}.group.log"


def resume_step(run, timesteps):
    """The agent step a run goes on from: its newest checkpoint's, 0 for a new run."""
    if run_state(run, timesteps) == NEW:
        return 0
    return last_checkpoint_step(run.run_dir) or 0


def form_groups(runs, size, timesteps):
    """The runs in groups of at most `size`, each of runs that go on from one agent step.

    Runs keep their order within a step; steps go from the lowest.
    """
    by_step = {}
    for run in runs:
        by_step.setdefault(resume_step(run, timesteps), []).append(run)
    return [same[i:i + size] for step in sorted(by_step)
            for same in [by_step[step]] for i in range(0, len(same), size)]


def command(suite, run, threads=None):
    """The argv of the training command that starts `run`, or continues it from its checkpoint.

    `threads` is the --threads (and --env-threads) to give where the run flags give none.
    """
    base = [sys.executable, "-m", "fast_dqn", suite.loop]
    given = _flag_names(suite.run_flags)
    extra = []
    if threads and "--threads" not in given:
        extra.append(f"--threads={threads}")
    if threads and suite.loop == "fast" and "--env-threads" not in given:
        extra.append(f"--env-threads={threads}")
    if run_state(run, suite.timesteps) == NEW:
        preset = [f"--preset={suite.preset}"] if suite.preset else []
        return base + [f"--game={run.game}", f"--seed={run.seed}",
                       f"--timesteps={suite.timesteps}", f"--logdir={run.run_dir}"] + preset \
            + list(suite.run_flags) + extra
    return base + [f"--resume={run.run_dir}", f"--timesteps={suite.timesteps}"] + extra


def _options(flags):
    """The flags' names, up to a bare `--` (after it argparse reads values only)."""
    names = []
    for flag in flags:
        if flag == "--":
            break
        if flag.startswith("-"):
            names.append(flag.split("=", 1)[0])
    return names


def _flag_names(flags):
    return {flag.split("=", 1)[0] for flag in flags if flag.startswith("--")}


# --- checks before anything starts

def check_run_flags(suite):
    """Check the flags after `--` as the training command would take them in the suite's runs.

    They are checked with the game, seed and budget of the suite's first run, whose resolved
    config is returned (its replay size, for the RAM check).

    Raises:
        ConfigError: ("run_flags", or "timesteps" for the suite's own budget) in one line.
    """
    from fast_dqn.run.run_kinds import FAST, NATURE
    from fast_dqn.run.settings.flags import build_parser, explicit_values
    from fast_dqn.run.settings.precedence import build_config
    from fast_dqn.run.settings.validation import resolve
    kind = {"fast": FAST, "nature": NATURE}[suite.loop]
    parser = build_parser(f"fast-dqn {suite.loop}", kind.description, kind.config_class,
                          help_flags=False)

    def refuse(message):
        raise ConfigError("run_flags", f"{message}; they go to `fast-dqn {suite.loop}` "
                          "(its --help lists them)")
    parser.error = refuse
    for flag in _options(suite.run_flags):
        if flag in ("-h", "--help", "--version"):
            # argparse would print them under the parser's name and exit 0, running nothing.
            asked = "--version" if flag == "--version" else "--help"
            raise ConfigError("run_flags", f"{flag} is not a run flag; run `fast-dqn "
                              f"{suite.loop} {asked}` on its own")
    args = parser.parse_args(list(suite.run_flags))
    typed = vars(args)
    for name, flag in SUITE_OWNS.items():
        if name in typed:
            raise ConfigError("run_flags", f"--{name.replace('_', '-')} is the suite's to "
                              f"give: use {flag}")
    if typed.get("list_games"):
        raise ConfigError("run_flags", "--list-games lists games: run it on its own")
    explicit = dict(explicit_values(args, kind.config_class), game=suite.games[0],
                    seed=suite.seeds[0], timesteps=suite.timesteps)
    if suite.preset:
        explicit["preset"] = suite.preset
    from fast_dqn.run.cli import check_trains
    try:
        config = resolve(build_config(explicit, kind.config_class))
        check_trains(config)
    except ConfigError as error:
        if error.setting == "timesteps":  # the suite's own flag
            raise ConfigError("timesteps", error.message) from None
        raise ConfigError("run_flags", error.worded(_flag)) from None
    return config


def _flag(setting):
    from fast_dqn.run.settings.flags import flag_name
    return flag_name(setting)


def check_logdir(suite):
    """Check that the suite's DIR is new, empty, or this suite's, each run of its game and seed.

    Raises:
        ConfigError: ("logdir") in one line that says what to do.
    """
    from fast_dqn.run.storage.run_directory import CONFIG_FILE
    path = suite.logdir
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError("logdir", f"{path} is a file, not a directory; give a new or "
                          "empty directory")
    if not os.path.isdir(path) or not set(os.listdir(path)) - {"suite.lock"}:
        return
    if os.path.isfile(os.path.join(path, CONFIG_FILE)):
        raise ConfigError("logdir", f"{path} is a run directory, not a suite's; give a new or "
                          "empty directory")
    runs = suite_runs_in(path)
    recorded = read_suite_file(path, runs)
    if recorded is None:
        if runs:
            # A suite whose suite.json was lost: "give a new directory" would retrain them.
            raise ConfigError("logdir", f"{path} holds the runs of a suite ({_shown(runs)}) "
                              f"but no {SUITE_FILE}, which records its loop, preset and run "
                              f"flags; {_KEEP_RUNS}")
        raise ConfigError("logdir", f"{path} holds files but no {SUITE_FILE}: it is not a "
                          "suite's; give a new or empty directory")
    theirs = {key: recorded.get(key) for key in suite.identity}
    if theirs != suite.identity:
        raise ConfigError("logdir", f"{path} holds another suite ({describe(theirs)}), not "
                          f"({describe(suite.identity)}); give another directory, or the same "
                          "settings to continue it")
    for run in suite.runs():
        _check_run_belongs(run, suite)


# How to keep the runs of a suite whose suite.json is lost or damaged: a new directory would
# train them all again.
_KEEP_RUNS = (f"nothing was changed: put back a copy of {SUITE_FILE} to continue them, or "
              "resume each with `fast-dqn fast --resume RUN_DIR` (or nature)")


def _shown(runs):
    return ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")


def suite_runs_in(path):
    """The GAME/seed-S run directories (with a config.json) in `path`, sorted."""
    from fast_dqn.run.storage.run_directory import CONFIG_FILE
    found = []
    for game in sorted(os.listdir(path)):
        folder = os.path.join(path, game)
        if not os.path.isdir(folder):
            continue
        found += [f"{game}/{name}" for name in sorted(os.listdir(folder))
                  if name.startswith("seed-")
                  and os.path.isfile(os.path.join(folder, name, CONFIG_FILE))]
    return found


def describe(identity):
    words = [f"--loop {identity['loop']}"]
    if identity.get("preset"):
        words.append(f"--preset {identity['preset']}")
    if identity.get("run_flags"):
        words.append("-- " + " ".join(identity["run_flags"]))
    return " ".join(words)


def _check_run_belongs(run, suite):
    """Refuse a run directory of another game, seed or loop, moved or copied in: the suite would
    resume it as this one."""
    path = os.path.join(run.run_dir, "config.json")
    if not os.path.isfile(path):
        return
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return  # the training command names what is wrong with it
    if not isinstance(saved, dict):
        return
    expected = {"game": run.game, "seed": run.seed, "loop": "fast" if suite.loop == "fast"
                else "dqn"}
    found = {key: saved.get(key) for key in expected}
    if found == expected:
        return
    theirs, ours = _run_words(found, saved, expected), _run_words(expected, {}, found)
    place = (os.path.join(suite.logdir, found["game"], f"seed-{found['seed']}")
             if found["loop"] == expected["loop"] and found["game"] in suite.games
             and type(found["seed"]) is int and found["seed"] in suite.seeds else None)
    fix = (f"move it to {place}, its place in this suite (moving aside what is there first), "
           f"or out of {suite.logdir}" if place else f"move it out of {suite.logdir}")
    raise ConfigError("logdir", f"{run.run_dir} holds a run of {theirs}, where the suite "
                      f"expects its run of {ours}: it was moved or copied there; {fix}")


def _run_words(values, saved, other):
    """A run's game and seed as the flags that gave them, and its loop where it differs."""
    words = dict(values)
    if words["game"] is None and saved.get("env"):
        words = {"env": saved["env"], **words}  # an --env run has no game
        del words["game"]
    if values["loop"] == other["loop"]:
        del words["loop"]
    else:  # the suite's --loop nature runs the loop config.json calls dqn
        words["loop"] = {"dqn": "nature"}.get(values["loop"], values["loop"])
    return " ".join(f"--{key} {value}" if value is not None else f"no --{key}"
                    for key, value in words.items())


def read_suite_file(path, runs=()):
    """The settings the suite.json in `path`, a suite's DIR, records; None where there is none.

    `runs` are the run directories in DIR (suite_runs_in), which a refusal says how to keep.

    Raises:
        ConfigError: ("logdir") in one line: suite.json is damaged, edited or of another format.
    """
    file = os.path.join(path, SUITE_FILE)
    if not os.path.isfile(file):
        return None
    keep = (f", and it records the loop, preset and run flags of the runs beside it "
            f"({_shown(runs)}); {_KEEP_RUNS}" if runs else
            "; put back a copy of it, or give another directory")
    try:
        with open(file, "rb") as f:
            recorded = json.loads(f.read().decode())
    except OSError as error:
        raise ConfigError("logdir", f"cannot read {file} ({error.strerror or error}){keep}") \
            from None
    except ValueError as error:  # not UTF-8, or not JSON
        raise ConfigError("logdir", f"{file} is damaged (not JSON: {error}){keep}") from None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("format"), int):
        raise ConfigError("logdir", f"{file} is damaged (not a suite's record of its "
                          f"settings){keep}")
    if recorded["format"] != FORMAT:
        raise ConfigError("logdir", f"{file} is in format {recorded['format']}, which this "
                          f"fast-dqn (format {FORMAT}) does not read: continue the suite with "
                          "the fast-dqn that wrote it")
    _check_recorded_settings(file, recorded)
    return recorded


# What suite.json's settings may hold: (fits, what the refusal says it should be).
_RECORDED_KINDS = {
    "loop": (lambda v: v in LOOPS, f"one of {', '.join(LOOPS)}"),
    "preset": (lambda v: v is None or isinstance(v, str), "a preset's name or null"),
    "run_flags": (lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v),
                  "a list of flags"),
}


def _check_recorded_settings(file, recorded):
    """Checked on reading, so that an edit is named as one, not described as --loop None."""
    for key, (fits, expected) in _RECORDED_KINDS.items():
        if not fits(recorded.get(key)):
            raise ConfigError("logdir", f"{file} has \"{key}\": "
                              f"{json.dumps(recorded.get(key))}, which is not {expected}: it "
                              "was edited; put back the value the suite was started with")


def write_suite_file(suite):
    """suite.json, written whole or not at all: the suite's settings and its latest plan."""
    from fast_dqn.code_version import code_record
    os.makedirs(suite.logdir, exist_ok=True)
    record = {"format": FORMAT, **suite.identity, "games": list(suite.games),
              "seeds": list(suite.seeds), "timesteps": suite.timesteps, "code": code_record()}
    path = os.path.join(suite.logdir, SUITE_FILE)
    temporary = f"{path}.writing"
    with open(temporary, "w") as f:
        json.dump(record, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def check_parallel(parallel, runs, cores, replay_bytes, available_bytes, runs_per_process=1):
    """Check that K processes at a time each have a core, and their replays the RAM.

    Args:
        parallel: the processes at a time (K), --parallel.
        runs: the runs still to play.
        cores: the machine's CPU cores.
        replay_bytes: one run's replay, in bytes.
        available_bytes: the RAM available, in bytes.
        runs_per_process: the runs of a process (G, --runs-per-process).

    Raises:
        ConfigError: ("parallel", or "runs_per_process" for a group's replays), saying what to give.
    """
    if runs_per_process > 1:
        group = min(runs_per_process, runs)
        if group * replay_bytes > 0.9 * available_bytes:
            fits = max(1, int(0.9 * available_bytes // max(replay_bytes, 1)))
            raise ConfigError("runs_per_process", f"a group of {group} runs needs "
                              f"{group * replay_bytes / 2**30:.1f} GiB for its replays, and "
                              f"{available_bytes / 2**30:.1f} GiB of RAM is available; give "
                              f"--runs-per-process {fits} or fewer, or a smaller "
                              "--replay-capacity")
        replay_bytes *= group
        runs = -(-runs // runs_per_process)
    if parallel < 1:
        raise ConfigError("parallel", f"must be 1 or more, not {parallel}")
    if parallel > cores:
        raise ConfigError("parallel", f"{parallel} runs at a time need a core each, and this "
                          f"machine has {cores}; give --parallel {cores} or fewer")
    together = min(parallel, runs)
    if together * replay_bytes > 0.9 * available_bytes:
        fits = max(1, int(0.9 * available_bytes // max(replay_bytes, 1)))
        need = f"{together * replay_bytes / 2**30:.1f} GiB"
        ram = f"{available_bytes / 2**30:.1f} GiB of RAM is available"
        if together == 1:  # --parallel cannot help
            raise ConfigError("parallel", f"1 run at a time needs {need} for its replay, and "
                              f"{ram}; give a smaller --replay-capacity")
        raise ConfigError("parallel", f"{counted(together, 'run')} at a time need {need} for "
                          f"their replays, and {ram}; give --parallel {fits} or fewer, or a "
                          "smaller --replay-capacity")
