"""Expand-then-contract: a build runs on a database a newer build migrated when the newer
revisions say it can, and refuses with one line otherwise (storage/schema.py).

The newer build is this tree plus one migration (tests/releases.py), migrated in-process by
pointing storage.migrations at the copy; the real processes' side-by-side run on PostgreSQL is
tests/test_rolling_upgrade.py. Each test runs on a SQLite file and on PostgreSQL (`db_url`).
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

import storage.migrations as migrations_pkg
from bot.observability.dbstatus import describe
from storage.db import Database
from storage.migrations import MARKER, head_revision, migrations, oldest_compatible
from storage.schema import SchemaIncompatible
from tests.releases import NEXT_REVISION, migrations_dir, next_release


def test_every_migration_says_whether_the_previous_release_runs_on_it():
    found = migrations()
    files = sorted(p.name for p in (migrations_pkg.MIGRATIONS_DIR / "versions").glob("*.py"))
    assert sorted(m.path.name for m in found) == files  # one chain, every file on it
    assert found[-1].revision == head_revision()
    undeclared = [m.path.name for m in found if m.compatible_with_previous is None]
    assert undeclared == [], f"add `{MARKER} = True|False` (see storage/migrations/__init__.py)"


def test_oldest_compatible_walks_back_over_compatible_steps_only():
    by_id = {m.revision: m for m in migrations()}
    head = head_revision()
    oldest = oldest_compatible(head)
    step = by_id[head]
    while step.revision != oldest:  # every step between is marked compatible…
        assert step.compatible_with_previous, step
        step = by_id[step.down_revision or ""]
    # …and the walk stopped at one that isn't (or at the first migration)
    assert not by_id[oldest].compatible_with_previous or by_id[oldest].down_revision is None


async def _versions(db: Database) -> list[str]:
    async with db.engine.connect() as conn:
        return [str(v) for (v,) in await conn.execute(
            sa.text("SELECT version_num FROM alembic_version"))]


async def _compat(db: Database) -> list[tuple[str, str]]:
    async with db.engine.connect() as conn:
        return [(str(r), str(o)) for r, o in await conn.execute(
            sa.text("SELECT revision, oldest_compatible FROM schema_compat"))]


async def _migrate_as_next(db_url: str, tmp_path, monkeypatch, *, compatible: bool) -> None:
    """Migrate the database as the next release would (this tree plus one migration)."""
    release = next_release(tmp_path, compatible=compatible)
    with monkeypatch.context() as patch:
        patch.setattr(migrations_pkg, "MIGRATIONS_DIR", migrations_dir(release))
        newer = Database(db_url)
        try:
            await newer.migrate()
        finally:
            await newer.dispose()


async def test_migrate_records_the_oldest_code_that_runs_on_the_schema(db_url):
    db = Database(db_url)
    try:
        await db.migrate()
        assert await _compat(db) == [(head_revision(), oldest_compatible(head_revision()))]
        status = await db.schema_status()
        assert status.current == (head_revision(),) and not status.ahead and status.pending == []
        assert describe(status, version="x")[1] == 0
    finally:
        await db.dispose()


async def test_migrate_corrects_a_record_made_before_a_marker_was_corrected(db_url):
    """0016 and 0018 were marked compatible and are not (issue 26 item 2): a database migrated
    to the head before the correction says releases before them may run. `migrate` with
    nothing to apply rewrites the record, so those releases refuse from then on."""
    db = Database(db_url)
    try:
        await db.migrate()
        async with db.engine.begin() as conn:
            await conn.execute(sa.text("UPDATE schema_compat SET oldest_compatible = '0004'"))
        assert (await db.schema_status()).stale
        await db.migrate()
        assert await _compat(db) == [(head_revision(), oldest_compatible(head_revision()))]
        assert oldest_compatible(head_revision()) >= "0018"
        assert not (await db.schema_status()).stale
    finally:
        await db.dispose()


async def test_a_build_runs_on_a_database_ahead_by_compatible_revisions(db_url, tmp_path,
                                                                         monkeypatch):
    db = Database(db_url)
    try:
        await db.migrate()
        await _migrate_as_next(db_url, tmp_path, monkeypatch, compatible=True)
        assert await _versions(db) == [NEXT_REVISION]
        assert (await _compat(db))[0][0] == NEXT_REVISION
        # Before: alembic's "Can't locate revision identified by '9001_next'".
        restarted = Database(db_url)  # this build's replica, starting again
        try:
            await restarted.migrate()
            status = await restarted.schema_status()
            assert status.ahead and status.runnable and status.pending == []
            async with restarted.transaction() as repos:  # and it works: a read and a write
                assert await repos.leases.holder("sweeps", now=_now()) is None
            await restarted.probe(name="old-replica")
        finally:
            await restarted.dispose()
        assert await _versions(db) == [NEXT_REVISION]  # left as the newer build made it
        lines, code = describe(status, version="x")
        assert code == 0 and lines[-1] == "can run: yes (without migrating)", lines
    finally:
        await db.dispose()


async def test_audit_export_reads_a_database_ahead_by_compatible_revisions(db_url, tmp_path,
                                                                          monkeypatch):
    from bot.app.cli import _export_month

    db = Database(db_url)
    try:
        await db.migrate()
    finally:
        await db.dispose()
    await _migrate_as_next(db_url, tmp_path, monkeypatch, compatible=True)
    assert (await _export_month(db_url, month=None)).startswith("at,")  # the CSV's header


async def test_a_build_refuses_a_database_ahead_by_an_incompatible_revision(db_url, tmp_path,
                                                                            monkeypatch):
    db = Database(db_url)
    try:
        await db.migrate()
        await _migrate_as_next(db_url, tmp_path, monkeypatch, compatible=False)
        before = await _compat(db)
        restarted = Database(db_url)
        try:
            with pytest.raises(SchemaIncompatible) as refused:
                await restarted.migrate()
        finally:
            await restarted.dispose()
        line = str(refused.value)
        assert "\n" not in line
        assert re.search(rf"at revision {NEXT_REVISION}, which this build \(head "
                         rf"{head_revision()}\) doesn't know, and it needs code at revision "
                         rf"{NEXT_REVISION} or newer", line), line
        assert await _versions(db) == [NEXT_REVISION] and await _compat(db) == before
        lines, code = describe(await db.schema_status(), version="x")
        assert code == 2 and lines[-1].startswith("can run: no"), lines
    finally:
        await db.dispose()


async def test_an_ahead_database_without_the_record_is_refused(db_url):
    db = Database(db_url)
    try:
        await db.migrate()
        async with db.engine.begin() as conn:  # as a newer build from before the record would
            await conn.execute(sa.text("UPDATE alembic_version SET version_num = 'zzzz'"))
            await conn.execute(sa.text("DELETE FROM schema_compat"))
        with pytest.raises(SchemaIncompatible, match="doesn't record which older code"):
            await db.migrate()
    finally:
        await db.dispose()


async def test_db_status_says_what_is_pending_and_whether_running_replicas_survive_it(db_url):
    db = Database(db_url)
    try:
        lines, code = describe(await db.schema_status(), version="x")
        assert code == 3 and lines[0] == "database revision: none (an empty database)", lines
        await db.migrate()
        async with db.engine.begin() as conn:  # one migration behind, as after a deploy of N+1
            await conn.execute(sa.text("DROP TABLE schema_compat"))
            await conn.execute(sa.text("UPDATE alembic_version SET version_num = '0013'"))
        lines, code = describe(await db.schema_status(), version="x")
        assert code == 3, lines
        [pending] = [line for line in lines if line.startswith("pending: ")]
        assert pending.startswith("pending: 0014") and pending.endswith(head_revision()), lines
        # 0016 and 0018 are not compatible with the code before them (issue 26 item 2).
        assert any(line.startswith("replicas at 0013 keep running after it: no")
                   for line in lines), lines
    finally:
        await db.dispose()


def _now():
    from storage.replica import wall_clock

    return wall_clock()
