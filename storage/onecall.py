"""SQLite statements in one call each on aiosqlite's thread.

aiosqlite runs every sqlite3 call on a thread of its own; each call is a round trip from the
event loop (a future, a queue put, a wake-up of the thread and one of the loop, a greenlet
switch each way). SQLAlchemy's aiosqlite adapter spends four of them on a SELECT (open a
cursor, execute, fetch all, close) and three on any other statement, BEGIN IMMEDIATE included:
most of what an everyday transaction cost the event loop's thread beside SQLAlchemy's own work.
This adapter does the four in one call — the rows are fetched at once either way (the adapter
buffers them all) — so a transaction of k statements is k + 2 calls (BEGIN, COMMIT), not ~4k + 4.

It plugs into SQLAlchemy as the engine's DBAPI module (`create_engine(module=…)`, a documented
option) and replaces only the cursor of a connection: connecting, commit, rollback, closing and
the server-side cursors (`stream()`, unused here) are SQLAlchemy's own. Errors are the driver's,
raised and translated exactly as the adapter's are.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util.concurrency import await_

# What one statement leaves: the columns' description, every row, rowcount and lastrowid.
_Outcome = tuple[Any, Sequence[Any], int, int | None]


class OneCallCursor:
    """A DB-API cursor whose `execute` is one call on aiosqlite's thread (rows buffered)."""

    server_side = False

    def __init__(self, adapt_connection: AsyncAdapt_aiosqlite_connection) -> None:
        self._adapt_connection = adapt_connection
        self._connection: aiosqlite.Connection = adapt_connection._connection  # type: ignore[assignment]
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1
        self._rows: collections.deque[Any] = collections.deque()

    def execute(self, operation: str, parameters: Any = None) -> None:
        self._run(False, operation, parameters)

    def executemany(self, operation: str, seq_of_parameters: Any) -> None:
        self._run(True, operation, seq_of_parameters)

    def _run(self, many: bool, operation: str, parameters: Any) -> None:
        conn = self._connection

        def run() -> _Outcome:  # on aiosqlite's thread
            cursor = conn._conn.cursor()
            try:
                if many:
                    cursor.executemany(operation, parameters)
                elif parameters is None:
                    cursor.execute(operation)
                else:
                    cursor.execute(operation, parameters)
                description = cursor.description
                rows = cursor.fetchall() if description else ()
                return description, rows, cursor.rowcount, cursor.lastrowid
            finally:
                cursor.close()

        try:
            outcome: _Outcome = await_(conn._execute(run))  # type: ignore[no-untyped-call]
        except Exception as error:
            self._adapt_connection._handle_exception(error)
        self.description, rows, self.rowcount, self.lastrowid = outcome
        self._rows = collections.deque(rows)

    async def _async_soft_close(self) -> None:
        """What SQLAlchemy's asyncio layer calls to close the cursor early: nothing is open."""

    def close(self) -> None:
        self._rows.clear()

    def fetchone(self) -> Any:
        return self._rows.popleft() if self._rows else None

    def fetchmany(self, size: int | None = None) -> list[Any]:
        rows = self._rows
        return [rows.popleft() for _ in range(min(size or self.arraysize, len(rows)))]

    def fetchall(self) -> list[Any]:
        rows = list(self._rows)
        self._rows.clear()
        return rows

    def setinputsizes(self, *sizes: Any) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        while self._rows:
            yield self._rows.popleft()


class _Connection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()
    _cursor_cls = OneCallCursor  # type: ignore[assignment]


class _Dbapi(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> AsyncAdapt_aiosqlite_connection:
        return _Connection(self, super().connect(*arg, **kw)._connection)


def dbapi() -> Any:
    """The DB-API module to give SQLite's async engine (`module=`)."""
    return _Dbapi(aiosqlite, sqlite3)
