"""The README and docs as a reader meets them: a README short enough to read in five minutes,
free of the ledger's commit hashes and host ids, and links that lead somewhere."""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PAGES = sorted([README, os.path.join(ROOT, "CHANGELOG.md")]
               + glob.glob(os.path.join(ROOT, "docs", "*.md"))
               + glob.glob(os.path.join(ROOT, "docs", "data", "*", "README.md")))
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# A commit hash as the docs write them: 7 to 40 hex digits with a letter and a digit in it.
_COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def host_ids():
    """The host ids the ledger's Hosts table defines (docs/measurements.md)."""
    ledger = read(os.path.join(ROOT, "docs", "measurements.md"))
    table = ledger.split("## Hosts", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", table, re.M)


def slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    for heading in re.findall(r"^#+ (.+)$", _FENCE.sub("", read(path)), re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def test_the_readme_reads_in_five_minutes():
    assert len(read(README).split()) <= 1200


def test_the_readme_names_no_commit_and_no_host_id():
    text = read(README)
    assert not _COMMIT.findall(text)
    ids = host_ids()
    assert len(ids) >= 5  # the ledger's table was found
    assert not [host for host in ids if host in text]


def test_the_checks_catch_a_commit_and_a_host():
    assert _COMMIT.findall("measured at commit `d375501` on") == ["d375501"]
    assert not _COMMIT.findall("runs/pong-20261126-090000 and 2000000 steps")
    assert "epyc-avx2" in host_ids()


def links():
    for page in PAGES:
        for target in _LINK.findall(_FENCE.sub("", read(page))):
            if not re.match(r"[a-z]+:", target):
                yield os.path.relpath(page, ROOT), target


@pytest.mark.parametrize("page,target", sorted(set(links())))
def test_every_link_resolves(page, target):
    path, _, anchor = target.partition("#")
    file = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path)) if path \
        else os.path.join(ROOT, page)
    assert os.path.exists(file), f"{page}: {target}: no such file"
    if anchor and file.endswith(".md"):
        assert anchor in anchors(file), f"{page}: {target}: no such heading"


def test_the_slugs_are_githubs():
    assert slug("Breakout, `--preset dopamine`, against Dopamine's published DQN") == \
        "breakout---preset-dopamine-against-dopamines-published-dqn"
    assert slug("The samplers alone at W = 8 to 64 (`benchmarks/speedtest.py`)") == \
        "the-samplers-alone-at-w--8-to-64-benchmarksspeedtestpy"


def readme_test_block(text):
    """The commands of the fenced block under the README's "## Tests" heading."""
    section = text.split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```[^\n]*\n(.*?)^```", section, re.M | re.S).group(1)
    return [line.strip() for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def ci_commands(text):
    """The commands .ci/run runs between its `# README "Tests" begins` and `ends` lines, and
    any install, lint or test command it runs outside them."""
    inside, outside, between = [], [], False
    for line in text.splitlines():
        line = line.strip()
        if line == '# README "Tests" begins':
            between = True
        elif line == '# README "Tests" ends':
            between = False
        elif line and not line.startswith("#"):
            if between:
                inside.append(line)
            elif re.match(r"(python3? -m )?(pip|pytest|ruff)\b", line):
                outside.append(line)
    return inside, outside


def test_ci_runs_exactly_the_readmes_test_block():
    shown = readme_test_block(read(README))
    inside, outside = ci_commands(read(os.path.join(ROOT, ".ci", "run")))
    assert shown and shown == inside
    assert not outside
    # A fresh machine passes from the README alone: the block installs the test tools and
    # both optional backends the suite tests, then lints and runs the whole suite.
    assert shown[0].startswith("pip install -e ") and all(
        extra in shown[0] for extra in ("test", "jax", "ray"))
    assert shown[1:] == ["ruff check .", "python -m pytest"]
    assert 'python -m pytest -m "not slow"' in read(README)  # the fast tier


def test_the_ci_check_catches_a_difference():
    readme = "x\n## Tests\n\n```bash\npip install -e \".[test]\"\npython -m pytest\n```\n"
    ci = ('set -e\n# README "Tests" begins\npip install -e ".[test]"\npython -m pytest -x\n'
          '# README "Tests" ends\npython -m pip install -r requirements.txt\n')
    inside, outside = ci_commands(ci)
    assert readme_test_block(readme) == ["pip install -e \".[test]\"", "python -m pytest"]
    assert inside == ["pip install -e \".[test]\"", "python -m pytest -x"]
    assert outside == ["python -m pip install -r requirements.txt"]


def _requirements(path):
    lines = (line.split("#", 1)[0].strip() for line in open(path, encoding="utf-8"))
    return sorted(line for line in lines if line)


def test_the_requirements_files_hold_the_packages_pins():
    """requirements.txt is pyproject's dependencies with the ray and test extras, and
    requirements-jax.txt the jax extra: an install from either file is the README's."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    extras = project["optional-dependencies"]
    assert _requirements(os.path.join(ROOT, "requirements.txt")) == sorted(
        project["dependencies"] + extras["ray"] + extras["test"])
    assert _requirements(os.path.join(ROOT, "requirements-jax.txt")) == sorted(extras["jax"])


def test_every_page_tells_one_jax_install():
    """TensorFlow installs with every install and stays the default; the `jax` extra adds JAX.
    No page installs JAX another way or says it needs no TensorFlow."""
    from fast_dqn.run.settings.flags import BACKEND_HELP
    texts = {os.path.relpath(page, ROOT): read(page) for page in PAGES}
    texts["--help"] = BACKEND_HELP
    texts["requirements-jax.txt"] = read(os.path.join(ROOT, "requirements-jax.txt"))
    for name, text in texts.items():
        flat = " ".join(text.split())
        assert "-r requirements-jax.txt" not in flat, name
        for claim in ("needs no TensorFlow", "JAX, without TensorFlow", "(TensorFlow unused)"):
            assert claim not in flat, (name, claim)
    for name in ("README.md", "docs/options.md", "docs/gpu.md", "--help",
                 "requirements-jax.txt"):
        assert '".[jax]"' in texts[name] or "'.[jax]'" in texts[name], name


@pytest.mark.parametrize("page", PAGES, ids=lambda page: os.path.relpath(page, ROOT))
def test_the_docs_speak_of_the_project_not_of_how_the_work_was_organised(page):
    flat = " ".join(read(page).split())
    found = re.findall(r"(?i)\bthis session\b|\bthe session's first\b|\bfirst session with\b"
                       r"|\bissue \d+'s\b", flat)
    assert not found, found


# What a user reads names the project's own things: no path outside the repository, and no
# word of the machinery that once ran a measurement (its folders, its calls, its limits).
MACHINERY = re.compile(r"(?i)\.\./shared\b|\bdevice tool\b|\bdevice machine\b|\bfiles_at\b"
                       r"|\bdevice time\b|\bprepare\.sh\b|/work/")
READ_BY_USERS = PAGES + sorted(glob.glob(os.path.join(ROOT, "benchmarks", "*.sh"))
                               + glob.glob(os.path.join(ROOT, "benchmarks", "*.py"))
                               + glob.glob(os.path.join(ROOT, "fast_dqn", "**", "*.py"),
                                           recursive=True))


def test_what_users_read_names_no_path_outside_the_repository_and_no_machinery():
    found = {os.path.relpath(path, ROOT): MACHINERY.findall(read(path))
             for path in READ_BY_USERS}
    assert not {path: words for path, words in found.items() if words}
    assert MACHINERY.findall("see ../shared/gpu/prepare.sh and the device tool's files_at") \
        == ["../shared", "prepare.sh", "device tool", "files_at"]
