"""Every value of a checkpoint's state, replaced in turn by one of another kind: each resume
must refuse in one line and change no file of the run.

    python -m benchmarks.edit_sweep RUN_DIR [--seed 0]

RUN_DIR is any finished or stopped run (it is copied, never changed). For each leaf of its
newest checkpoint's state.json (a value that is not a non-empty list or object, array
references included), a copy of the run gets that value replaced by one of another JSON kind
(drawn with --seed; never null), the manifest updated so that the checkpoint still verifies,
and is resumed in process with --timesteps 100 past the checkpoint. The crash fuzzer draws
one such edit in some trials; this tries them all. Prints each failure, then a summary line,
and exits 1 if any failed.
"""

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
import zlib

from benchmarks import fuzz_attacks as attacks
from fast_dqn.run import cli
from fast_dqn.run.run_kinds import FAST, NATURE
from fast_dqn.run.storage.checkpoint import CheckpointStore


def edited_copy(run_dir, work, leaf, rng):
    """A copy of the run in `work` with `leaf` of its newest state replaced; returns the
    new value."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(run_dir, work, ignore=shutil.ignore_patterns("run.lock"))
    checkpoint = CheckpointStore(work).latest()
    state_path = os.path.join(checkpoint.path, "state.json")
    manifest_path = os.path.join(checkpoint.path, "manifest.json")
    with open(state_path) as f:
        document = json.load(f)
    _, new = attacks.replace_value(document, leaf, rng)
    data = json.dumps(document).encode()
    with open(state_path, "wb") as f:
        f.write(data)
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["files"]["state.json"] = {"size": len(data), "crc32": zlib.crc32(data)}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    return new


def resume(work, kind, step):
    """(exit code, stderr) of resuming the run in `work` in process."""
    from fast_dqn.run.training import train_fast, train_nature
    train = train_nature if kind is NATURE else train_fast
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(kind, [f"--resume={work}", f"--timesteps={step + 100}"],
                        train=train)
    return code, err.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with open(os.path.join(args.run_dir, "config.json")) as f:
        kind = NATURE if json.load(f)["loop"] == "dqn" else FAST
    newest = CheckpointStore(args.run_dir).latest()
    with open(os.path.join(newest.path, "state.json")) as f:
        leaves = attacks.leaves(json.load(f))
    rng, failed = random.Random(args.seed), 0
    work = os.path.join(tempfile.mkdtemp(prefix="edit-sweep-"), "run")
    for leaf in leaves:
        new = edited_copy(args.run_dir, work, leaf, rng)
        before = attacks.snapshot(work)
        code, err = resume(work, kind, newest.step)
        problems = attacks.refusal_problems("state.json", code, err, before,
                                            attacks.snapshot(work))
        if problems:
            failed += 1
            print(f"/{'/'.join(map(str, leaf))} = {json.dumps(new)}: {problems[0]}", flush=True)
    shutil.rmtree(os.path.dirname(work), ignore_errors=True)
    print(f"{len(leaves)} values of {newest.path}/state.json edited, "
          f"{len(leaves) - failed} refused in one line with no file changed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
