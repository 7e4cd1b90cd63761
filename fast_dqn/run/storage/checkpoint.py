"""Checkpoints on disk: atomic, verified, the newest two kept.

Layout, inside the run directory:

    checkpoints/step-000000250000/
        state.json      everything but the replay frames, as data (fast_dqn.run.storage.state_tree):
                        weights, optimizer, RNGs, the games' emulator states and frame stacks,
                        log positions, the loop's own counters and held transitions
        arrays.zst      the arrays state.json refers to
        replay.zst      the replay memory's arrays (only with --save-replay)
        manifest.json   the format version, the size and CRC-32 of each file above, and
                        the fast-dqn version and commit that wrote them; written last
    checkpoints/step-000000250000.1/   a later checkpoint of the same step (a resumed run's last)

A checkpoint is written into a `.partial-*` directory, every file fsync'ed, and only then renamed
to its final name, so a crash or a full disk leaves a complete checkpoint or none (a `.partial-*`
directory is never read; the next save deletes it). Loading verifies the manifest and falls back,
with a warning, to the previous checkpoint when the newest one is damaged.

FORMAT is the version of this layout. A checkpoint of another is refused in one line, not guessed
at: format 1, earlier fast-dqn's, pickled its state by class path, and no shim here reads it.
"""

import json
import os
import re
import shutil
import sys
import time
import zlib

import zstandard

from fast_dqn.code_version import code_record
from fast_dqn.run.storage.array_file import CorruptFile, read_arrays, write_arrays
from fast_dqn.run.storage.state_tree import from_data, to_data
from fast_dqn.state_schema import StateMismatch, check_state

FORMAT = 2
STATE_FILE, ARRAYS_FILE = "state.json", "arrays.zst"
REPLAY_FILE, MANIFEST_FILE = "replay.zst", "manifest.json"
_NAME = re.compile(r"^step-(\d{12})(?:\.(\d+))?$")


class CheckpointError(Exception):
    """A checkpoint could not be written; the previous ones are untouched."""


class UnsupportedFormat(Exception):
    """A complete checkpoint of another format version than FORMAT."""


class _ChecksumWriter:
    """A binary file that keeps the CRC-32 and size of what went through it."""

    def __init__(self, file):
        self.file = file
        self.crc = 0
        self.size = 0

    def write(self, data):
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        return self.file.write(data)

    def flush(self):
        self.file.flush()


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Checkpoint:
    """One complete, verified checkpoint (checkpoints/step-*); `unfit_fix` as CheckpointStore's."""

    def __init__(self, path, step, manifest, unfit_fix=None):
        self.path = path
        self.step = step
        self.manifest = manifest
        self.unfit_fix = unfit_fix

    @property
    def has_replay(self):
        """Whether it holds the replay memory (written with --save-replay)."""
        return REPLAY_FILE in self.manifest["files"]

    @property
    def finished(self):
        """Whether the run ended here, its budget done and its last evaluation made."""
        return self.manifest.get("finished") is True

    @property
    def plan(self):
        """The run's RUN_PLAN settings when it wrote this, a dict; {} where not recorded."""
        plan = self.manifest.get("plan")
        return plan if isinstance(plan, dict) else {}

    def load_state(self, schema=None):
        """The state tree (dicts, lists, numbers, strings, numpy arrays) its files hold.

        Checked against `schema` (None: only that its arrays are there); StateMismatch where not.
        """
        with open(os.path.join(self.path, STATE_FILE)) as f:
            document = json.load(f)
        with open(os.path.join(self.path, ARRAYS_FILE), "rb") as f:
            arrays = read_arrays(f)
        try:
            state = from_data(document, arrays)
        except (KeyError, TypeError, ValueError) as error:  # a tag naming no array
            raise StateMismatch(f"it refers to arrays {ARRAYS_FILE} does not hold ({error})")
        if schema is not None:
            check_state(state, schema)
        return state

    def unfit_state(self, error):
        """The line saying this checkpoint's state cannot be read (`error`), and what to do."""
        if isinstance(error, StateMismatch):
            detail = str(error)
        elif isinstance(error, KeyError):
            detail = f"the key {error} is missing"
        else:
            detail = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:160]}"
        fix = self.unfit_fix or fall_back(self.path)
        return (f"{self.path}/{STATE_FILE} does not hold what this fast-dqn writes ({detail}): "
                f"it was edited, or written by another program; {fix}")

    def load_replay(self, arrays):
        """Fill `arrays`, {name: ndarray} of the saved shapes and dtypes, from replay.zst."""
        with open(os.path.join(self.path, REPLAY_FILE), "rb") as f:
            read_arrays(f, into=arrays)


