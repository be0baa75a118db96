"""The database: one async engine, transactions that hand out repositories, migrations at start.

SQLite (the default) needs care to be safe with concurrent writers:

* WAL journal (readers never block the writer), a busy timeout, foreign keys on;
* every transaction starts with BEGIN IMMEDIATE. The sqlite3 driver would otherwise begin lazily
  at the first write, and a transaction that read first and then tries to write after another
  writer committed fails at once with "database is locked", whatever the busy timeout. Taking
  the write lock up front turns that into an orderly wait (also between processes);
* within one process, transactions take turns (storage/turns.py: by lane, then first come), so
  waiting happens on the event loop instead of in SQLite's sleep-and-retry busy handler, a
  person's answer never queues behind a storm's deliveries, and a ":memory:" database (one
  shared connection) works too.

PostgreSQL needs none of this: a compare-and-set UPDATE takes a row lock and the loser's WHERE
is re-evaluated after the winner commits.

An outage of the storage (disk full, server down or restarting, read-only) is translated in ONE
place, `transaction()`: it raises `StorageUnavailable` (what the person is told, bot/slack/
errors.py) and is logged once per outage (storage/outages.py), not once per failed transaction.
`probe()` is the readiness check's write.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

from bot.domain import lanes
from bot.domain.errors import StorageTrouble, StorageUnavailable
from storage import onecall, pgurl
from storage.migrations import upgrade_head
from storage.outages import OutageLog, trouble_of
from storage.repositories import Repos
from storage.schema import SchemaIncompatible, SchemaStatus, read_status, record_compat
from storage.tables.coordination import LEASES
from storage.turns import Turns

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000
# The probe's row: big enough that a database with no room left can't take it (4 SQLite
# pages), small enough to cost nothing. Inserted and deleted in one committed transaction.
PROBE_BYTES = 16_384
_WROTE = "wrote"  # Connection.info key: this transaction ran an INSERT/UPDATE/DELETE

_ASYNC_SCHEMES = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
}


def normalize_url(url: str) -> str:
    """Turn a DATABASE_URL into the async-driver URL the engine needs.

    `sqlite:///x.db` → `sqlite+aiosqlite:///x.db`; `postgresql://…` and `postgres://…` →
    `postgresql+asyncpg://…`; URLs already naming those drivers are returned unchanged.
    """
    scheme, sep, rest = url.strip().partition("://")
    target = _ASYNC_SCHEMES.get(scheme.lower()) if sep else None
    if target is None:
        # Never echo the URL itself: it may carry a password.
        shown = f"scheme {scheme!r}" if sep else "a value without a scheme"
        raise ValueError(
            f"unsupported database URL ({shown}): use sqlite:///path/to/bot.db or "
            "postgresql://user:password@host/dbname (the async drivers aiosqlite and asyncpg "
            "are picked automatically)"
        )
    return f"{target}://{rest}"


def create_engine(url: str, **options: Any) -> AsyncEngine:
    """The async engine for a DATABASE_URL: SQLite through aiosqlite, PostgreSQL through asyncpg
    with the whole libpq URL (storage/pgurl.py: `sslmode`, `sslrootcert`, … — ValueError naming
    a parameter it can't honour)."""
    target = normalize_url(url)
    if pgurl.is_postgres(target):
        pgurl.check(url)
        target, extra = pgurl.engine_args(url)
        options |= extra
    return create_async_engine(target, **options)


def sqlite_path(url: str) -> str | None:
    """The file a SQLite DATABASE_URL names (None: not SQLite, or an in-memory database)."""
    scheme, _, rest = url.strip().partition("://")
    if not scheme.lower().startswith("sqlite"):
        return None
    path = (rest[1:] if rest.startswith("/") else rest).split("?", 1)[0]
    return None if path in ("", ":memory:") else path


class Database:
    """The bot's database: `migrate()` at start, then `transaction()` for every unit of work."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self._url = normalize_url(url)
        self._is_sqlite = self._url.startswith("sqlite")
        # SQLite: a connection back in the pool is rolled back only if a transaction is still
        # open on it (`_sqlite_on_reset`), not after every commit as well (a call on aiosqlite's
        # thread, one of five in an empty transaction); a statement is one such call, not three
        # or four (storage/onecall.py).
        options: dict[str, Any] = ({"pool_reset_on_return": None, "module": onecall.dbapi()}
                                   if self._is_sqlite else {"pool_pre_ping": True})
        # hide_parameters: SQLAlchemy's own log lines and error messages never carry the values
        # bound to a statement (a workload's environment, before it is sealed, among them).
        self._engine = create_engine(self._url, echo=echo, hide_parameters=True, **options)
        if self._is_sqlite:
            event.listen(self._engine.sync_engine, "connect", _sqlite_on_connect)
            event.listen(self._engine.sync_engine, "begin", _sqlite_on_begin)
            event.listen(self._engine.sync_engine.pool, "reset", _sqlite_on_reset)
        event.listen(self._engine.sync_engine, "after_cursor_execute", _note_write)
        self.outages = OutageLog()
        self._turns = Turns()
        self._holder: asyncio.Task[Any] | None = None

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def migrate(self) -> None:
        """Bring the schema to the newest migration (alembic upgrade head); a no-op when current.

        A database ahead of this build (a newer build migrated it) is left alone: this build
        runs on it when the newer revisions say it can, else SchemaIncompatible (one line, see
        storage/schema.py). A database already at the head costs one short read (alembic is not
        even imported). One that needs migrating is migrated on a thread of its own, with an
        engine of its own, so the event loop is never held up by alembic (an in-memory SQLite
        database, which exists only on this engine's connection, is migrated here)."""
        status = await self.schema_status()
        if status.current == (status.head,) and not status.stale:
            return
        if status.ahead:
            _ahead(status)
            return
        if self._engine.url.database in (None, "", ":memory:") and self._is_sqlite:
            await self._migrate_here()
        else:
            await asyncio.to_thread(asyncio.run, _migrate_apart(self._url))

    async def at_head(self) -> bool:
        """Whether the schema is at the newest migration already."""
        status = await self.schema_status()
        return status.current == (status.head,)

    async def schema_status(self) -> SchemaStatus:
        """The revision the database is at, against this build's migrations (storage/schema)."""
        async with self._serialized(), self._engine.connect() as conn:
            return await conn.run_sync(read_status)

    async def _migrate_here(self) -> None:
        async with self._serialized(), self._engine.connect() as conn:
            await conn.run_sync(_migrate)

    def transaction(self) -> AbstractAsyncContextManager[Repos]:
        """One connection, one transaction: committed on normal exit, rolled back on exception.

        On SQLite, do not open a second transaction from inside one in the same task: it would
        wait for itself (this raises RuntimeError instead).
        """
        return self._transaction()

    async def schema_versions(self) -> list[str]:
        """The migration(s) the database says it is at, read the way a restart would read them.

        For a SQLite file that is a NEW connection to the file: a pooled one keeps answering
        from its page cache and the WAL index it has mapped even after the file is gone or
        ruined, so it would call a broken database healthy. Raises whatever the driver raises.
        """
        query = "SELECT version_num FROM alembic_version"
        path = self._engine.url.database
        if self._is_sqlite and path and path != ":memory:":
            return await asyncio.to_thread(_sqlite_versions, path, query)
        async with self._engine.connect() as conn:
            return [str(v) for (v,) in await conn.execute(sa.text(query))]

    async def dispose(self) -> None:
        """Close every pooled connection (an in-memory SQLite database is gone afterwards)."""
        await self._engine.dispose()

    async def probe(self, *, name: str) -> None:
        """A real write, committed: a row inserted and deleted again. Raises StorageUnavailable
        when the database can't take writes (what a read can't tell: a full disk still reads)."""
        async with self.transaction() as repos:
            key = f"probe/{name}"
            await repos.session.execute(sa.insert(LEASES).values(
                name=key, holder="x" * PROBE_BYTES, expires_at=sa.func.current_timestamp()))
            await repos.session.execute(sa.delete(LEASES).where(LEASES.c.name == key))

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Repos]:
        try:
            async with self._serialized(), _connected(self._engine) as conn, conn.begin():
                noted = conn.info  # the pooled connection's: what a statement before left there
                noted.pop(_WROTE, None)
                yield Repos(conn)
                wrote = noted.pop(_WROTE, False)
        except Exception as exc:
            outage = trouble_of(exc)
            if outage is None:
                raise
            self.outages.failed(outage)
            if outage is exc:
                raise
            raise outage from exc
        if wrote:  # a read succeeds on a full disk: only a write tells
            self.outages.wrote()

    def _serialized(self) -> AbstractAsyncContextManager[object]:
        return self._sqlite_turn() if self._is_sqlite else nullcontext()

    @asynccontextmanager
    async def _sqlite_turn(self) -> AsyncIterator[None]:
        task = asyncio.current_task()
        if task is not None and task is self._holder:
            raise RuntimeError("nested Database.transaction() in one task would deadlock SQLite")
        async with self._turns.turn(int(lanes.current())):  # by lane (storage/turns.py)
            self._holder = task
            try:
                yield
            finally:
                self._holder = None


@asynccontextmanager
async def _connected(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """Check out the transaction's connection. A server that is down or restarting refuses it
    with the socket's own error (asyncpg raises ConnectionRefusedError, FileNotFoundError for a
    UNIX socket that is gone), which SQLAlchemy passes on unwrapped: here, and only here, an
    OSError is the database's."""
    conn = engine.connect()
    try:
        await conn.start()
    except OSError as exc:
        raise StorageUnavailable(StorageTrouble.UNAVAILABLE,
                                 f"can't connect: {type(exc).__name__}") from exc
    try:
        yield conn
    finally:
        await asyncio.shield(conn.close())


def _note_write(conn: Connection, _cursor: Any, _statement: str, _parameters: Any,
                context: DefaultExecutionContext, _executemany: bool) -> None:
    """After each statement: an INSERT, UPDATE or DELETE notes that its transaction wrote
    (see OutageLog.wrote)."""
    if context.isinsert or context.isupdate or context.isdelete:
        conn.info[_WROTE] = True


async def _migrate_apart(url: str) -> None:
    db = Database(url)
    try:
        await db._migrate_here()
    finally:
        await db.dispose()


def _sqlite_on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # Take BEGIN away from the sqlite3 driver: _sqlite_on_begin emits it (see module docstring).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _use_wal(cursor)
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch to WAL once per file. Several connections opening a brand-new file at once can get
    an immediate "database is locked" on the switch (busy_timeout doesn't cover it): retry a
    few times. This runs on aiosqlite's own thread, never on the event loop."""
    for attempt in range(20):
        cursor.execute("PRAGMA journal_mode")
        if str(cursor.fetchone()[0]).lower() == "wal":
            return
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:  # the aiosqlite adapter raises sqlite3's errors
            if attempt == 19 or "locked" not in str(exc):
                raise
            time.sleep(0.01 * (attempt + 1))


def _sqlite_on_reset(dbapi_connection: Any, _record: ConnectionPoolEntry,
                     state: PoolResetState) -> None:
    """A connection checked back in: rolled back when the driver says a transaction is still
    open on it (a COMMIT that failed, a connection closed mid-way); committed, it is clean."""
    if state.terminate_only or not state.asyncio_safe:
        return  # being closed, or outside the loop (no call to its thread can be made)
    if dbapi_connection.driver_connection.in_transaction:
        dbapi_connection.rollback()


def _sqlite_on_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _ahead(status: SchemaStatus) -> None:
    if not status.runnable:
        raise SchemaIncompatible(status.refusal())
    log.info("the database is at revision %s, ahead of this build (head %s); it records that "
             "code from %s on runs on it: running without migrating",
             ", ".join(status.current), status.head, status.recorded_oldest)


def _upgrade(conn: Connection) -> None:
    """Inside the migration's transaction, holding its lock: look again (another process may
    have migrated meanwhile, even a newer build), then upgrade unless there is nothing to do."""
    status = read_status(conn)
    if status.ahead:
        _ahead(status)
    elif status.pending:
        upgrade_head(conn)
    elif status.stale:
        record_compat(conn)


def _migrate(conn: Connection) -> None:
    if conn.dialect.name != "sqlite":
        with conn.begin():
            if conn.dialect.name == "postgresql":
                # Replicas (or two `cluster-bot migrate`) starting together: the first
                # migrates, the others wait for it here and then find nothing left to do.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(7410262001)"))
            _upgrade(conn)
        return
    # Alembic's batch mode changes a SQLite table by copy, drop and rename; with foreign keys
    # enforced, dropping a referenced table fails. SQLite's own recipe: switch enforcement off
    # (only possible outside a transaction), migrate, check every key, switch it back on.
    _sqlite_pragma(conn, "foreign_keys = OFF")
    try:
        with conn.begin():  # BEGIN IMMEDIATE: a second migrating process waits for this one
            _upgrade(conn)
            broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"migration left broken foreign keys: {broken[:5]}")
    finally:
        _sqlite_pragma(conn, "foreign_keys = ON")


def _sqlite_pragma(conn: Connection, pragma: str) -> None:
    # Through the DBAPI connection: a statement on `conn` would open a transaction first.
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(f"PRAGMA {pragma}")
    finally:
        cursor.close()


def _sqlite_versions(path: str, query: str) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    try:
        return [str(v) for (v,) in conn.execute(query)]
    finally:
        conn.close()
