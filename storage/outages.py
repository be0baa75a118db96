"""Which database failures are outages of the surroundings, and their one log line each.

A full disk, a server that is down or restarting, a read-only file: expected in production, not
bugs. `trouble_of` recognises them from the driver's own error codes (SQLite's result codes,
PostgreSQL's SQLSTATE), never from message text. `OutageLog` logs ONE line when such an outage
begins and one when a write succeeds again, however many transactions fail in between — a
traceback per retry tells an operator nothing the first line didn't.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

import sqlalchemy as sa

from bot.domain.errors import StorageTrouble, StorageUnavailable

log = logging.getLogger(__name__)

# SQLite primary result codes (the low byte of an extended code).
_SQLITE = {13: StorageTrouble.FULL,  # SQLITE_FULL: "database or disk is full"
           8: StorageTrouble.READ_ONLY,  # SQLITE_READONLY: "attempt to write a readonly …"
           10: StorageTrouble.UNAVAILABLE,  # SQLITE_IOERR: the storage under the file fails
           14: StorageTrouble.UNAVAILABLE}  # SQLITE_CANTOPEN: the file can't be opened
# PostgreSQL SQLSTATEs: exact codes, then classes.
_PG_CODES = {"53100": StorageTrouble.FULL,  # disk_full
             "25006": StorageTrouble.READ_ONLY,  # read_only_sql_transaction (a standby)
             "53300": StorageTrouble.UNAVAILABLE}  # too_many_connections
_PG_PREFIXES = (("08", StorageTrouble.UNAVAILABLE),  # connection exceptions
                ("57P", StorageTrouble.UNAVAILABLE))  # admin/crash shutdown, cannot connect now


def trouble_of(exc: BaseException) -> StorageUnavailable | None:
    """The outage `exc` (or what it wraps) is, or None: a bug or a conflict, not an outage."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        err = todo.pop(0)
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        found = _classify(err)
        if found is not None:
            return found
        # What the driver raised (`orig`, `raise … from`), never an exception that was merely
        # being handled when this one was raised (`__context__`): that one may be anything.
        todo += [getattr(err, "orig", None), err.__cause__]
    return None


def _classify(err: BaseException) -> StorageUnavailable | None:
    if isinstance(err, StorageUnavailable):
        return err
    if isinstance(err, sqlite3.Error):
        code = getattr(err, "sqlite_errorcode", None)
        trouble = None if code is None else _SQLITE.get(code & 0xFF)
        name = getattr(err, "sqlite_errorname", "SQLITE")
        return None if trouble is None else StorageUnavailable(trouble, f"{name}: {err}")
    state = getattr(err, "sqlstate", None) or getattr(err, "pgcode", None)
    if isinstance(state, str):
        trouble = _PG_CODES.get(state) or next(
            (t for prefix, t in _PG_PREFIXES if state.startswith(prefix)), None)
        if trouble is not None:  # the type and code only: a server's message may quote data
            return StorageUnavailable(trouble, f"{type(err).__name__} (SQLSTATE {state})")
    if isinstance(err, sa.exc.DBAPIError) and err.connection_invalidated:
        return StorageUnavailable(StorageTrouble.UNAVAILABLE,
                                  f"connection lost ({type(err.orig).__name__})")
    if isinstance(err, ConnectionError | sa.exc.DisconnectionError):  # refused, reset
        return StorageUnavailable(StorageTrouble.UNAVAILABLE, type(err).__name__)
    return None


class OutageLog:
    """One line when an outage begins (or changes kind), one when a write succeeds again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.current: StorageUnavailable | None = None
        self._since = 0.0

    def failed(self, error: StorageUnavailable) -> None:
        if self.current is not None and self.current.trouble is error.trouble:
            return  # the same outage, again: already said
        self.current, self._since = error, self._clock()
        log.warning("the database is %s (%s): work that writes fails and is told so until "
                    "it recovers", error.trouble.value, error.detail)

    def wrote(self) -> None:
        """A write committed: whatever the outage was, it is over."""
        if self.current is None:
            return
        log.info("the database takes writes again (it was %s for %.0f s)",
                    self.current.trouble.value, self._clock() - self._since)
        self.current = None
