"""The release before is a way back: each earlier release that reached main since the schema
said which code may run on it (0014, `schema_compat`) is taken from git history (`git archive`
of the commit tests/releases.py's RELEASES names) and run against THIS build's schema: it either
runs (`db status` says `can run: yes`, exit 0, and `migrate` leaves the schema alone) or refuses
(`db status` says `can run: no`, exit 2; `migrate` says so in one line, exit 2) — never a
traceback, never exit 1 (a restart loop under `Restart=on-failure`).

The release before this one (the last listed) serving on live rows of the new build's kinds,
and the newest one turned away, on SQLite and PostgreSQL: tests/test_rollback_live.py; forward
from each release: tests/test_upgrade_releases.py.
Which releases must refuse is the schema's record (`schema_compat`), from this build's markers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from storage.db import Database
from storage.migrations import head_revision, oldest_compatible
from tests.releases import RELEASES, REPO, must_run

# Earlier releases built from git history: `make test-boundary` (tests/conftest.py).
pytestmark = pytest.mark.boundary


def _archive(commit: str, into: Path) -> Path | None:
    """bot/ and storage/ as they were at `commit`, or None when this clone doesn't have it."""
    done = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "bot",
                           "storage"], capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        return None
    with tarfile.open(fileobj=BytesIO(done.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


# Both commands in one interpreter (one import of the old release, not two): `python -m bot`
# as runpy runs it, whatever module layout that release had; each exit code and output.
_BOTH = """\
import contextlib, io, json, runpy, sys
said = []
for argv in (["db", "status"], ["migrate"]):
    sys.argv, out = ["bot", *argv], io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_module("bot", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback; traceback.print_exc(); code = 1
    said.append([code, out.getvalue()])
print(json.dumps(said))
"""


async def _cli(release: Path, cwd: Path, url: str) -> list[tuple[int, str]]:
    """`db status`, then (if it said yes) `migrate`, of the release at `release`."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _BOTH, cwd=cwd, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(release), "DATABASE_URL": url})
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    return [(code, text) for code, text in json.loads(out.decode().strip().splitlines()[-1])]


@pytest.mark.slow
@pytest.mark.parametrize(("head", "commit"), RELEASES, ids=[head for head, _ in RELEASES])
async def test_an_earlier_release_runs_on_this_schema_or_refuses_in_one_line(tmp_path, head,
                                                                              commit):
    release = _archive(commit, tmp_path / "release")
    if release is None:
        pytest.skip(f"commit {commit} (head {head}) is not in this clone: fetch its history")
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    db = Database(url)
    try:
        await db.migrate()  # this build's schema
    finally:
        await db.dispose()
    [(code, said), (migrated, then)] = await _cli(release, tmp_path, url)
    runs = must_run(head)
    assert "Traceback" not in said and code == (0 if runs else 2), said
    assert f"can run: {'yes' if runs else 'no'}" in said, said
    assert "Traceback" not in then and migrated == (0 if runs else 2), then
    if not runs:  # its migrate refuses in one line
        assert len(then.strip().splitlines()) == 1, then
    db = Database(url)
    try:  # the old one changed nothing
        assert await db.schema_versions() == [head_revision()]
        assert (await db.schema_status()).recorded_oldest == oldest_compatible(head_revision())
    finally:
        await db.dispose()
