"""Alembic migrations: they build the schema the tables describe, once, from anywhere.

The tests taking `db_url` run on a SQLite file and on a fresh PostgreSQL database (the session's
throwaway server, tests/pg.py); they look at the result through SQLAlchemy's inspector and plain
SQL, the same on both. The few that are about SQLite alone (its WAL journal, its foreign-key
dance around batch rebuilds) say so.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateTable

from bot.domain.models import Approval, ClusterState, Decision, RequestStatus
from storage.db import Database
from storage.migrations import MIGRATIONS_DIR, alembic_config
from storage.rows import row_values
from storage.tables import metadata

NEW_IN_0005 = {"outbox", "leases", "dm_channels"}
TABLES = {
    "quotes", "requests", "approvals", "clusters", "messages", "notices", "volumes", "audit",
    "action_claims", "request_quotes", "launch_intents", "terminations", "readiness",
    "extensions", "schema_compat", "duties", "digests", "digest_members", "templates",
    "slack_installations", "slack_oauth_states", "slack_routes", "slack_org_workspaces",
} | NEW_IN_0005
HEAD = "0024"
SAGA = {"request_quotes", "launch_intents"}  # 0004
CLAIMS = {"action_claims"}  # 0006
TERMINATIONS = {"terminations"}  # 0007
# everything after 0003
LATER = SAGA | NEW_IN_0005 | CLAIMS | TERMINATIONS | {"readiness", "extensions", "schema_compat",
                                                       "duties", "digests", "digest_members",
                                                       "templates", "slack_installations",
                                                       "slack_oauth_states", "slack_routes",
                                                       "slack_org_workspaces"}


def _sqlite_tables(path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {name for (name,) in rows}


async def _look(db: Database, fn, *args):
    """`fn(connection, *args)` on a connection of its own (sync-facing: the inspector is)."""
    async with db.engine.connect() as conn:
        return await conn.run_sync(fn, *args)


def _tables(conn: Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def _version(conn: Connection) -> list[str]:
    return [v for (v,) in conn.execute(sa.text("SELECT version_num FROM alembic_version"))]


def _columns(conn: Connection, table: str) -> set[str]:
    return {column["name"] for column in sa.inspect(conn).get_columns(table)}


def _indexes(conn: Connection) -> set[str]:
    inspector = sa.inspect(conn)
    return {index["name"] for table in inspector.get_table_names()
            for index in inspector.get_indexes(table) if index["name"]}


def _rows(conn: Connection, sql: str) -> list[tuple]:
    return [tuple(row) for row in conn.execute(sa.text(sql))]


def _broken_foreign_keys(conn: Connection) -> list[tuple]:
    # PostgreSQL never lets a row break a foreign key; SQLite only checks while enforcing.
    if conn.dialect.name != "sqlite":
        return []
    return _rows(conn, "PRAGMA foreign_key_check")


async def test_migrate_creates_the_schema_on_an_empty_database(db_url):
    db = Database(db_url)
    try:
        await db.migrate()
        assert await _look(db, _tables) == TABLES | {"alembic_version"}
        assert await _look(db, _version) == [HEAD]
        assert {"ix_requests_status", "ix_clusters_status", "ix_notices_delivered_at",
                "ix_volumes_next_reminder_at", "ix_audit_at",
                "ix_audit_subject_id"} <= await _look(db, _indexes)
    finally:
        await db.dispose()
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_migrate_twice_is_a_no_op(db_url):
    db = Database(db_url)
    try:
        await db.migrate()
        async with db.transaction() as repos:
            await repos.session.execute(sa.text(
                "INSERT INTO messages (kind, subject_id, channel_id, ts, created_at, updated_at) "
                "VALUES ('k', 's', 'C1', '1.0', '2026-11-29 10:00:00', '2026-11-29 10:00:00')"
            ))
        await db.migrate()
        later = Database(db_url)  # another process starting later
        try:
            await later.migrate()
        finally:
            await later.dispose()
        assert await _look(db, _version) == [HEAD]
        assert await _look(db, _rows, "SELECT count(*) FROM messages") == [(1,)]
    finally:
        await db.dispose()


async def test_replicas_starting_together_migrate_once(db_url):
    # Several processes on one empty database at once: PostgreSQL's advisory lock (SQLite's
    # write lock) lets the first migrate while the others wait, then find nothing left to do.
    # Without the lock, the CREATE TABLEs of the others wait on the first's, and in one process
    # alembic's module-global `op` crosses the runs' connections: a hang, hence the timeout.
    if db_url.startswith("sqlite"):
        # An existing file, already in WAL mode: on a brand-new file, connections switching it
        # to WAL at the same instant sometimes get "database is locked" at once (no busy wait).
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
            conn.execute("PRAGMA journal_mode = WAL")
    replicas = [Database(db_url) for _ in range(4)]
    try:
        async with asyncio.timeout(60):
            await asyncio.gather(*(each.migrate() for each in replicas))
        assert await _look(replicas[0], _version) == [HEAD]
        assert await _look(replicas[0], _tables) == TABLES | {"alembic_version"}
    finally:
        for each in replicas:
            await each.dispose()


def _same_server_default(context, inspected_column, metadata_column, inspected_default,
                         metadata_default, rendered_metadata_default):
    # PostgreSQL's json type has no "=" operator, so alembic cannot ask the server whether two
    # JSON defaults are equal; compare the text PostgreSQL reports instead ('[]'::json).
    if context.dialect.name == "postgresql" and isinstance(metadata_column.type, sa.JSON):
        return inspected_default != f"{rendered_metadata_default}::json"
    return None  # alembic's own comparison


@pytest.mark.parametrize("kind", ["file", "sqlite://", pytest.param("postgres",
                                                                    marks=pytest.mark.postgres)])
async def test_migrated_schema_matches_the_table_metadata(request, tmp_path, kind):
    if kind == "postgres":
        db = Database(request.getfixturevalue("pg_url"))
    else:
        db = Database(f"sqlite:///{tmp_path / 'bot.db'}" if kind == "file" else kind)

    def diff(conn):
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": _same_server_default}
        )
        return compare_metadata(context, metadata)

    try:
        await db.migrate()
        assert await _look(db, diff) == []
    finally:
        await db.dispose()


async def test_downgrade_to_base_and_back(db_url):
    db = Database(db_url)
    try:
        await db.migrate()
        async with db.engine.begin() as conn:
            await conn.run_sync(_alembic, "downgrade", "base")
        assert await _look(db, _tables) == {"alembic_version"}
        await db.migrate()
        assert await _look(db, _tables) == TABLES | {"alembic_version"}
        assert await _look(db, _version) == [HEAD]
    finally:
        await db.dispose()


async def test_migrate_does_not_depend_on_the_working_directory(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert alembic_config().get_main_option("script_location") == str(MIGRATIONS_DIR)
    assert MIGRATIONS_DIR.is_absolute()
    db = Database(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        await db.migrate()
    finally:
        await db.dispose()
    assert _sqlite_tables(tmp_path / "bot.db") >= TABLES


def test_the_alembic_cli_path_migrates_from_database_url(db_url, monkeypatch):
    # No connection handed in: env.py builds its own engine from DATABASE_URL (and runs it in
    # an event loop of its own, hence a sync test).
    monkeypatch.setenv("DATABASE_URL", db_url)
    command.upgrade(alembic_config(), "head")

    async def tables() -> set[str]:
        db = Database(db_url)
        try:
            return await _look(db, _tables)
        finally:
            await db.dispose()

    assert asyncio.run(tables()) == TABLES | {"alembic_version"}


def test_offline_sql_for_postgresql(monkeypatch, capsys):
    # Rendering the migration for PostgreSQL without a server checks the DDL text itself.
    monkeypatch.setenv("DATABASE_URL", "postgresql://bot@localhost/bot")
    command.upgrade(alembic_config(), "head", sql=True)
    sql = capsys.readouterr().out
    assert "CREATE TABLE requests" in sql
    assert "TIMESTAMP WITH TIME ZONE" in sql
    assert "SERIAL" in sql
    assert "CONSTRAINT uq_requests_idempotency_key UNIQUE (idempotency_key)" in sql
    # 0002: plain ALTERs (no batch rebuild), defaults that suit the column types.
    assert "ALTER TABLE clusters ALTER COLUMN owner_id DROP NOT NULL" in sql
    assert "ADD COLUMN adopted BOOLEAN DEFAULT false NOT NULL" in sql
    assert "ADD COLUMN notify_channels JSON DEFAULT '[]' NOT NULL" in sql
    assert "CONSTRAINT uq_notices_cluster_id_key UNIQUE (cluster_id, key)" in sql
    # 0003: added columns with defaults existing rows take, the audit table and its indexes.
    assert "ALTER TABLE requests ADD COLUMN approvals_needed INTEGER DEFAULT 1 NOT NULL" in sql
    assert "ALTER TABLE clusters ADD COLUMN envelope_stage VARCHAR DEFAULT 'none' NOT NULL" in sql
    assert "CREATE TABLE audit" in sql
    assert "amount_cents BIGINT" in sql
    assert "CREATE INDEX ix_audit_subject_id ON audit (subject_id)" in sql


def test_tables_compile_for_postgresql():
    dialect = sa.engine.make_url("postgresql+asyncpg://").get_dialect()()
    ddl = {name: str(CreateTable(table).compile(dialect=dialect))
           for name, table in metadata.tables.items()}
    assert set(ddl) == TABLES
    assert "hourly_cents BIGINT NOT NULL" in ddl["quotes"]
    assert "updated_at TIMESTAMP WITH TIME ZONE NOT NULL" in ddl["clusters"]


BATCH_MIGRATION = '''
import sqlalchemy as sa
from alembic import op

revision = "0099"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("quotes", recreate="always") as batch:
        batch.add_column(sa.Column("note", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("quotes") as batch:
        batch.drop_column("note")
'''


async def test_a_later_batch_migration_can_rebuild_a_referenced_table(tmp_path, monkeypatch):
    # SQLite rebuilds a table by copy/drop/rename; with rows pointing at it, that only works
    # with foreign keys off during the migration (and back on afterwards). SQLite only: on
    # PostgreSQL batch mode is plain ALTER TABLE, and a forced rebuild of a referenced table is
    # not something a migration of ours may do there.
    from tests.storage.conftest import make_quote, make_request, seed

    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "0099_note.py").write_text(BATCH_MIGRATION.replace("{head}", HEAD))
    db = Database(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        await db.migrate()
        await seed(db)
        monkeypatch.setattr("storage.migrations.MIGRATIONS_DIR", scripts)
        await db.migrate()
        async with db.transaction() as repos:
            assert await repos.requests.get("r-1") == make_request()
            assert await repos.quotes.get("q-1") == make_quote()
        with pytest.raises(sa.exc.IntegrityError):  # enforcement is back on
            async with db.transaction() as repos:
                await repos.requests.add(make_request("r-2", quote_id="q-nowhere"))
        assert await _look(db, _version) == ["0099"]
    finally:
        await db.dispose()


def _alembic(conn, action: str, target: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = conn
    getattr(command, action)(config, target)


def _insert_as_at_that_revision(conn, *models) -> None:
    # Through the tables as the older revision made them (reflected): today's tables name
    # columns it lacks.
    old = sa.MetaData()
    old.reflect(conn)
    for table_name, model in models:
        table = old.tables[table_name]
        values = {k: v for k, v in row_values(model).items() if k in table.c}
        assert set(table.c.keys()) - {"id"} <= set(values)  # the row is complete for it
        conn.execute(table.insert().values(values))


async def test_upgrade_from_0001_keeps_existing_rows(db_url):
    from tests.storage.conftest import T0, make_cluster, make_quote, make_request

    quote, request = make_quote(), make_request(status=RequestStatus.LAUNCHED, cluster_id="c-1")
    cluster = make_cluster(status=ClusterState.RUNNING, nodes_ready=2, ready_at=T0,
                           accrued_cents=12_824, accrued_hours=2, volume_id="vol-1",
                           volume_created_with_cluster=True)
    db = Database(db_url)
    try:
        async with db.engine.begin() as conn:
            await conn.run_sync(_alembic, "upgrade", "0001")
            await conn.run_sync(_insert_as_at_that_revision, ("quotes", quote),
                                ("requests", request), ("clusters", cluster))
        assert await _look(db, _version) == ["0001"]
        await db.migrate()
        assert await _look(db, _version) == [HEAD]
        async with db.transaction() as repos:
            assert await repos.quotes.get("q-1") == quote
            assert await repos.requests.get("r-1") == request
            migrated = await repos.clusters.get("c-1")
            assert migrated == cluster  # every new column at the model's default
            assert (migrated.observed, migrated.manual_recoveries, migrated.adopted) == (
                None, (), False)
            # The changed table takes the new shapes, and its foreign key is enforced again.
            await repos.clusters.add(make_cluster("c-2", request_id=None, owner_id=None))
        with pytest.raises(sa.exc.IntegrityError):
            async with db.transaction() as repos:
                await repos.clusters.add(make_cluster("c-3", request_id="r-nowhere"))
        assert await _look(db, _broken_foreign_keys) == []
        # On SQLite the table was rebuilt: its indexes must have survived that.
        assert {"ix_clusters_status", "ix_clusters_request_id"} <= await _look(db, _indexes)
    finally:
        await db.dispose()


async def test_downgrade_to_0001_with_watching_rows(db_url):
    from tests.storage.conftest import make_cluster, make_notice, make_observation, make_volume

    db = Database(db_url)
    try:
        await db.migrate()
        async with db.transaction() as repos:
            await repos.clusters.add(make_cluster(request_id=None, owner_id=None, adopted=True,
                                                  observed=make_observation()))
            await repos.notices.add_new([make_notice()])
            await repos.volumes.upsert(make_volume())
        async with db.engine.begin() as conn:
            await conn.run_sync(_alembic, "downgrade", "0001")
        assert await _look(db, _version) == ["0001"]
        assert await _look(db, _tables) == (
            TABLES - {"notices", "volumes", "audit"} - LATER | {"alembic_version"})
        # 0001 requires an owner: the unclaimed cluster is kept with an empty one.
        assert await _look(db, _rows, "SELECT id, owner_id FROM clusters") == [("c-1", "")]
        assert "observed" not in await _look(db, _columns, "clusters")
        await db.migrate()
        async with db.transaction() as repos:
            back = await repos.clusters.get("c-1")
        assert (back.owner_id, back.observed, back.adopted) == ("", None, False)
    finally:
        await db.dispose()


async def test_upgrade_from_0002_keeps_existing_rows(db_url):
    from tests.storage.conftest import T0, make_cluster, make_observation, make_quote, make_request

    request = make_request(status=RequestStatus.LAUNCHED, cluster_id="c-1")
    cluster = make_cluster(status=ClusterState.RUNNING, nodes_ready=2, ready_at=T0,
                           observed=make_observation(), notify_channels=("C1", "C9"), adopted=True)
    db = Database(db_url)
    try:
        async with db.engine.begin() as conn:
            await conn.run_sync(_alembic, "upgrade", "0002")
            await conn.run_sync(_insert_as_at_that_revision, ("quotes", make_quote()),
                                ("requests", request), ("clusters", cluster))
        await db.migrate()
        assert await _look(db, _version) == [HEAD]
        async with db.transaction() as repos:
            # Every new column at the model's default: one approver, no envelope.
            migrated_request = await repos.requests.get("r-1")
            assert migrated_request == request
            assert migrated_request.approvals_needed == 1
            migrated_cluster = await repos.clusters.get("c-1")
            assert migrated_cluster == cluster
            assert migrated_cluster.envelope_stage == "none"
            assert await repos.audit.count() == 0
            # The migrated rows take the new values.
            await repos.requests.update("r-1", now=T0, approvals_needed=2, lifetime_hours=8)
            await repos.clusters.update("c-1", now=T0, lifetime_hours=8, envelope_stage="due")
        async with db.transaction() as repos:
            assert (await repos.requests.get("r-1")).approvals_needed == 2
            assert (await repos.clusters.get("c-1")).envelope_stage == "due"
        assert await _look(db, _broken_foreign_keys) == []
    finally:
        await db.dispose()


async def test_downgrade_to_0002_with_policy_rows(db_url):
    from tests.storage.conftest import (
        T0,
        make_audit,
        make_cluster,
        make_notice,
        make_quote,
        make_request,
    )

    db = Database(db_url)
    try:
        await db.migrate()
        async with db.transaction() as repos:
            await repos.quotes.add(make_quote())
            await repos.requests.add(make_request(approvals_needed=3, lifetime_hours=24,
                                                  override_rule="max_hourly_cents"))
            await repos.approvals.add(Approval(
                request_id="r-1", approver_id="U2", decision=Decision.APPROVE, quote_id="q-1",
                hourly_cents=6_412, at=T0))
            # Rows pointing at both changed tables: the downgrade must not rebuild them.
            await repos.clusters.add(make_cluster(lifetime_hours=24, envelope_stage="extended",
                                                  extended_by="U9"))
            await repos.notices.add_new([make_notice()])
            await repos.audit.add(make_audit())
        async with db.engine.begin() as conn:  # foreign keys enforced, as the engine has them
            await conn.run_sync(_alembic, "downgrade", "0002")
        assert await _look(db, _version) == ["0002"]
        assert await _look(db, _tables) == TABLES - {"audit"} - LATER | {"alembic_version"}
        assert not await _look(db, _columns, "requests") & {
            "approvals_needed", "override_rule", "lifetime_hours"}
        assert not await _look(db, _columns, "clusters") & {
            "lifetime_hours", "envelope_stage", "extended_by"}
        counts = [await _look(db, _rows, f"SELECT count(*) FROM {t}")
                  for t in ("requests", "approvals", "clusters", "notices")]
        assert counts == [[(1,)]] * 4
        await db.migrate()  # and up again: the dropped values come back as defaults
        async with db.transaction() as repos:
            assert await repos.requests.get("r-1") == make_request()
            assert await repos.clusters.get("c-1") == make_cluster()
            assert await repos.audit.count() == 0
    finally:
        await db.dispose()


def test_head_revision_read_from_the_files_is_alembics_head():
    from alembic.script import ScriptDirectory

    from storage.migrations import alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_a_database_at_head_is_not_migrated_again(db_url, monkeypatch):
    db = Database(db_url)
    try:
        assert not await db.at_head()
        await db.migrate()
        assert await db.at_head()
        monkeypatch.setattr("storage.db.upgrade_head", _never)
        await db.migrate()  # one query, no alembic
    finally:
        await db.dispose()


def _never(*_: object) -> None:
    raise AssertionError("migrated a database already at head")
