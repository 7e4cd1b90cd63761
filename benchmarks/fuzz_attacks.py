"""The crash fuzzer's attacks beyond signals at drawn moments and damaged logs: a stop the
instant a file appears, the tools run beside training, a value read back from a run file
replaced by one of another kind, and a GPU session's output folder damaged for
benchmarks.gpu_table. benchmarks/crash_fuzzer.py draws them and checks the outcome."""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What a stop can wait for, in the run directory: config.json written, episodes.csv created
# (the monitor's start), a checkpoint begun (its .partial- directory) or complete.
ON_DISK = ("config.json", "episodes.csv", ".partial-", "step-")
# The run files whose values a resume reads back: the newest checkpoint's state (edited with
# its manifest, so that it still verifies), config.json, or one of the checkpoint's arrays
# (ARRAY_EDITS).
EDITS = ("state.json", "config.json", "arrays")
TOOL_TIMEOUT = 240  # seconds a tool beside training may take: a hang guard


def appeared(logdir, what):
    """Whether `what` (one of ON_DISK) is in the run directory now."""
    if what in ("config.json", "episodes.csv"):
        return os.path.exists(os.path.join(logdir, what))
    try:
        return any(name.startswith(what) for name in os.listdir(os.path.join(logdir,
                                                                              "checkpoints")))
    except OSError:
        return False


def wait_for_file(alive, logdir, what, seconds):
    """Poll every millisecond until `what` appears, the process ends (alive() false), or
    `seconds` pass."""
    deadline = time.monotonic() + seconds
    while alive() and time.monotonic() < deadline and not appeared(logdir, what):
        time.sleep(0.001)


# --- the tools beside a training run

