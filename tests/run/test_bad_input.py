"""Every kind of bad input: one line naming the flag or file and the fix, exit status 2, no
traceback, and nothing created or changed on disk: flags, run directories, hand-edited
config.json files and checkpoints, a resume's flags against its run's, and limits of memory."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import zlib

import pytest
from helpers import ROOT, hang_guard

from fast_dqn.errors import ConfigError
from fast_dqn.run import cli
from fast_dqn.run.resume import describe_kept, resume_config
from fast_dqn.run.run_kinds import FAST, NATURE, RUN_KINDS
from fast_dqn.run.settings import flags
from fast_dqn.run.settings.hyperparameters import FastConfig
from fast_dqn.run.settings.validation import validate
from fast_dqn.run.storage import checkpoint as ckpt
from fast_dqn.run.storage.checkpoint import CheckpointStore
from fast_dqn.run.storage.run_directory import create_run_directory


def make_run(path, loop="dqn", checkpoints=(100,), **overrides):
    """A run directory as a finished run leaves it; its checkpoints hold a stand-in state."""
    config = RUN_KINDS[loop].config_class(logdir=str(path), **overrides)
    create_run_directory(str(path), {"loop": loop, **config.to_dict()})
    (path / "episodes.csv").write_text("episode,agent_step\n")
    store = CheckpointStore(str(path))
    for step in checkpoints:
        store.save(step, {"loop": {"step": step}})
    return path


def damage(path):
    for name in os.listdir(path / "checkpoints"):
        state = path / "checkpoints" / name / ckpt.STATE_FILE
        state.write_bytes(state.read_bytes()[:-5])


def set_format(path, version):
    """Make each checkpoint of the run one of checkpoint format `version`; format 1, the
    pickled one, had a state.pkl.zst and no version in its manifest."""
    for name in os.listdir(path / "checkpoints"):
        directory = path / "checkpoints" / name
        manifest = json.loads((directory / ckpt.MANIFEST_FILE).read_text())
        if version == 1:
            del manifest["format"]
            (directory / "state.pkl.zst").write_bytes(b"(pickle)")
            manifest["files"] = {"state.pkl.zst": {"size": 8, "crc32": zlib.crc32(b"(pickle)")}}
        else:
            manifest["format"] = version
        (directory / ckpt.MANIFEST_FILE).write_text(json.dumps(manifest))


def snapshot(root):
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            stat = os.stat(os.path.join(directory, name))
            found[os.path.join(directory, name)] = (stat.st_size, stat.st_mtime_ns)
    return found


# (loop, argv with {run} for a prepared run directory, how to prepare it, flag, words)
CASES = [
    ("dqn", ["--game=pongg"], None, "--game", "did you mean pong"),
    ("dqn", ["--env=CartPol-v1"], None, "--env", "did you mean CartPole-v1"),
    ("dqn", ["--env=CartPole-v1", "--game=pong"], None, "--env", "exclusive"),
    ("fast", ["--workers=0"], None, "--workers", "positive whole number"),
    ("fast", ["--backend=ray", "--num-samplers=0"], None, "--num-samplers",
     "positive whole number"),
    ("fast", ["--backend=ray", "--workers=8"], None, "--workers", "--envs-per-sampler"),
    ("fast", ["--backend=ray", "--ray-address=127.0.0.1:9"], None, "--ray-address",
     "nothing answers"),
    ("fast", ["--backend=ray", "--envs-per-sampler=8", "--prepopulate=60"], None,
     "--prepopulate", "--num-samplers × --envs-per-sampler"),
    ("dqn", ["--replay-capacity=lots"], None, "--replay-capacity", "expected a whole number"),
    ("dqn", ["--batch-size=-3"], None, "--batch-size", "positive whole number"),
    ("dqn", ["--timesteps=0"], None, "--timesteps", "positive whole number"),
    ("dqn", ["--timesteps=50k"], None, "--timesteps", "end before training starts, after the "
     "--prepopulate warm-up of 50,000 steps; raise --timesteps or lower --prepopulate"),
    ("fast", ["--env=CartPole-v1", "--timesteps=1000", "--prepopulate=2000"], None,
     "--timesteps", "1,000 steps end before training starts"),
    # Named --env-backend python, a flag nobody typed, and never said why.
    ("fast", ["--env=CartPole-v1", "--sampler-groups=2"], None, "--sampler-groups",
     "--sampler-groups: games given by --env play on the Python backend, which has one "
     "sampler group; drop --sampler-groups (or use --game for an Atari game)"),
    ("dqn", ["--timesteps=50003"], None, "--timesteps", "50,003 steps end before the first "
     "minibatch, at step 50,004 (one every --train-freq 4 steps after the --prepopulate "
     "warm-up of 50,000); raise --timesteps to 50,004 or more"),
    ("dqn", ["--eps-end=1.5"], None, "--eps-end", "must be in [0, 1]"),
    ("dqn", ["--sticky-actions=-0.1"], None, "--sticky-actions", "must be in [0, 1]"),
    ("dqn", ["--batch-size=64", "--replay-capacity=32"], None, "--batch-size",
     "larger than --replay-capacity"),
    ("dqn", ["--prepopulate=5000", "--replay-capacity=1000"], None, "--prepopulate",
     "larger than --replay-capacity"),
    ("fast", ["--target-update-freq=1001"], None, "--target-update-freq",
     "not a multiple of --train-freq"),
    # The fast loop's own settings (test_fast_end_to_end keeps one of them in a real process).
    ("fast", ["--train-freq=0"], None, "--train-freq", ""),
    ("fast", ["--target-update-freq=0"], None, "--target-update-freq", ""),
    ("fast", ["--updates-per-call=-1"], None, "--updates-per-call", ""),
    ("fast", ["--replay-device=gpu"], None, "--replay-device", ""),
    ("fast", ["--target-update-freq=10002"], None, "--train-freq", ""),
    ("fast", ["--workers=8", "--prepopulate=20"], None, "--prepopulate", ""),
    ("fast", ["--workers=8", "--replay-capacity=40", "--prepopulate=40", "--batch-size=8"],
     None, "--replay-capacity", ""),
    ("fast", ["--env-backend=gpu"], None, "--env-backend", ""),
    ("fast", ["--scan-unroll=-1"], None, "--scan-unroll", "0 or more"),
    ("dqn", ["--matmul-precision=fp8"], None, "--matmul-precision", "invalid choice"),
    ("dqn", ["--resume={run}", "--matmul-precision=tf32"], "run", "--matmul-precision",
     "conflicts with this run's saved default"),
    ("fast", ["--concurrent=maybe"], None, "--concurrent", ""),
    ("dqn", ["--replay-capacity=1e9"], None, "--replay-capacity", "GiB of RAM is available"),
    ("dqn", ["--logdir=/proc/fast-dqn-test"], None, "--logdir", "cannot"),
    ("dqn", ["--logdir={run}"], "run", "--logdir", "already holds files"),
    ("dqn", ["--resume={run}"], "empty", "--resume", "not a fast-dqn run"),
    ("fast", ["--resume={run}"], "run", "--resume", "is a run of run_dqn.py, which resumes it"),
    ("dqn", ["--resume={run}", "--lr=0.01"], "run", "--lr", "conflicts with this run's saved"),
    ("dqn", ["--resume={run}", "--game=breakout"], "run", "--game", "conflicts"),
    ("dqn", ["--resume={run}", "--full-action-space"], "run", "--full-action-space",
     "conflicts"),
    ("dqn", ["--resume={run}", "--timesteps=50"], "run", "--timesteps", "below the checkpoint"),
    # config.json edited by hand: checked as the command line is, naming the field.
    ("dqn", ["--resume={run}"], 'edit:batch_size="64"', "--resume",
     '"batch_size": "64", which is not a whole number'),
    ("dqn", ["--resume={run}"], "edit:timesteps=null", "--resume",
     '"timesteps": null, which is not a whole number'),
    ("dqn", ["--resume={run}"], "edit:dueling=1", "--resume", '"dueling": 1, which is not true'),
    ("dqn", ["--resume={run}"], 'edit:optimizer="sgd"', "--resume", "one of rmsprop, adam"),
    # A value of config.json that fails its check names config.json, not a flag nobody typed.
    ("dqn", ["--resume={run}"], "edit:lr=-1", "--resume",
     'config.json has "lr": -1, but --lr must be positive'),
    ("fast", ["--resume={run}"], "fast:edit:workers=0", "--resume",
     'config.json has "workers": 0, but --workers must be a positive whole number'),
    ("fast", ["--resume={run}"], "fast:edit:updates_per_call=-1", "--resume",
     'config.json has "updates_per_call": -1, but --updates-per-call must be 0 or more, '
     'got -1; put back the value the run was started with'),
    # Seeds: ALE takes C ints, and a run derives its games' seeds from this one.
    ("dqn", ["--seed=2147483648"], None, "--seed", "must be below 2,147,483,648"),
    ("fast", ["--seed=18446744073709551616"], None, "--seed", "must be below"),
    ("dqn", ["--threads=1000000000000"], None, "--threads", "must be at most 1,024"),
    ("dqn", ["--resume={run}"], "edit:seed=4294967296", "--resume",
     'config.json has "seed": 4294967296, but --seed must be below'),
    ("dqn", ["--resume={run}"], "corrupt", "--resume", "no usable checkpoint"),
    # Checkpoints of another format version: refused, never guessed at.
    ("dqn", ["--resume={run}"], "format:1", "--resume",
     "step-000000000200 is of checkpoint format 1, written by an earlier fast-dqn"),
    ("fast", ["--resume={run}"], "fast:format:3", "--resume",
     "format 3, newer than this fast-dqn's 2"),
]


@pytest.mark.parametrize("loop,argv,prepare,flag,words", CASES,
                         ids=[f"{c[3]}:{c[4][:24]}" for c in CASES])
def test_bad_input_gets_one_line_and_exit_2(tmp_path, monkeypatch, capsys, loop, argv, prepare,
                                            flag, words):
    monkeypatch.chdir(tmp_path)  # where a default runs/ directory would appear
    run_dir = tmp_path / "run"
    if prepare == "run":
        make_run(run_dir)
    elif prepare == "empty":
        run_dir.mkdir()
    elif prepare and prepare.startswith(("edit:", "fast:edit:")):
        loop_of_run = "fast" if prepare.startswith("fast:") else "dqn"
        name, value = prepare.split("edit:")[1].split("=")
        make_run(run_dir, loop=loop_of_run)
        saved = json.loads((run_dir / "config.json").read_text())
        saved[name] = json.loads(value)
        (run_dir / "config.json").write_text(json.dumps(saved))
    elif prepare == "corrupt":
        make_run(run_dir, checkpoints=(100, 200))
        damage(run_dir)
    elif prepare and "format:" in prepare:
        make_run(run_dir, checkpoints=(100, 200),
                 loop="fast" if prepare.startswith("fast:") else "dqn")
        set_format(run_dir, int(prepare.split(":")[-1]))
    before = snapshot(tmp_path)
    prog = RUN_KINDS[loop].script

    def train(config, **kwargs):
        raise AssertionError("bad input reached training")

    try:
        code = cli.main(RUN_KINDS[loop], [a.format(run=run_dir) for a in argv],
                        train=train)
    except SystemExit as exit_:  # argparse's own errors exit from parse_args
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: error: ") and flag in lines[0] and words in lines[0]
    assert "Traceback" not in err
    assert snapshot(tmp_path) == before


@pytest.mark.faults
def test_a_damaged_newest_checkpoint_falls_back_with_a_warning(tmp_path, capsys):
    run_dir = make_run(tmp_path / "run", checkpoints=(100, 200))
    state = run_dir / "checkpoints" / "step-000000000200" / ckpt.STATE_FILE
    state.write_bytes(b"garbage")
    config, checkpoint, _ = resume_config(str(run_dir), {}, NATURE)
    assert checkpoint.step == 100
    err = capsys.readouterr().err
    assert "warning: skipping damaged checkpoint step-000000000200" in err


@pytest.mark.faults
def test_a_run_from_before_a_setting_existed_resumes_with_its_default_typed(tmp_path):
    """config.json written before --eval-max-episode-steps existed: that run used 0, so 0
    typed on resume agrees, and another value is refused as any protocol change is."""
    import json
    run_dir = make_run(tmp_path / "run", checkpoints=(100,), timesteps=60_000)
    saved = json.loads((run_dir / "config.json").read_text())
    del saved["eval_max_episode_steps"]
    (run_dir / "config.json").write_text(json.dumps(saved))
    config, _, _ = resume_config(str(run_dir), {"eval_max_episode_steps": 0}, NATURE)
    assert config.eval_max_episode_steps == 0
    with pytest.raises(ConfigError, match="4500 conflicts with this run's saved 0"):
        resume_config(str(run_dir), {"eval_max_episode_steps": 4500}, NATURE)


@pytest.mark.slow  # a real run
@pytest.mark.faults
def test_a_checkpoint_from_another_run_is_refused_before_any_log_changes(tmp_path,
                                                                     tiny_pong_run):
    # A real checkpoint of a Pong run, copied into a Breakout run: action counts differ.
    breakout = tmp_path / "breakout"
    make_run(breakout, checkpoints=(), game="breakout")
    shutil.copytree(tiny_pong_run / "checkpoints", breakout / "checkpoints")
    before = snapshot(breakout)
    # A budget past the copied checkpoint's: the Pong run's plan (1600 steps, finished) would
    # otherwise only be told to go on, with nothing written.
    result = subprocess.run([sys.executable, "run_dqn.py", f"--resume={breakout}",
                             "--timesteps=3200"],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("run_dqn.py: error: --resume:") and "does not belong" in last
    assert "Traceback" not in result.stderr
    # The refusal came after the run was taken, which names the taker in run.lock.
    lock = str(breakout / "run.lock")
    assert {k: v for k, v in snapshot(breakout).items() if k != lock} == \
        {k: v for k, v in before.items() if k != lock}


@pytest.mark.faults
def test_a_fast_run_that_ended_past_its_budget_resumes(tmp_path):
    # --timesteps 401 with 4 workers ends at 404, the next whole round; its checkpoint there
    # (a stop at the last sync point, before its evaluation) resumes with the same budget.
    run_dir = make_run(tmp_path / "run", loop="fast", checkpoints=(404,), timesteps=401,
                       workers=4)
    config, checkpoint, _ = resume_config(str(run_dir), {}, FAST)
    assert (config.timesteps, checkpoint.step) == (401, 404)
    with pytest.raises(ConfigError, match="below the checkpoint's step 404"):
        resume_config(str(run_dir), {"timesteps": 400}, FAST)


@pytest.mark.faults
def test_a_plain_resume_keeps_the_budget_and_replay_an_earlier_resume_gave(tmp_path):
    """`--resume RUN --timesteps 3000 --save-replay`, stopped at 1,500, then `--resume RUN`:
    it goes on to 3,000 and keeps saving replay, though config.json still says 1,000."""
    run_dir = make_run(tmp_path / "run", checkpoints=(), timesteps=1000)
    CheckpointStore(str(run_dir)).save(1500, {"loop": {"step": 1500}}, plan={
        "timesteps": 3000, "checkpoint_freq": 50_000, "save_replay": True})
    config, checkpoint, kept = resume_config(str(run_dir), {}, NATURE)
    assert (config.timesteps, config.save_replay, checkpoint.step) == (3000, True, 1500)
    assert config.checkpoint_freq == 50_000
    assert kept == {"timesteps": 3000, "checkpoint_freq": 50_000, "save_replay": True}
    assert describe_kept(kept) == (
        "keeping what an earlier --resume gave: --timesteps 3,000, --checkpoint-freq 50,000, "
        "--save-replay on (config.json keeps the run's first values)")
    # What is typed now wins, and is not reported as kept.
    config, _, kept = resume_config(str(run_dir), {"timesteps": 2000, "save_replay": False},
                                    NATURE)
    assert (config.timesteps, config.save_replay, kept) == (2000, False,
                                                           {"checkpoint_freq": 50_000})


@pytest.mark.faults
def test_a_hand_edited_plan_is_ignored_and_a_budget_not_typed_is_named_so(tmp_path):
    run_dir = make_run(tmp_path / "run", checkpoints=(), timesteps=1000)
    CheckpointStore(str(run_dir)).save(1500, {"loop": {"step": 1500}}, plan={
        "timesteps": "3000", "save_replay": 1})
    with pytest.raises(ConfigError) as error:
        resume_config(str(run_dir), {}, NATURE)
    assert error.value.message == ("1,000 (this run's budget) is below the checkpoint's step "
                                "1,500; give a larger --timesteps")
    config, _, kept = resume_config(str(run_dir), {"timesteps": 4000}, NATURE)
    assert (config.timesteps, config.save_replay, kept) == (4000, False, {})


# Each option's limit is declared once, beside its type and help: every declared limit is
# checked, naming its own flag (a value just outside it, every other setting at its default).
LIMITED = [f for f in dataclasses.fields(FastConfig) if f.metadata["limit"]]


@pytest.mark.parametrize("field", LIMITED, ids=[f.name for f in LIMITED])
def test_every_declared_limit_is_checked_naming_its_setting(field):
    outside = {"positive": 0, "non_negative": -1, "probability": 1.5}[field.metadata["limit"]]
    with pytest.raises(ConfigError) as error:
        validate(FastConfig(**{field.name: outside}))
    assert error.value.setting == field.name


def _under_ulimit_v(gib):
    import resource
    limit = int(gib * 2**30)
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_an_address_space_tensorflow_aborts_under_is_one_line(tmp_path):
    """`ulimit -v` 2 GiB: TensorFlow aborted with a C++ stack dump. Refused before it is
    imported, so this takes no TensorFlow start-up."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run([sys.executable, "run_dqn.py", "--env=CartPole-v1",
                           f"--logdir={tmp_path / 'run'}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=_under_ulimit_v(2))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("run_dqn.py: error: `ulimit -v` limits this process to "
                                  "2.00 GiB of address space, and TensorFlow aborts under 3 GiB")
    assert not (tmp_path / "run").exists()


