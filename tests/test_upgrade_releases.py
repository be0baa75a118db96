"""Forward from every earlier release (issue 26 item 2): each release in tests/releases.py
RELEASES (its `bot/` and `storage/` from git history) creates its own schema with its own
`migrate` and stores two live clusters with its own code (one running, one provisioning: they
bill); then THIS build migrates that database to its head with the clusters held — both still
live, unchanged, read by this build's code — and records which older code may run on the
result. On a SQLite file and on PostgreSQL; the releases side by side, one process each."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.domain.models import ClusterState
from storage.db import Database
from storage.migrations import head_revision, oldest_compatible
from tests.pg import PgServer
from tests.releases import RELEASES
from tests.test_rollback_releases import _archive

# Earlier releases built from git history: `make test-boundary` (tests/conftest.py).
pytestmark = pytest.mark.boundary

# The release's own code: its migrate, its records, its repository (every release since 0014
# has these names).
_OLD = """\
import asyncio, sys
from datetime import UTC, datetime
from bot.domain.models import ClusterRecord, ClusterState, ShapeSpec
from storage.db import Database

async def main(url):
    db = Database(url)
    try:
        await db.migrate()
        now = datetime.now(UTC)
        async with db.transaction() as repos:
            for cid, state in (("clu_run", ClusterState.RUNNING),
                               ("clu_boot", ClusterState.PROVISIONING)):
                await repos.clusters.add(ClusterRecord(
                    id=cid, request_id=None, owner_id="U0ALICE", channel_id="C0GENERAL",
                    name=cid, shape=ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8,
                                              nodes=2),
                    accelerator_name="H100 SXM", location="us-tx", hourly_cents=2400,
                    status=state, created_at=now, updated_at=now,
                    ready_at=now if state is ClusterState.RUNNING else None))
        print(",".join(await db.schema_versions()))
    finally:
        await db.dispose()

asyncio.run(main(sys.argv[1]))
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> Iterator[PgServer | None]:
    yield request.getfixturevalue("pg_server") if request.param == "postgres" else None


async def _old_release(release: Path, url: str, cwd: Path, cores: asyncio.Semaphore) -> str:
    async with cores:
        return await _run_old(release, url, cwd)


async def _run_old(release: Path, url: str, cwd: Path) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _OLD, url, cwd=cwd, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(release)})
    out, _ = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, out.decode()
    return out.decode().strip().splitlines()[-1]


async def _forward(url: str) -> list[tuple[str, ClusterState]]:
    db = Database(url)
    try:
        await db.migrate()
        assert await db.schema_versions() == [head_revision()]
        status = await db.schema_status()
        assert status.recorded_oldest == oldest_compatible(head_revision())
        async with db.transaction() as repos:
            return sorted((c.id, c.status) for c in await repos.clusters.list_live())
    finally:
        await db.dispose()


@pytest.mark.slow
async def test_every_earlier_release_migrates_forward_to_this_head_with_live_clusters_held(
        tmp_path: Path, backend: PgServer | None) -> None:
    archives = {head: _archive(commit, tmp_path / f"release-{head}")
                for head, commit in RELEASES}
    missing = [head for head, where in archives.items() if where is None]
    if missing:
        pytest.skip(f"releases {missing} are not in this clone: fetch its history")
    urls: dict[str, str] = {}
    names: list[str] = []
    for head in archives:
        if backend is None:
            urls[head] = f"sqlite:///{tmp_path / f'{head}.db'}"
        else:
            names.append(backend.create_database())
            urls[head] = backend.url(names[-1])
    try:
        # Each release's own schema and rows: one process each, side by side.
        cores = asyncio.Semaphore(2)  # side by side, as many as the machine has cores (2)
        at = await asyncio.gather(*(_old_release(archives[head] or tmp_path, urls[head],
                                                 tmp_path, cores) for head in archives))
        assert at == list(archives), at  # each at its own head
        for head in archives:  # this build: forward, the live clusters held
            assert await _forward(urls[head]) == [
                ("clu_boot", ClusterState.PROVISIONING), ("clu_run", ClusterState.RUNNING)
            ], head
    finally:
        for name in names:
            assert backend is not None
            backend.drop_database(name)