class ToolsBeside:
    """`evaluate`, `plot` and `evaluate --export` run on the run directory one after another,
    for as long as the training segment runs, as a user watching a long run would. Each must
    exit 0, or 2 with one line (no run or no checkpoint yet), never a traceback or a hang.
    Every other evaluate and export is stopped by Ctrl-C or SIGTERM once it has started its
    backend (its "device:" line): it must exit 130 or 143 with that stop's one line last, or
    0 with its result where the signal came after its work. None may leave a partial file (a
    video's, an export's, a plot's) beside what it writes."""

    STOPS = ((None, None), ("SIGINT", 130), (None, None), ("SIGTERM", 143))

    def __init__(self, logdir):
        self.logdir = logdir
        self.out = tempfile.mkdtemp(prefix="fuzz-tools-")
        self.done = threading.Event()
        self.problems, self.runs = [], []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _commands(self):
        n = 0
        while True:
            n += 1
            stop = self.STOPS[n % len(self.STOPS)]
            yield ["-m", "fast_dqn.tools.evaluate", self.logdir, "--episodes=1"], stop
            yield ["-m", "fast_dqn.tools.plot", self.logdir,
                   f"--output={os.path.join(self.out, 'plot.png')}"], (None, None)
            yield ["-m", "fast_dqn.tools.evaluate", self.logdir,
                   f"--export={os.path.join(self.out, f'agent-{n}.keras')}"], stop

    def _run(self):
        for command, (stop, stop_code) in self._commands():
            if self.done.is_set():
                return
            name = command[1].rsplit(".", 1)[-1] + (" --export" if "--export" in
                                                     command[-1] else "")
            code, out, err = self._tool(command, stop)
            if code is None:
                self.problems.append(f"{name} beside training hung past {TOOL_TIMEOUT} s")
                return
            sent = stop if stop and "device:" in out else None
            self.runs.append(f"{name}{'+' + sent if sent else ''}->{code}")
            self.problems += self._check(name, sent, stop_code, code, out, err)

    @staticmethod
    def _tool(command, stop):
        """(exit status or None if it hung, stdout, stderr); with `stop`, that signal is
        sent once the tool prints its backend's "device:" line."""
        child = subprocess.Popen([sys.executable, *command], cwd=ROOT, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = []
        reader = threading.Thread(target=lambda: err.append(child.stderr.read()), daemon=True)
        reader.start()
        out = []
        for line in child.stdout:
            out.append(line)
            if stop and line.startswith("device:"):
                child.send_signal(getattr(signal, stop))
                stop = None
        try:
            code = child.wait(TOOL_TIMEOUT)
        except subprocess.TimeoutExpired:
            child.kill()
            return None, "", ""
        reader.join(10)
        return code, "".join(out), "".join(err)

    def _check(self, name, sent, stop_code, code, out, err):
        lines = err.strip().splitlines()
        problems = []
        if "Traceback" in out + err:
            problems.append(f"{name} beside training printed a traceback")
        elif sent:
            # Exit 0 with its result printed: the signal came once its work was done, when a
            # tool ignores it (a loaded machine can be that slow to send it).
            finished = code == 0 and ("mean " in out or "exported " in out)
            # Its one line says what the stop left: no partial file of what it was writing,
            # or that it was writing nothing (fast_dqn.tools.tool_exits).
            ends = ("is left", "no file was being written, so nothing is lost")
            if not finished and (code != stop_code or not lines or not lines[-1].endswith(
                    ends)):
                problems.append(f"{name} stopped by {sent} exited {code}, not {stop_code} "
                                "with its one line")
        elif code not in (0, 2) or (code == 2 and len(lines) != 1):
            problems.append(f"{name} beside training exited {code}")
        partials = [n for n in os.listdir(self.out) if ".partial" in n]
        if partials:
            problems.append(f"{name} left {partials} in {self.out}")
        return [f"{problem}:\n{(out + err)[-2000:]}" for problem in problems]

    def stop(self):
        """Let the tool running finish; returns the problems found."""
        self.done.set()
        self.thread.join(2 * TOOL_TIMEOUT + 10)
        shutil.rmtree(self.out, ignore_errors=True)
        return self.problems


# --- checkpoints moved away or renamed

# How a user hides a run's checkpoints (to free a disk, or by a rename): the resume must
# refuse in one line, naming checkpoints, and change nothing, where it once discarded the
# logs and started the run again from step 0.
HIDES = ("moved", "renamed")


def hide_checkpoints(logdir, how):
    """Move checkpoints/ out of the run, or rename its step-* folders; returns (note, undo)."""
    folder = os.path.join(logdir, "checkpoints")
    if how == "moved":
        # Beside the run, on its file system: a rename to another one fails.
        aside = tempfile.mkdtemp(prefix="fuzz-moved-", dir=os.path.dirname(
            os.path.abspath(logdir)))
        os.rename(folder, os.path.join(aside, "checkpoints"))

        def undo():
            os.rename(os.path.join(aside, "checkpoints"), folder)
            os.rmdir(aside)
        return "checkpoints/ moved away", undo
    names = [name for name in os.listdir(folder) if name.startswith("step-")]
    for name in names:
        os.rename(os.path.join(folder, name), os.path.join(folder, f"old-{name}"))

    def undo():
        for name in names:
            os.rename(os.path.join(folder, f"old-{name}"), os.path.join(folder, name))
    return f"{len(names)} step-* renamed", undo


# --- a value read back from a run file

def snapshot(logdir):
    """{path: bytes} of every file of the run but its lock."""
    files = {}
    for folder, _, names in os.walk(logdir):
        for name in names:
            path = os.path.join(folder, name)
            if name != "run.lock":
                with open(path, "rb") as f:
                    files[os.path.relpath(path, logdir)] = f.read()
    return files


def _other_kind(value, rng):
    """A JSON value of another kind than `value` (never null, which several values may be)."""
    kinds = {str: "x", bool: True, int: -3, float: 2.5, list: [], dict: {}}
    numbers = (int, float)
    return rng.choice([other for kind, other in kinds.items()
                       if not (type(value) is kind or (type(value) in numbers
                                                       and kind in numbers))])


def leaves(value, path=()):
    """The paths of every leaf of a JSON document: a value that is not a non-empty container."""
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in leaves(item, path + (key,))]
    if isinstance(value, list) and value:
        return [leaf for i, item in enumerate(value) for leaf in leaves(item, path + (i,))]
    return [path]


def replace_value(document, path, rng):
    holder = document
    for key in path[:-1]:
        holder = holder[key]
    old = holder[path[-1]]
    holder[path[-1]] = new = _other_kind(old, rng)
    return old, new


