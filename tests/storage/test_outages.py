"""A database outage is recognised from the driver's real error, translated in one place
(`Database.transaction`), logged once per outage, and over when a write commits again.

The full SQLite database here is SQLite's own size limit (`PRAGMA max_page_count`): the real
SQLITE_FULL "database or disk is full", without a mount (the real full disk is in
tests/e2e/test_db_outages.py). PostgreSQL's read-only transaction is a server setting
(`default_transaction_read_only`, what a standby or a database made read-only enforces).
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import tempfile
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from bot.domain.errors import StorageTrouble, StorageUnavailable
from storage.db import Database
from tests.pg import PORT, ROLE, PgServer
from tests.storage.conftest import make_quote


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "storage.outages"]


async def on_every_connection(db: Database, pragma: dict[str, str | None]) -> None:
    """Run `pragma["sql"]` (while set) on every connection the database opens from now on."""

    def run(dbapi_connection: Any, _record: Any) -> None:
        if pragma["sql"]:
            cursor = dbapi_connection.cursor()
            cursor.execute(pragma["sql"])
            cursor.close()

    event.listen(db.engine.sync_engine, "connect", run)
    await db.engine.dispose()


async def test_a_full_sqlite_database_is_one_outage_until_a_write_commits(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="storage.outages")
    path = tmp_path / "b.db"
    db = Database(f"sqlite:///{path}")
    await db.migrate()
    try:
        raw = sqlite3.connect(path)
        raw.execute("VACUUM")  # no free pages left: the next page needed must grow the file
        pages = raw.execute("PRAGMA page_count").fetchone()[0]
        raw.close()
        cap: dict[str, str | None] = {"sql": f"PRAGMA max_page_count = {pages}"}
        await on_every_connection(db, cap)

        for _ in range(3):
            with pytest.raises(StorageUnavailable) as raised:
                await db.probe(name="r1")
            assert raised.value.trouble is StorageTrouble.FULL
            assert raised.value.detail == "SQLITE_FULL: database or disk is full"
            assert isinstance(raised.value.__cause__, sa.exc.OperationalError)
        async with db.transaction() as repos:  # reads still work, and end nothing
            assert await repos.quotes.get("q-none") is None
        lines = outage_lines(caplog)
        assert [(r.levelno, r.exc_info) for r in lines] == [(logging.WARNING, None)]
        assert "the database is full (SQLITE_FULL" in lines[0].getMessage()

        cap["sql"] = None  # space frees
        await db.engine.dispose()
        await db.probe(name="r1")
        lines = outage_lines(caplog)
        assert len(lines) == 2 and lines[1].levelno == logging.INFO
        assert "takes writes again (it was full" in lines[1].getMessage()
        await db.probe(name="r1")
        assert len(outage_lines(caplog)) == 2  # nothing more while it works
    finally:
        await db.dispose()


async def test_a_bug_is_not_an_outage(db, caplog):
    async with db.transaction() as repos:
        await repos.quotes.add(make_quote("q-1"))
    with pytest.raises(sa.exc.IntegrityError):  # a conflict of ours: raised as it was
        async with db.transaction() as repos:
            await repos.quotes.add(make_quote("q-1"))
    assert outage_lines(caplog) == []


@pytest.mark.postgres
async def test_a_read_only_postgresql_database_is_read_only(pg_server: PgServer, pg_migrated_url,
                                                            caplog):
    db = Database(pg_migrated_url)
    name = pg_migrated_url.split("/")[3].split("?")[0]
    try:
        await db.probe(name="r1")
        pg_server._admin(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        await db.engine.dispose()  # the setting holds for sessions that start from now on
        with pytest.raises(StorageUnavailable) as raised:
            await db.probe(name="r1")
        assert raised.value.trouble is StorageTrouble.READ_ONLY
        assert "SQLSTATE 25006" in raised.value.detail
        assert "read-only" in raised.value.user_message
        assert len(outage_lines(caplog)) == 1
    finally:
        await db.dispose()


@pytest.mark.postgres
async def test_a_postgresql_connection_ended_by_the_server_reconnects_quietly(
        pg_server: PgServer, pg_migrated_url, caplog):
    db = Database(pg_migrated_url)
    try:
        await db.probe(name="r1")  # a pooled connection exists
        name = pg_migrated_url.split("/")[3].split("?")[0]
        pg_server._admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         f"WHERE datname = '{name}' AND pid <> pg_backend_pid()")
        await db.probe(name="r1")  # pool_pre_ping: a new connection, nothing to tell
        assert outage_lines(caplog) == []
        assert not [r for r in caplog.records if r.exc_info]
    finally:
        await db.dispose()


async def test_a_failed_statement_never_shows_the_values_bound_to_it(tmp_path):
    """SQLAlchemy puts a statement's bound values in its error text (and its statement log):
    a workload's environment before it is sealed, say. The engine hides them."""
    import sqlalchemy as sa

    from storage.db import Database

    db = Database(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        async with db.engine.connect() as conn:
            with pytest.raises(sa.exc.DBAPIError) as caught:
                await conn.execute(sa.text("INSERT INTO nowhere VALUES (:v)"),
                                   {"v": "hf_s3cret"})
        assert "hf_s3cret" not in str(caught.value)
        assert "nowhere" in str(caught.value)  # the statement itself still says what failed
    finally:
        await db.dispose()


@pytest.mark.parametrize("server", ["never started", "stopped, its socket left behind"])
async def test_a_postgresql_server_that_refuses_the_connection_is_unavailable(server, caplog):
    """No server on the UNIX socket: asyncpg raises the socket's own OSError (FileNotFoundError
    when there is no socket file, ConnectionRefusedError when one is left but nobody listens),
    which SQLAlchemy passes on unwrapped; `_connected()` makes it the database's outage."""
    with tempfile.TemporaryDirectory(prefix="bot-pg-none-") as sockets:  # short: a socket path
        cause: type[OSError] = FileNotFoundError
        if server != "never started":
            left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # bound, never listening
            left.bind(os.path.join(sockets, f".s.PGSQL.{PORT}"))
            cause = ConnectionRefusedError
        db = Database(f"postgresql://{ROLE}@/bot?host={sockets}&port={PORT}")
        try:
            for _ in range(2):
                with pytest.raises(StorageUnavailable) as raised:
                    async with db.transaction() as repos:
                        await repos.quotes.get("q-1")
                assert raised.value.trouble is StorageTrouble.UNAVAILABLE
                assert raised.value.detail == f"can't connect: {cause.__name__}"
                assert type(raised.value.__cause__) is cause
            lines = outage_lines(caplog)
            assert [r.levelno for r in lines] == [logging.WARNING]  # once per outage
        finally:
            await db.dispose()
            if server != "never started":
                left.close()