def test_an_address_space_limit_is_not_tensorflows_under_jax(tmp_path):
    """KERAS_BACKEND unset, keras.json naming JAX: TensorFlow's floor does not apply."""
    from fast_dqn.agent.backend_setup import _configured_backend
    (tmp_path / "keras.json").write_text('{"backend": "jax"}')
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["KERAS_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", "from fast_dqn.agent.backend_setup import "
                           "_check_address_space; _check_address_space(None); print('ok')"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=_under_ulimit_v(2))
    assert done.stdout.strip() == "ok", done.stderr
    assert _configured_backend("jax") == "jax"


@pytest.mark.slow  # TensorFlow's start-up, under the limit
def test_a_replay_beyond_ulimit_v_is_refused_before_the_run_directory_exists(tmp_path):
    done = subprocess.run([sys.executable, "run_dqn.py", "--game=pong",
                           "--replay-capacity=500000", f"--logdir={tmp_path / 'run'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          preexec_fn=_under_ulimit_v(5))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--replay-capacity: a replay of 500,000 steps needs 3.29 GiB" in done.stderr
    assert "raise that limit (ulimit -v unlimited) or lower --replay-capacity" in done.stderr
    assert not (tmp_path / "run").exists()


# Calls the command line in process with each case's flags, then says which backends the
# process had imported by its refusal. One process for all the cases: none imports Keras.
_REFUSE_EACH = """
import contextlib, io, json, sys
from fast_dqn.run import cli
from fast_dqn.run.run_kinds import RUN_KINDS

def train(config, **kwargs):
    raise AssertionError("bad input reached training")

for loop, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(RUN_KINDS[loop], argv, train=train)
    print(json.dumps({"argv": argv, "code": code, "err": err.getvalue(), "imported":
                      [name for name in ("keras", "tensorflow", "jax") if name in sys.modules]}))
"""


def test_what_needs_no_keras_is_refused_before_keras_is_imported(tmp_path):
    """Keras and TensorFlow take seconds to import, which a typo's refusal must not wait for.

    Checked by what the process imported, not by a clock: benchmarks/refusal_time.py times
    it.
    """
    make_run(tmp_path / "nature-run")
    (tmp_path / "empty").mkdir()
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_text('{"loop": "fast", "game": ')  # cut short
    edited = make_run(tmp_path / "edited")
    saved = json.loads((edited / "config.json").read_text())
    (edited / "config.json").write_text(json.dumps({**saved, "lr": -1}))
    logdir = f"--logdir={tmp_path / 'new-run'}"
    cases = [("dqn", ["--game=pongg"], "--game: unknown game 'pongg'"),
             ("fast", ["--env=Foo-v9"], "--env: unknown gymnasium env 'Foo-v9'"),
             ("fast", [f"--resume={tmp_path / 'nonexistent'}"], "is not a fast-dqn run"),
             ("fast", [f"--resume={tmp_path / 'empty'}"], "it has no config.json"),
             ("fast", [f"--resume={damaged}"], "--resume: cannot read"),
             ("fast", [f"--resume={tmp_path / 'nature-run'}"], "is a run of run_dqn.py"),
             ("dqn", [f"--resume={edited}"], 'config.json has "lr": -1'),
             ("dqn", ["--preset=pong-fastest", "--env=CartPole-v1"], "--preset:"),
             ("dqn", ["--timesteps=50k", logdir], "--timesteps: 50,000 steps end"),
             ("dqn", ["--replay-capacity=1e9", logdir], "GiB of RAM is available"),
             ("dqn", ["--mixed-precision", "--precision=bfloat16", logdir],
              "--mixed-precision: means --precision float16")]
    done = subprocess.run([sys.executable, "-c", _REFUSE_EACH,
                           json.dumps([case[:2] for case in cases])],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=hang_guard(120))
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == len(cases)
    for (_, argv, words), result in zip(cases, results):
        lines = result["err"].strip().splitlines()
        assert result["code"] == 2 and len(lines) == 1 and words in lines[0], result
        assert result["imported"] == [], f"{argv}: imported {result['imported']} first"
    assert not (tmp_path / "new-run").exists()


def never_train(config):
    raise AssertionError("training must not start on bad input")


def run_main(argv, tmp_path, capsys):
    code = cli.main(NATURE, argv, train=never_train)
    err = capsys.readouterr().err
    return code, err


BAD_INPUT = [
    (["--game", "pongg"], "--game", "pong"),
    (["--game", "not_a_game_at_all"], "--game", "unknown game"),
    (["--timesteps", "0"], "--timesteps", "positive"),
    (["--timesteps", "-5"], "--timesteps", "positive"),
    (["--timesteps", "abc"], "--timesteps", "whole number"),
    (["--replay-capacity", "1.5"], "--replay-capacity", "whole number"),
    (["--batch-size", "0"], "--batch-size", "positive"),
    (["--lr", "nan"], "--lr", "finite"),
    (["--lr", "0"], "--lr", "positive"),
    (["--eps-start", "1.5"], "--eps-start", "[0, 1]"),
    (["--eps-end", "-0.1"], "--eps-end", "[0, 1]"),
    (["--eval-epsilon", "2"], "--eval-epsilon", "[0, 1]"),
    (["--sticky-actions", "1.01"], "--sticky-actions", "[0, 1]"),
    (["--discount", "1.2"], "--discount", "[0, 1]"),
    (["--evaluate", "-1"], "--evaluate", "0 or more"),
    (["--batch-size", "64", "--replay-capacity", "32", "--prepopulate", "10"], "--batch-size",
     "larger than --replay-capacity"),
    (["--prepopulate", "2000", "--replay-capacity", "1000"], "--prepopulate", "warm-up"),
    (["--prepopulate", "2"], "--prepopulate", "at least"),
    (["--replay-capacity", "100_000_000"], "--replay-capacity", "GiB"),
    (["--optimizer", "sgd"], "--optimizer", "invalid choice"),
    (["--full-action-space=maybe"], "--full-action-space", "true/false"),
    (["--interp", "bogus"], "--interp", "invalid choice"),
]


@pytest.mark.parametrize("argv,flag,words", BAD_INPUT, ids=[" ".join(c[0]) for c in BAD_INPUT])
def test_bad_input_is_one_line_naming_the_flag(argv, flag, words, tmp_path, capsys):
    logdir = tmp_path / "run"
    try:
        code, err = run_main(argv + ["--logdir", str(logdir)], tmp_path, capsys)
    except SystemExit as exit_:  # argparse's own errors exit from parse_args
        code, err = exit_.code, capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert flag in lines[0] and words in lines[0] and "Traceback" not in err
    assert not logdir.exists()


def test_logdir_holding_files_is_never_touched(tmp_path, capsys):
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "episodes.csv").write_text("precious\n")
    code, err = run_main(["--logdir", str(run)], tmp_path, capsys)
    assert code == 2 and "--logdir" in err and "already holds files" in err
    assert os.listdir(run) == ["episodes.csv"]
    assert (run / "episodes.csv").read_text() == "precious\n"


def test_logdir_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "afile"
    target.write_text("x")
    code, err = run_main(["--logdir", str(target / "run")], tmp_path, capsys)
    assert code == 2 and "--logdir" in err and target.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere chmod allows nothing")
def test_unwritable_logdir(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, err = run_main(["--logdir", str(locked / "run")], tmp_path, capsys)
    assert code == 2 and "--logdir" in err


def test_unwritable_logdir_even_for_root(tmp_path, capsys):
    # /proc refuses new files for everyone, root included.
    code, err = run_main(["--logdir", "/proc/fast-dqn-run"], tmp_path, capsys)
    assert code == 2 and "--logdir" in err and "cannot write" in err


@pytest.mark.parametrize("typed,words", [("1.5k5", "expected a whole number"),
                                         ("0.0005k", "expected a whole number, got '0.0005k'"),
                                         ("1m", "expected a whole number"),
                                         ("1e400", "'1e400' is too large or too small"),
                                         ("1e-100000000", "is too large or too small"),
                                         ("1e-400", "is too large or too small"),
                                         ("1" * 5000, "(5000 characters) is too long"),
                                         ("0." + "0" * 100 + "1e100", "is too long")])
def test_counts_that_are_no_whole_number_are_one_line(typed, words, capsys):
    """Each in well under a second: 1e-100000000 once took Fraction over a minute."""
    import time
    parser = flags.build_parser("x", "y")
    started = time.perf_counter()
    with pytest.raises(SystemExit):
        parser.parse_args(["--timesteps", typed])
    assert time.perf_counter() - started < 5
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--timesteps" in err and words in err


def test_a_library_error_is_worded_with_the_flags_on_the_command_line(capsys):
    from fast_dqn.errors import ConfigError
    error = ConfigError("replay_capacity", "too large for ${env} with ${logdir}; lower it")
    assert str(error) == "replay_capacity: too large for env with logdir; lower it"
    assert flags.fail("run_dqn.py", error) == 2
    assert capsys.readouterr().err == ("run_dqn.py: error: --replay-capacity: too large for "
                                       "--env with --logdir; lower it\n")
    # A tool's own argument names are already its words.
    assert ConfigError("RUN_DIR", "x").worded(flags.flag_name) == "RUN_DIR: x"
    assert ConfigError("-o", "x").worded(flags.flag_name) == "-o: x"


def test_an_atari_setting_on_the_resume_of_an_env_run_is_refused_as_such(tmp_path, capsys):
    logdir = tmp_path / "run"
    assert cli.main(NATURE, ["--env=CartPole-v1", f"--logdir={logdir}"],
                    train=lambda config, **kw: None) == 0
    assert cli.main(NATURE, [f"--resume={logdir}", "--noop-max=30"],
                    train=lambda config, **kw: None) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "--noop-max: is a setting of the Atari protocol, which a gymnasium --env run does not "
        "use; drop it")


@pytest.mark.parametrize("backend,argv,words", [
    ("tensorflow", ["--fused-optimizer"], "--fused-optimizer: is JAX's alone, and the Keras "
     "backend here is TensorFlow; run with KERAS_BACKEND=jax, or give --no-fused-optimizer "
     "(speed only: a resume may change it)"),
    ("tensorflow", ["--scan-unroll=4"], "--scan-unroll: is JAX's alone"),
    ("tensorflow", ["--act-on-cpu"], "--act-on-cpu: is JAX's alone"),
    ("jax", ["--act-on-cpu", "--backend=ray"], "--act-on-cpu: Ray's samplers act on their "
     "own CPUs already"),
    ("jax", ["--fused-optimizer", "--precision=float16"],
     "--fused-optimizer: does not scale the loss, which float16 needs"),
])
def test_compile_choices_a_backend_cannot_take_are_one_line(backend, argv, words, tmp_path,
                                                             monkeypatch, capsys):
    monkeypatch.setenv("KERAS_BACKEND", backend)
    monkeypatch.chdir(tmp_path)

    def train(config, **kwargs):
        raise AssertionError("bad input reached training")

    assert cli.main(FAST, argv, train=train) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines
    assert not os.listdir(tmp_path)


def test_a_resume_may_change_how_the_learner_compiles(tmp_path, monkeypatch):
    """Speed only: the scan's unroll, the fused step, the kernels' determinism and where the
    samplers act."""
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    run_dir = make_run(tmp_path / "run", loop="fast", checkpoints=(100,))
    typed = {"scan_unroll": 2, "fused_optimizer": True, "deterministic": False,
             "act_on_cpu": True}
    config, _, _ = resume_config(str(run_dir), typed, FAST)
    assert (config.scan_unroll, config.fused_optimizer, config.deterministic,
            config.act_on_cpu) == (2, True, False, True)


def test_a_jax_runs_speed_choice_on_a_tensorflow_resume_says_how_to_resume(tmp_path,
                                                                          monkeypatch, capsys):
    """config.json's --fused-optimizer, from a run under JAX: the fix is the flag that turns it
    off, which a resume may give, not a value to put back; given, the resume goes on."""
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    run_dir = make_run(tmp_path / "run", loop="fast", checkpoints=(100,), fused_optimizer=True)

    def train(config, **kwargs):
        raise AssertionError("bad input reached training")
    assert cli.main(FAST, [f"--resume={run_dir}"], train=train) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith('config.json has "fused_optimizer": true, but --fused-optimizer is '
                        "JAX's alone, and the Keras backend here is TensorFlow; run with "
                        "KERAS_BACKEND=jax, or give --no-fused-optimizer (speed only: a resume "
                        "may change it)"), err
    config, _, _ = resume_config(str(run_dir), {"fused_optimizer": False}, FAST)
    assert config.fused_optimizer is False