def edit_value(logdir, what, rng, newest):
    """Replace one drawn value of `what` (one of EDITS) by one of another kind, the manifest
    kept in step for a checkpoint's state. Returns (note, {path: original bytes}) or (note,
    None) when there is nothing to edit."""
    if what == "config.json":
        path = os.path.join(logdir, "config.json")
        with open(path, "rb") as f:
            original = f.read()
        document = json.loads(original)
        # Not a null: such a setting (--ray-address without Ray, --preset) may take any
        # string, which is then a value, not an edit to refuse.
        key = rng.choice(sorted(k for k in document if k != "loop" and document[k] is not None))
        old, new = replace_value(document, (key,), rng)
        with open(path, "w") as f:
            json.dump(document, f)
        return f"config:{key}={json.dumps(new)}", {path: original}
    if newest is None:
        return "state:(no checkpoint)", None
    if what == "arrays":
        return edit_arrays(logdir, rng, newest)
    state_path = os.path.join(newest.path, "state.json")
    manifest_path = os.path.join(newest.path, "manifest.json")
    originals = {}
    for path in (state_path, manifest_path):
        with open(path, "rb") as f:
            originals[path] = f.read()
    document = json.loads(originals[state_path])
    leaf = rng.choice(leaves(document))
    old, new = replace_value(document, leaf, rng)
    data = json.dumps(document).encode()
    manifest = json.loads(originals[manifest_path])
    manifest["files"]["state.json"] = {"size": len(data), "crc32": zlib.crc32(data)}
    with open(state_path, "wb") as f:
        f.write(data)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    return f"state:/{'/'.join(map(str, leaf))}={json.dumps(new)}", originals


# One of the newest checkpoint's arrays edited as a user with numpy would, state.json and
# arrays.zst written again with the manifest so that it still verifies. No JSON leaf reaches
# these values; each was once accepted (an IndexError, a NaN exported to best/, a resume that
# trained, diverged and called the edit "the last good checkpoint").
ARRAY_EDITS = ("pointer at its shard's end", "pointer past the fill", "best not finite",
               "negative update count", "slot of another shape", "slot not finite")


def _shard_capacity(logdir, shards):
    with open(os.path.join(logdir, "config.json")) as f:
        return json.load(f)["replay_capacity"] // shards  # as ReplayMemory splits it


def _array_edit(state, how, rng, capacity):
    """Make the edit `how` (ARRAY_EDITS) to a checkpoint's state, in place; returns the path
    edited, or None where the state holds nothing it applies to."""
    import numpy as np
    replay, optimizer, best = state["replay"], state["learner"]["optimizer"], state["best"]
    shards = range(len(replay["pointers"]))
    floats = [i for i, v in enumerate(optimizer) if np.asarray(v).dtype.kind == "f"
              and np.ndim(v) > 0]
    if how == "pointer at its shard's end":
        s = rng.choice(shards)
        replay["pointers"][s], replay["sizes"][s] = capacity, capacity
        return f"/replay/pointers/{s}"
    if how == "pointer past the fill":
        unfilled = [s for s in shards if replay["sizes"][s] < capacity]
        if not unfilled:
            return None
        s = rng.choice(unfilled)
        size = int(replay["sizes"][s])
        replay["pointers"][s] = rng.choice([p for p in (size - 1, size + 1)
                                            if 0 <= p < capacity])
        return f"/replay/pointers/{s}"
    if how == "best not finite":
        if best is None:
            return None
        i = rng.randrange(len(best["weights"]))
        weight = best["weights"][i] = np.array(best["weights"][i])
        weight.flat[rng.randrange(weight.size)] = rng.choice([np.nan, np.inf, -np.inf])
        return f"/best/weights/{i}"
    if how == "negative update count":
        i = next(i for i, v in enumerate(optimizer) if np.asarray(v).dtype.kind in "iu")
        optimizer[i] = np.int64(-rng.randint(1, 10**6))
        return f"/learner/optimizer/{i}"
    i = rng.choice(floats)
    if how == "slot of another shape":
        optimizer[i] = np.zeros(np.size(optimizer[i]) + 1, np.asarray(optimizer[i]).dtype)
    else:  # "slot not finite"
        optimizer[i] = np.array(optimizer[i])
        optimizer[i].flat[rng.randrange(optimizer[i].size)] = np.nan
    return f"/learner/optimizer/{i}"


