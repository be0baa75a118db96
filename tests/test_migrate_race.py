"""Two `cluster-bot migrate` racing on one empty database, as real processes: the second waits
for the first (PostgreSQL's advisory lock, SQLite's BEGIN IMMEDIATE), then finds nothing left
to do. Both exit 0 with nothing on stderr but log lines; the schema is whole, at this build's
head, applied once (alembic would fail on a second CREATE TABLE), its compatibility recorded once.
"""

from __future__ import annotations

import asyncio
import sys

import pytest
import sqlalchemy as sa

from storage.db import Database
from storage.migrations import head_revision, oldest_compatible
from tests.procs import REPO

pytestmark = pytest.mark.procs(lane="restarts")  # kills and restarts: tests/conftest.py


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres",
                                                         marks=pytest.mark.postgres)])
async def test_two_migrates_at_once_apply_the_schema_once(kind, tmp_path, request):
    url = (request.getfixturevalue("pg_url") if kind == "postgres"
           else f"sqlite:///{tmp_path / 'bot.db'}")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "DATABASE_URL": url}
    procs = [await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "migrate", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE) for _ in range(2)]
    results = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 120)
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err, err.decode()
    db = Database(url)
    try:
        async with db.engine.connect() as conn:
            versions = (await conn.execute(sa.text("SELECT version_num FROM alembic_version")))
            assert [v for (v,) in versions] == [head_revision()]
            compat = (await conn.execute(sa.text("SELECT revision, oldest_compatible FROM "
                                                 "schema_compat"))).all()
            assert [tuple(r) for r in compat] == [(head_revision(),
                                                   oldest_compatible(head_revision()))]
    finally:
        await db.dispose()