def fall_back(path, otherwise="put back the original files, or start a new run"):
    """What to do about a checkpoint nothing can go on from: use the one before it.

    Args:
        path: the checkpoint's directory, step-*.
        otherwise: the words where there is none before it.

    Returns:
        The words: move it out of its folder, which makes the newest before it the newest.
    """
    def order(m):  # step-N.1 is written after step-N
        return int(m.group(1)), int(m.group(2) or 0)
    folder, own = os.path.split(os.path.normpath(path))
    mine = order(m) if (m := _NAME.match(own)) else (-1, 0)
    earlier = sorted(order(m) for name in os.listdir(folder)
                     if (m := _NAME.match(name)) and order(m) < mine)
    if not earlier:
        return otherwise
    return (f"move {own} out of {folder}, which makes the one of step "
            f"{earlier[-1][0]:,} the newest, or start a new run")


class CheckpointStore:
    """A run's checkpoints folder: writes checkpoints atomically, keeps the newest, reads them.

    Args:
        run_dir: the run directory, which holds the folder.
        keep: how many checkpoints to keep, the newest.
        warn: a function that prints a warning line; None prints it on stderr.
        folder: the folder's name inside `run_dir`.
        on_saved: a function of the agent step, called as each checkpoint takes its final name.
        unfit_fix: what to do where a checkpoint's state cannot be read; None: use fall_back.
    """

    def __init__(self, run_dir, keep=2, warn=None, folder="checkpoints", on_saved=None,
                 unfit_fix=None):
        self.dir = os.path.join(run_dir, folder)
        self.keep = keep
        self.warn = warn or (lambda message: print(message, file=sys.stderr, flush=True))
        self.on_saved = on_saved
        self.unfit_fix = unfit_fix

    # --- writing

    def save(self, step, state, replay_arrays=None, finished=False, plan=None):
        """Write a checkpoint for agent step `step`, then delete all but the newest `keep`.

        Args:
            step: the agent step the state is of.
            state: a tree of data (see fast_dqn.run.storage.state_tree).
            replay_arrays: replay's {name: ndarray}, or None to save no replay.
            finished: the run ended here; the manifest says so, so a resume need not load the state.
            plan: the run's RUN_PLAN settings, kept in the manifest for --resume too; or None.

        Returns:
            The checkpoint's path.

        Raises:
            CheckpointError: it could not be written (disk full, unwritable path).
        """
        # Before any file exists: a state that is not data is a bug, and must not leave a
        # half-written directory behind.
        document, arrays = to_data(state)
        # A run resumed at its last step, with work still to do there (a period's minibatches
        # owed, an evaluation), saves that step again. Replacing the checkpoint in place would
        # open a window with no copy, so the new one takes the next free suffix.
        final, n = os.path.join(self.dir, f"step-{step:012d}"), 0
        while os.path.exists(final):
            n += 1
            final = os.path.join(self.dir, f"step-{step:012d}.{n}")
        partial = os.path.join(self.dir, f".partial-step-{step:012d}-{os.getpid()}")
        if os.path.lexists(self.dir) and not os.path.isdir(self.dir):
            raise CheckpointError(f"could not write the checkpoint of step {step:,}: "
                                  f"'{self.dir}' is a file, not the run's folder; move it "
                                  "away (the run never writes a file there)")
        try:
            os.makedirs(self.dir, exist_ok=True)
            self._remove_partials()
            os.makedirs(partial)
            files = {
                STATE_FILE: self._write(partial, STATE_FILE,
                                        lambda f: f.write(json.dumps(document).encode())),
                ARRAYS_FILE: self._write(partial, ARRAYS_FILE,
                                         lambda f: write_arrays(f, arrays, level=3)),
            }
            if replay_arrays is not None:
                files[REPLAY_FILE] = self._write(partial, REPLAY_FILE,
                                                 lambda f: write_arrays(f, replay_arrays))
            # "code" is a record for the reader (which version wrote this), never checked.
            manifest = {"format": FORMAT, "step": step, "finished": finished, "files": files,
                        "code": code_record()}
            if plan:
                manifest["plan"] = plan
            with open(os.path.join(partial, MANIFEST_FILE), "w") as f:
                json.dump(manifest, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(partial)
            os.rename(partial, final)
            if self.on_saved:  # at once: a kill -9 just after must find it recorded
                self.on_saved(step)
            _fsync_dir(self.dir)
        except (OSError, zstandard.ZstdError) as error:
            shutil.rmtree(partial, ignore_errors=True)
            # What is safe, and what to do, the command line says (it knows the command).
            raise CheckpointError(f"could not write the checkpoint of step {step:,} in "
                                  f"{self.dir} ({getattr(error, 'strerror', None) or error})"
                                  ) from error
        self._prune()
        return final

    @staticmethod
    def _write(directory, name, write):
        with open(os.path.join(directory, name), "wb") as raw:
            f = _ChecksumWriter(raw)
            write(f)
            raw.flush()
            os.fsync(raw.fileno())
        return {"size": f.size, "crc32": f.crc}

    def _remove_partials(self):
        for name in os.listdir(self.dir):
            if name.startswith(".partial-"):
                shutil.rmtree(os.path.join(self.dir, name), ignore_errors=True)

    def discard_after(self, step):
        """Delete the checkpoints of steps after `step` (steps a resume plays again).

        Args:
            step: the step the resume starts from, in agent steps.
        """
        for later, _, name in self._complete():
            if later > step:
                shutil.rmtree(os.path.join(self.dir, name), ignore_errors=True)

    def _prune(self):
        for step, _, name in self._complete()[:-self.keep]:
            shutil.rmtree(os.path.join(self.dir, name), ignore_errors=True)

    # --- reading

    def _complete(self):
        """(step, suffix, name) of every finished checkpoint directory, oldest first."""
        if not os.path.isdir(self.dir):
            return []
        found = [(int(m.group(1)), int(m.group(2) or 0), name) for name in os.listdir(self.dir)
                 if (m := _NAME.match(name))]
        return sorted(found)

    def steps(self):
        """The agent steps of the finished checkpoints, not verified.

        Returns:
            A list of agent steps, oldest first.
        """
        return [step for step, _, _ in self._complete()]

    def newest(self):
        """The newest finished checkpoint, not verified.

        Returns:
            (its step in agent steps, its path), or None where there is none.
        """
        complete = self._complete()
        if not complete:
            return None
        step, _, name = complete[-1]
        return step, os.path.join(self.dir, name)

    def newest_is_finished(self):
        """Whether the newest checkpoint's manifest says the run ended there.

        Read, not verified: for what the command line says at the end, not for resuming.

        Returns:
            True where it does; False where there is none, or it cannot be read.
        """
        complete = self._complete()
        if not complete:
            return False
        try:
            with open(os.path.join(self.dir, complete[-1][2], MANIFEST_FILE)) as f:
                return json.load(f).get("finished") is True
        except (OSError, ValueError, AttributeError):
            return False

    def latest(self):
        """The newest checkpoint that verifies, warning about each damaged newer one.

        Returns:
            A Checkpoint, or None when there is no checkpoint at all.

        Raises:
            CorruptFile: there are checkpoints, but none is usable.
            UnsupportedFormat: the newest is of another format; no older one may replace it.
        """
        problems = []
        for step, _, name in reversed(self._complete()):
            path = os.path.join(self.dir, name)
            try:
                checkpoint = Checkpoint(path, step, self._verify(path), self.unfit_fix)
            except UnsupportedFormat as error:
                raise UnsupportedFormat(f"{name} {error}")
            except CorruptFile as error:
                problems.append(f"{name}: {error}")
                continue
            for problem in problems:
                self.warn(f"warning: skipping damaged checkpoint {problem}; using {name}")
            return checkpoint
        if problems:
            raise CorruptFile("; ".join(problems))
        return None

    @staticmethod
    def _verify(path):
        try:
            with open(os.path.join(path, MANIFEST_FILE)) as f:
                manifest = json.load(f)
        except (OSError, ValueError) as error:
            raise CorruptFile(f"no readable manifest ({error})")
        _check_format(manifest)
        files = _manifest_files(manifest, path)
        for name, expected in files.items():
            crc, size = 0, 0
            try:
                with open(os.path.join(path, name), "rb") as f:
                    while chunk := f.read(16 << 20):
                        crc = zlib.crc32(chunk, crc)
                        size += len(chunk)
            except OSError as error:
                raise CorruptFile(f"{name} cannot be read ({error.strerror})")
            if size != expected["size"] or crc != expected["crc32"]:
                raise CorruptFile(f"{name} is damaged ({size:,} bytes, expected "
                                  f"{expected['size']:,}, or a checksum mismatch)")
        return manifest


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_format(manifest):
    # Format 1 wrote no version in its manifest.
    version = manifest.get("format", 1) if isinstance(manifest, dict) else None
    if version == FORMAT or not _whole(version):
        return  # a format that is not a whole number is damage, which the file checks report
    if version > FORMAT:
        raise UnsupportedFormat(f"is of checkpoint format {version}, newer than this "
                                f"fast-dqn's {FORMAT}; use the newer fast-dqn that wrote it")
    raise UnsupportedFormat(f"is of checkpoint format {version}, written by an earlier "
                            f"fast-dqn, which this one (format {FORMAT}) does not read; use the "
                            "fast-dqn that wrote it, or start a new run")


def _manifest_files(manifest, path):
    """The manifest's {name: {"size", "crc32"}}, or CorruptFile where it cannot vouch (only it
    vouches, so one that does not fit this directory's step is damage too)."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise CorruptFile(f"{MANIFEST_FILE} has no table of files")
    files = manifest["files"]
    for name in (STATE_FILE, ARRAYS_FILE):
        if name not in files:
            raise CorruptFile(f"{MANIFEST_FILE} does not list {name}")
    for name, expected in files.items():
        # Only files inside the checkpoint: a listed ../x would be checksummed, not loaded.
        if name in ("", ".", "..", MANIFEST_FILE) or os.path.basename(name) != name:
            raise CorruptFile(f"{MANIFEST_FILE} lists {name!r}, which is no checkpoint file")
        if not (isinstance(expected, dict) and _whole(expected.get("size"))
                and _whole(expected.get("crc32"))):
            raise CorruptFile(f"{MANIFEST_FILE} gives no whole-number size and crc32 for {name}")
    match = _NAME.match(os.path.basename(os.path.normpath(path)))
    step = manifest.get("step")
    if not _whole(step) or (match and step != int(match.group(1))):
        raise CorruptFile(f"{MANIFEST_FILE} is for step {step!r}, not this directory's")
    return files


class Checkpointer:
    """When a loop checkpoints, and what goes in a checkpoint.

    Periodic checkpoints come at the first opportunity at or after each multiple of `freq` agent
    steps; the loops also save at the end and when a stop is requested (stop_requested).

    Args:
        store: the CheckpointStore that writes them.
        freq: the checkpoint period, in agent steps; 0 for none but the last and a stop's.
        collect: a function of the step: the state of every part but the loop, a dict.
        replay: the replay memory, whose arrays() are saved; None to save no replay.
        stop: a function that returns true once a stop is asked for; or None.
        message: a function that prints a console line; None for print.
        last_saved: the agent step of the checkpoint the run resumed from; None for a new run.
        clock: a function that returns seconds, to time each save.
        plan: the run's RUN_PLAN settings, kept in each manifest; or None.
    """

    def __init__(self, store, freq, collect, replay=None, stop=None, message=None,
                 last_saved=None, clock=time.monotonic, plan=None):
        self.store = store
        self.plan = plan
        self.freq = freq
        self.collect = collect
        self.replay = replay
        self.stop = stop
        self.message = message or print
        self.last_saved = last_saved
        self.clock = clock
        self.finished = False  # the last save ended the run

    def stop_requested(self):
        """Whether a stop was asked for (Ctrl-C, SIGTERM), so the loop saves and returns.

        Returns:
            True once `stop` says so; False without a `stop`.
        """
        return bool(self.stop and self.stop())

    def due(self, step):
        """Whether a periodic checkpoint is due: `step` passed a multiple of `freq` unsaved.

        Args:
            step: agent steps taken so far.

        Returns:
            True where the loop should save at this step.
        """
        last = self.last_saved or 0
        return bool(self.freq) and step // self.freq > last // self.freq

    def save(self, step, loop_state, final=False, finished=False):
        """Write the checkpoint of `step`: every part's state, the loop's, and replay's.

        Args:
            step: agent steps taken so far.
            loop_state: the loop's own state, a tree of data.
            final: the run's last checkpoint, written even at the step it resumed from (no other
                save is), where the resumed run may have done work (a sync point, an evaluation).
            finished: the run is done (final, and no evaluation left pending by a stop).

        Raises:
            CheckpointError: it could not be written; older checkpoints stay intact.
        """
        if step == self.last_saved and not final:
            # A stop at the step the run resumed from: what is on disk resumes just as well
            # (work done since at this step is done again, its log rows trimmed).
            return
        start = self.clock()
        state = self.collect(step)
        state["loop"] = loop_state
        # `is not None`: a replay still empty (a fast-loop stop before its first sync point
        # writes nothing into it) is falsy, and must still be saved as replay.
        arrays = self.replay.arrays() if self.replay is not None else None
        path = self.store.save(step, state, arrays, finished=finished, plan=self.plan)
        self.last_saved, self.finished = step, finished
        self.message(f"checkpoint at step {step:,} in {self.clock() - start:.1f} s: {path}")


def latest_checkpoint(run_dir, setting, warn=None, missing_ok=False):
    """The newest usable checkpoint of a run, or a ConfigError about `setting` saying why not.

    Args:
        run_dir: the run directory, whose checkpoints/ is read.
        setting: the setting an error names ("resume", or a tool's "RUN_DIR").
        warn: a function that prints a warning line (a damaged checkpoint skipped); None: stderr.
        missing_ok: answer None, not an error, for a run with no checkpoint at all.

    Returns:
        A verified Checkpoint, or None (only with `missing_ok`).
    """
    from fast_dqn.errors import ConfigError
    try:
        checkpoint = CheckpointStore(run_dir, warn=warn).latest()
    except UnsupportedFormat as error:
        raise ConfigError(setting, f"the checkpoint {error}")
    except CorruptFile as error:
        raise ConfigError(setting, f"no usable checkpoint in '{run_dir}' ({error}); start a "
                                   "new run")
    if checkpoint is None and not missing_ok:
        from fast_dqn.run.storage.run_directory import CHECKPOINT_RECORD, checkpoint_record
        record, step = checkpoint_record(run_dir)
        if record == "written":  # checkpoints/ was moved or emptied: "yet" would mislead
            one = f" (one of agent step {step:,})" if step is not None else ""
            raise ConfigError(setting, f"'{run_dir}' has had checkpoints{one}, as its "
                              f"{CHECKPOINT_RECORD} records, but none is in "
                              f"'{os.path.join(run_dir, 'checkpoints')}' now: put them back")
        raise ConfigError(setting, f"'{run_dir}' has no checkpoint yet; use it once its first "
                          "one is written")
    return checkpoint
