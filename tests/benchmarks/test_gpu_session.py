"""benchmarks/gpu_session.sh: it writes only into a new or empty OUT and removes only what it
wrote; without a GPU it stops in one line unless GPU_SESSION_CPU=1, whose table says CPU on
every row. Each refusal comes before any work, so each test takes about a second. The
refusals are benchmarks/gpu_probe.sh's too (session_checks.sh): both scripts are tried."""

import os
import subprocess
import sys
import tarfile

import pytest
from helpers import ROOT, hang_guard

SCRIPTS = ("gpu_session.sh", "gpu_probe.sh")


def tools(folder, gpu):
    """A PATH whose nvidia-smi lists a GPU or fails, and whose python3 is this Python."""
    os.makedirs(folder)
    smi = os.path.join(folder, "nvidia-smi")
    with open(smi, "w") as f:
        f.write('#!/bin/sh\necho "GPU 0: NVIDIA Stand-in (UUID: GPU-0)"\n' if gpu else
                "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    os.chmod(smi, 0o755)
    os.symlink(sys.executable, os.path.join(folder, "python3"))
    return folder + os.pathsep + os.environ["PATH"]


def session(cwd, path, script="gpu_session.sh", **given):
    """Run a script in `cwd` with only the settings `given`; (exit status, stdout, stderr)."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("OUT", "GPU_SESSION_CPU", "GPU_SESSION_SECONDS")}
    env.update(PATH=path, PYTHONPATH=ROOT, **given)
    done = subprocess.run(["bash", os.path.join(ROOT, "benchmarks", script)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=hang_guard(120))
    return done.returncode, done.stdout, done.stderr


def snapshot(folder):
    """{path: (bytes, mtime)} of everything under `folder`, folders included."""
    found = {}
    for where, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(where, name)
            data = os.readlink(path) if os.path.islink(path) else \
                open(path, "rb").read() if name in files else None
            found[os.path.relpath(path, folder)] = (data, os.lstat(path).st_mtime_ns)
    return found


@pytest.fixture
def place(tmp_path):
    """A work folder (a checkout with a file of the user's) and a PATH without a GPU."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "notes.txt").write_text("the user's\n")
    return work, tools(str(tmp_path / "bin"), gpu=False)


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("out", [".", "/", "home", "checkout", "mine", "file", "dotgit"])
def test_an_unsafe_out_is_refused_in_one_line_before_anything_changes(place, tmp_path, out,
                                                                      script):
    work, path = place
    home = tmp_path / "home"
    home.mkdir()  # empty, and refused all the same: it is the user's home
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "figures.csv").write_text("a,b\n1,2\n")
    (tmp_path / "dotgit" / ".git").mkdir(parents=True)
    given = {".": ".", "/": "/", "home": str(home), "checkout": ROOT, "mine": str(mine),
             "file": str(work / "notes.txt"), "dotgit": str(tmp_path / "dotgit")}[out]
    before = snapshot(tmp_path)
    # GPU_SESSION_CPU=1: the OUT checks alone stand between the call and its work.
    code, stdout, stderr = session(work, path, script, OUT=given, HOME=str(home),
                                   GPU_SESSION_CPU="1")
    lines = stderr.splitlines()
    assert code == 2 and len(lines) == 1 and stdout == "", stderr
    assert lines[0].startswith(f"{script}: OUT={given}") and \
        "give OUT a new or empty folder" in lines[0] and "Traceback" not in stderr
    assert snapshot(tmp_path) == before  # the user's files untouched, nothing created


@pytest.mark.parametrize("script", SCRIPTS)
def test_without_a_gpu_it_stops_in_one_line_and_creates_nothing(place, tmp_path, script):
    work, path = place
    before = snapshot(tmp_path)
    code, stdout, stderr = session(work, path, script, OUT=str(tmp_path / "new"))
    lines = stderr.splitlines()
    assert code == 3 and len(lines) == 1 and stdout == "", stderr
    assert lines[0].startswith(f"{script}: no GPU here") and "GPU_SESSION_CPU=1" in lines[0]
    assert snapshot(tmp_path) == before and not (tmp_path / "new").exists()


def test_a_gpu_the_backend_cannot_see_is_no_gpu(place, tmp_path):
    """The driver lists a GPU, but JAX runs on the CPU: the figures would be the CPU's."""
    pytest.importorskip("jax")
    work, _ = place
    path = tools(str(tmp_path / "gpu-bin"), gpu=True)
    before = snapshot(tmp_path)
    code, stdout, stderr = session(work, path, OUT=str(tmp_path / "new"),
                                   KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    assert code == 3 and len(stderr.splitlines()) == 1 and stdout == "", stderr
    assert "jax sees none" in stderr and "GPU_SESSION_CPU=1" in stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("existing", [False, True], ids=["new", "empty"])
def test_a_cpu_session_says_cpu_on_every_row_and_packs_only_its_files(place, tmp_path,
                                                                       existing):
    """GPU_SESSION_SECONDS=0 skips every part: the header, the table and the packing run."""
    work, path = place
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    code, stdout, stderr = session(work, path, OUT=str(out), GPU_SESSION_CPU="1",
                                   GPU_SESSION_SECONDS="0")
    assert code == 0, stderr
    assert sorted(os.listdir(out)) == ["gpu-session.tgz", "table.md"]
    table = (out / "table.md").read_text().splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 25 and all(row.startswith("| CPU: ") for row in rows)
    assert "| row | measured on the CPU | GPU goal |" in table
    assert not any("on one GPU" in row for row in rows)
    with tarfile.open(out / "gpu-session.tgz") as packed:
        assert packed.getnames() == ["header.txt"]
        header = packed.extractfile("header.txt").read().decode()
    assert "device CPU (GPU_SESSION_CPU=1)" in header
    assert sorted(os.listdir(work)) == [".git", "notes.txt"]  # no suite ran: no runs/


def test_without_out_it_writes_a_new_folder_under_runs_and_packs_nothing(place):
    work, path = place
    code, _, stderr = session(work, path, GPU_SESSION_CPU="1", GPU_SESSION_SECONDS="0")
    assert code == 0, stderr
    [folder] = os.listdir(work / "runs")
    assert folder.startswith("gpu-session-")
    assert sorted(os.listdir(work / "runs" / folder)) == ["header.txt", "table.md"]


@pytest.mark.slow  # the probe at --tiny's sizes on the CPU: about half a minute
def test_a_cpu_probe_writes_its_table_and_figures_into_out(place, tmp_path):
    pytest.importorskip("jax")
    work, path = place
    out = tmp_path / "out"
    code, stdout, stderr = session(work, path, "gpu_probe.sh", OUT=str(out),
                                   GPU_SESSION_CPU="1")
    assert code == 0, stderr[-3000:]
    assert sorted(os.listdir(out)) == ["header.txt", "probe.json", "probe.md"]
    assert "device CPU (GPU_SESSION_CPU=1)" in (out / "header.txt").read_text()
    table = (out / "probe.md").read_text()
    assert table.startswith("# Probe: device: CPU (JAX found no GPU); Keras backend: jax")
    assert "tiny sizes" in table.splitlines()[2]
    assert sorted(os.listdir(work)) == [".git", "notes.txt"]  # nothing beside OUT