def edit_arrays(logdir, rng, newest):
    """Make one drawn edit of ARRAY_EDITS that applies to the newest checkpoint. Returns
    (note, {path: original bytes}) as edit_value does, or (note, None) where none applies."""
    from fast_dqn.run.storage.array_file import write_arrays
    from fast_dqn.run.storage.state_tree import to_data
    state = newest.load_state()
    capacity = _shard_capacity(logdir, len(state["replay"]["pointers"]))
    for how in rng.sample(ARRAY_EDITS, len(ARRAY_EDITS)):
        where = _array_edit(state, how, rng, capacity)
        if where is not None:
            break
    else:
        return "arrays:(none applies)", None
    originals = {}
    for name in ("state.json", "arrays.zst", "manifest.json"):
        with open(os.path.join(newest.path, name), "rb") as f:
            originals[os.path.join(newest.path, name)] = f.read()
    document, arrays = to_data(state)
    packed = io.BytesIO()
    write_arrays(packed, arrays, level=3)
    manifest = json.loads(originals[os.path.join(newest.path, "manifest.json")])
    for name, data in (("state.json", json.dumps(document).encode()),
                       ("arrays.zst", packed.getvalue())):
        with open(os.path.join(newest.path, name), "wb") as f:
            f.write(data)
        manifest["files"][name] = {"size": len(data), "crc32": zlib.crc32(data)}
    with open(os.path.join(newest.path, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return f"arrays:{how}:{where}", originals


def put_back(originals):
    for path, data in originals.items():
        with open(path, "wb") as f:
            f.write(data)


def refusal_problems(what, code, stderr, before, after):
    """What is wrong with how a resume met an edited run file: it must exit 2 with one line
    that names the file it found wrong, and change nothing."""
    lines = stderr.strip().splitlines()
    problems = []
    if code != 2 or len(lines) != 1 or "Traceback" in stderr:
        problems.append(f"the resume after the edit exited {code}, not 2 with one line:\n"
                        f"{stderr[-2000:]}")
    elif ("checkpoint" if what in ("state.json", "arrays") + HIDES else "config.json") \
            not in lines[0]:
        problems.append(f"the refusal does not name the edited file: {lines[0]}")
    if what == "arrays" and lines and "good" in lines[0]:
        problems.append(f"the refusal calls the edited checkpoint good: {lines[0]}")
    changed = sorted(name for name in set(before) | set(after)
                     if before.get(name) != after.get(name))
    if changed:
        problems.append(f"the refused resume changed {changed}")
    return problems


# --- suites and the checkout path (python -m benchmarks.crash_fuzzer --suites)

# How a suite's suite.json or a run's config.json is damaged: cut in half, emptied, or
# overwritten by bytes that are not text. Each leaves no JSON object to read.
JSON_DAMAGES = ("cut", "empty", "binary")
# A directory name that is not UTF-8: os.fsencode gives b"caf\xe9co".
NON_UTF8 = os.fsdecode(b"caf\xe9co")


def damage_json(path, how):
    """Damage the JSON file at `path` (JSON_DAMAGES); returns its bytes, to put back."""
    with open(path, "rb") as f:
        original = f.read()
    damaged = {"cut": original[:len(original) // 2], "empty": b"",
               "binary": b"\x00\xff\xfe not json \x80"}[how]
    with open(path, "wb") as f:
        f.write(damaged)
    return original


def copy_checkout(workdir):
    """A copy of the checkout's package and scripts under workdir/caf\\xe9co (not UTF-8);
    returns its directory. Its scripts import the copy's package (a script's directory comes
    first on sys.path)."""
    checkout = os.path.join(workdir, NON_UTF8, "checkout")
    if not os.path.isdir(checkout):
        shutil.copytree(os.path.join(ROOT, "fast_dqn"), os.path.join(checkout, "fast_dqn"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for script in ("run_dqn.py", "run_fast_dqn.py"):
            shutil.copy(os.path.join(ROOT, script), checkout)
    return checkout


def children(pid):
    """The processes whose parent is `pid` (a suite's runs), from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(name))
    return found


def suite_snapshot(logdir):
    """snapshot of a suite's directory, less its lock (rewritten by every suite that holds
    it)."""
    return {path: data for path, data in snapshot(logdir).items()
            if os.path.basename(path) != "suite.lock"}


# --- a GPU session's output folder, damaged (python -m benchmarks.crash_fuzzer --tables)

# A real session's folder, copied for each trial: never damaged in place.
SESSION = os.path.join(ROOT, "docs", "data", "gpu-h200-2620635")
# The files benchmarks.gpu_table reads there.
TABLE_FILES = ("header.txt", "learner.txt", "nature.csv", "speedtest.csv", "two-groups.csv",
               "suite.txt", "episodes.csv")
# How one is damaged: cut at a drawn byte, emptied, bytes that are not text, a folder in its
# place, deleted, a drawn figure replaced by 5,000 digits or by a word, a drawn column of its
# header rows renamed. A cut or an edit may leave a file the table reads as a shorter log.
TABLE_DAMAGES = ("cut", "empty", "binary", "folder", "delete", "digits", "word", "column")
# The damage the table must refuse whichever file it hits.
ALWAYS_REFUSED = ("binary", "folder")
_FIGURE = re.compile(rb"\d[\d,.]*")


def damage_table_file(folder, name, how, at):
    """Damage `name` in the session folder `folder` as `how` (TABLE_DAMAGES) says, `at`
    (0 to 1) choosing the byte, figure or column; returns a note of what it did."""
    path = os.path.join(folder, name)
    with open(path, "rb") as f:
        data = f.read()
    if how in ("folder", "delete"):
        os.remove(path)
        if how == "folder":
            os.mkdir(path)
        return f"{how}:{name}"
    if how in ("digits", "word"):
        figures = list(_FIGURE.finditer(data))
        if not figures:
            return f"{how}:{name}(no figure)"
        figure = figures[min(int(at * len(figures)), len(figures) - 1)]
        data = data[:figure.start()] + (b"9" * 5000 if how == "digits" else b"n/a") + \
            data[figure.end():]
    elif how == "column":
        lines = data.split(b"\n")
        # A CSV's first line, or each of benchmarks.learner's table headers.
        heads = [0] if name.endswith(".csv") else \
            [i for i, line in enumerate(lines) if line.startswith(b"| batch |")]
        for i in heads:
            sep = b"," if name.endswith(".csv") else b"|"
            end = b"\r" if lines[i].endswith(b"\r") else b""  # the line's end kept
            cells = lines[i][:len(lines[i]) - len(end)].split(sep)
            named = [j for j, cell in enumerate(cells) if cell.strip()]
            cells[named[min(int(at * len(named)), len(named) - 1)]] = b" renamed "
            lines[i] = sep.join(cells) + end
        data = b"\n".join(lines)
    else:
        data = {"cut": data[:int(at * len(data))], "empty": b"",
                "binary": b"\x00\xff\xfe not text \x80"}[how]
    with open(path, "wb") as f:
        f.write(data)
    return f"{how}:{name}@{at:g}"


def run_table(folder):
    """`python -m benchmarks.gpu_table folder`: (exit status or None if it hung, stdout,
    stderr)."""
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_table", folder], cwd=ROOT,
                              capture_output=True, text=True, errors="replace",
                              timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return done.returncode, done.stdout, done.stderr


def table_problems(name, how, code, out, err, before, after):
    """What is wrong with how benchmarks.gpu_table met the folder with `name` damaged as
    `how`: it must exit 0 with nothing on stderr, or 2 with one line naming the file (and
    for a figure file its rows reading "damaged: NAME"), never a traceback or a hang, and
    change no file."""
    lines = err.strip().splitlines()
    problems = []
    if code is None:
        problems.append(f"gpu_table hung past {TOOL_TIMEOUT} s")
    elif "Traceback" in out + err or code not in (0, 2):
        problems.append(f"gpu_table exited {code}, not 0 or 2:\n{err[-2000:]}")
    elif code == 2 and (len(lines) != 1 or not lines[0].startswith("gpu_table: ")
                        or name not in lines[0]):
        problems.append(f"gpu_table exited 2 without one line naming {name}:\n{err[-2000:]}")
    elif code == 2 and name != "header.txt" and f"damaged: {name}" not in out:
        problems.append(f"no row of the table reads 'damaged: {name}':\n{out[-2000:]}")
    elif code == 2 and name == "header.txt" and out:
        problems.append("a table printed without the header that names its device")
    elif code == 0 and (err or "damaged:" in out):
        problems.append(f"gpu_table exited 0 but said something is damaged:\n{err}{out}")
    if code == 0 and how in ALWAYS_REFUSED:
        problems.append(f"a {how} {name} was read as a file of figures")
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    if changed:
        problems.append(f"gpu_table changed {changed}")
    return problems
