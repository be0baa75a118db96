"""This build: its version and the commit it was made from, as `cluster-bot --version`,
`db status`, the metrics' `clusterbot_build_info{version,commit}` and the image's OCI labels
say them.

The version is kept by hand (pyproject.toml's `version`, the newest release in CHANGELOG.md);
the commit comes from git: the `REVISION` file a build writes beside this module (setup.py, into
a wheel built from a checkout; the image build, which has no `.git`, from what `make image`
passes in), else the checkout this module runs from (an editable install), else `unknown`.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
REVISION_FILE = HERE / "REVISION"
UNKNOWN = "unknown"


@functools.cache
def version() -> str:
    """This build's version, as installed (pyproject.toml's `version`); read once (the
    package's metadata, parsed: ~40 ms)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("cluster-bot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return UNKNOWN


@functools.cache
def commit() -> str:
    """The full git commit this build was made from, or `unknown`."""
    try:
        written = REVISION_FILE.read_text(encoding="utf-8").strip()
    except OSError:
        written = ""
    if written:
        return written
    return checkout_commit(HERE)


def checkout_commit(directory: Path) -> str:
    """HEAD of the git checkout `directory` is tracked in as this module's own directory
    (`bot/observability/`), not of a repository that merely contains an installed copy (a
    virtualenv inside a checkout); `-dirty` after it when the product's files (bot/, storage/,
    pyproject.toml) differ from it."""
    found = _git(directory, "rev-parse", "HEAD", "--show-prefix", "--show-toplevel")
    lines = found.splitlines() if found is not None else []
    if len(lines) != 3 or lines[1] != "bot/observability/":
        return UNKNOWN
    head, top = lines[0], lines[2]
    clean = _git(Path(top), "diff", "--quiet", "HEAD", "--", "bot", "storage", "pyproject.toml")
    return head if clean is not None else f"{head}-dirty"


def _git(directory: Path, *argv: str) -> str | None:
    """git's output, or None when it fails (or there is no git)."""
    try:
        done = subprocess.run(["git", "-C", str(directory), *argv], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def describe() -> str:
    """`0.2.0 (commit 1a2b3c…)`: what `cluster-bot --version` prints after its name."""
    return f"{version()} (commit {commit()})"


if __name__ == "__main__":  # `make image` and setup.py ask this file (stdlib only) for the commit
    print(commit())  # noqa: T201
