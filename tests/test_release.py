"""A version that means something: `cluster-bot --version`, the build-info metric, `make image`'s
tag and labels and CHANGELOG.md say the same release and commit (the image's own labels and
metric: tests/test_image.py). The commit comes from git in any checkout, a clean clone without
tags too, and from the file the image build writes where there is no git."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from bot.observability import build
from tests.releases import REPO, head_commit, pyproject_version


def _git(*argv: str, cwd=REPO) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def test_the_version_says_the_release_and_the_commit():
    done = subprocess.run([sys.executable, "-m", "bot", "--version"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "bot", "storage",
                            "pyproject.toml"], cwd=REPO, check=False).returncode != 0
    commit = head_commit() + ("-dirty" if dirty else "")
    assert (done.returncode, done.stdout) == (
        0, f"cluster-bot {pyproject_version()} (commit {commit})\n"), done.stderr


def test_a_clean_clone_without_tags_knows_its_commit(tmp_path):
    # What CI checks out: one commit, no tags.
    clone = tmp_path / "clone"
    _git("clone", "--quiet", "--depth", "1", "--no-tags", f"file://{REPO}", str(clone))
    assert _git("tag", cwd=clone) == ""
    assert build.checkout_commit(clone / "bot" / "observability") == _git(
        "rev-parse", "HEAD", cwd=clone)


def test_without_git_the_commit_is_unknown_not_another_repositorys(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(REPO / "bot" / "observability", copy, ignore=shutil.ignore_patterns("*.pyc"))
    assert build.checkout_commit(copy) == "unknown"  # an sdist, a copy: no git around it
    # Installed into a virtualenv inside some checkout: that checkout's HEAD is not this build's.
    outer = tmp_path / "outer"
    installed = outer / ".venv" / "lib" / "site-packages" / "bot" / "observability"
    shutil.copytree(copy, installed)
    _git("init", "--quiet", cwd=outer)
    _git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A", cwd=outer)
    _git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "x",
         cwd=outer)
    assert build.checkout_commit(installed) == "unknown"


def test_the_revision_file_an_image_build_writes_comes_first(tmp_path, monkeypatch):
    written = tmp_path / "REVISION"
    written.write_text("0123456789abcdef0123456789abcdef01234567-dirty\n")
    monkeypatch.setattr(build, "REVISION_FILE", written)
    build.commit.cache_clear()
    try:
        assert build.commit() == "0123456789abcdef0123456789abcdef01234567-dirty"
        assert build.describe().endswith("(commit 0123456789abcdef0123456789abcdef01234567-dirty)")
    finally:
        build.commit.cache_clear()


def test_make_image_tags_and_labels_the_image_with_this_release():
    if shutil.which("make") is None:
        pytest.skip("no make here")
    args = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(REPO), "image-args"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.split()
    given = dict(arg.split("=", 1) for arg in args if "=" in arg)
    assert given["VERSION"] == pyproject_version()
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", given["REVISION"]) and \
        given["REVISION"].startswith(head_commit())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", given["CREATED"])
    assert args[args.index("--tag") + 1] == f"cluster-bot:{pyproject_version()}"
    dockerfile = (REPO / "Dockerfile").read_text()
    for label, arg in (("version", "VERSION"), ("revision", "REVISION"), ("source", "SOURCE"),
                       ("created", "CREATED")):
        assert f'org.opencontainers.image.{label}="${{{arg}}}"' in dockerfile


RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d\d-\d\d))?$", re.M)
DUTIES = ("Migrations", "Slack scopes", "Settings", "Alerts", "Rolling back")


def test_the_changelog_starts_with_this_release_and_says_what_operators_must_do():
    text = (REPO / "CHANGELOG.md").read_text()
    releases = list(RELEASE.finditer(text))
    assert releases[0]["version"] == "Unreleased", "Keep a Changelog: [Unreleased] first"
    assert releases[1]["version"] == pyproject_version() and releases[1]["date"], \
        "the newest release in CHANGELOG.md is pyproject.toml's version, dated"
    for this, after in zip(releases[1:], [*releases[2:], None], strict=True):
        body = text[this.end():after.start() if after else len(text)]
        assert "### Operators" in body, this["version"]
        operators = body.split("### Operators", 1)[1].split("\n### ", 1)[0]
        for duty in DUTIES:
            assert f"- **{duty}:**" in operators, (this["version"], duty)
    migrations = text[releases[1].end():].split("- **Migrations:**", 1)[1].split("\n- ", 1)[0]
    heads = re.findall(r"`(\d{4})`", migrations)
    assert heads and all(list((REPO / "storage/migrations/versions").glob(f"{h}_*.py"))
                         for h in heads)


@pytest.mark.slow
def test_a_wheel_built_from_a_checkout_remembers_its_commit(tmp_path):
    """The guide's `pip install .` from a checkout: setup.py writes the commit into the wheel
    (an installed copy has no git around it). pip builds from the index this machine uses."""
    clone = tmp_path / "clone"
    _git("clone", "--quiet", "--depth", "1", "--no-tags", f"file://{REPO}", str(clone))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                           "--wheel-dir", str(tmp_path / "dist"), str(clone)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp_path / "dist").glob("cluster_bot-*.whl")
    assert wheel.name.startswith(f"cluster_bot-{pyproject_version()}-")
    with zipfile.ZipFile(wheel) as archive:
        written = archive.read("bot/observability/REVISION").decode()
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
    assert written == _git("rev-parse", "HEAD", cwd=clone) + "\n"
    # The product alone: no simulator, no local Slack (they install for `make run` and the
    # tests another way: the Makefile's cluster-bot-devtools.pth).
    assert tops == {"bot", "storage", f"cluster_bot-{pyproject_version()}.dist-info"}, tops


def test_the_dev_venv_finds_the_development_tools_outside_the_product():
    done = subprocess.run([sys.executable, "-c", "import aireserve_sim, devslack, importlib."
                           "metadata as m; print(aireserve_sim.__file__, devslack.__file__, "
                           "m.distribution('cluster-bot').read_text('top_level.txt'))"],
                          cwd="/", capture_output=True, text=True, timeout=60, check=False,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{REPO}/aireserve_sim/") and f" {REPO}/devslack/" in done.stdout
