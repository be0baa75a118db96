"""Transactions: commit, rollback, and concurrent compare-and-set with exactly one winner."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import aiosqlite
import pytest

from bot.domain.models import MessageRef, RequestStatus
from storage.db import Database
from tests.storage.conftest import T0, make_quote, make_request, seed

CONTENDERS = 20


async def _approve(db: Database, who: int):
    async with db.transaction() as repos:
        # Read first, then write: the pattern that trips SQLite's deferred transactions.
        current = await repos.requests.get("r-1")
        assert current is not None
        return await repos.requests.transition(
            "r-1", from_={RequestStatus.PENDING}, to=RequestStatus.APPROVED,
            now=T0 + timedelta(seconds=who), quote_id="q-1", decided_by=f"U{who}",
        )


async def test_concurrent_transitions_have_exactly_one_winner(db):
    await seed(db)
    results = await asyncio.gather(*(_approve(db, who) for who in range(CONTENDERS)))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert results.count(None) == CONTENDERS - 1
    async with db.transaction() as repos:
        assert await repos.requests.get("r-1") == winners[0]


async def test_one_winner_across_several_engines_on_one_database(db_url):
    # Several Database objects on one database behave like several processes: no shared asyncio
    # lock, so SQLite's own locking (BEGIN IMMEDIATE + busy timeout) has to keep order, and on
    # PostgreSQL the row lock of the compare-and-set UPDATE.
    dbs = [Database(db_url) for _ in range(4)]
    try:
        await dbs[0].migrate()
        await seed(dbs[0])
        results = await asyncio.gather(
            *(_approve(dbs[who % len(dbs)], who) for who in range(CONTENDERS))
        )
    finally:
        for each in dbs:
            await each.dispose()
    assert sum(r is not None for r in results) == 1


async def test_commit_on_normal_exit(db):
    async with db.transaction() as repos:
        await repos.messages.put("k", "s", MessageRef(channel_id="C1", ts="1.0"), now=T0)
    async with db.transaction() as repos:
        assert await repos.messages.get("k", "s") == MessageRef(channel_id="C1", ts="1.0")


async def test_rollback_on_exception_leaves_nothing_behind(db):
    await seed(db)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with db.transaction() as repos:
            await repos.quotes.add(make_quote("q-2"))
            await repos.requests.add(make_request("r-2", quote_id="q-2"))
            await repos.requests.transition(
                "r-1", from_={RequestStatus.PENDING}, to=RequestStatus.REJECTED, now=T0
            )
            await repos.messages.put("k", "s", MessageRef(channel_id="C1", ts="1.0"), now=T0)
            raise Boom
    async with db.transaction() as repos:
        assert await repos.quotes.get("q-2") is None
        assert await repos.requests.get("r-2") is None
        assert await repos.requests.get("r-1") == make_request()
        assert await repos.messages.get("k", "s") is None


async def test_a_failed_transaction_does_not_block_the_next(db):
    with pytest.raises(RuntimeError):
        async with db.transaction():
            raise RuntimeError("handler bug")
    await seed(db)  # the lock and the connection were released


async def test_nested_transaction_in_one_task_is_refused_on_sqlite(sqlite_db):
    # SQLite only: there a nested transaction would wait for its own task's lock. On PostgreSQL
    # each transaction is a connection of its own (see the next test).
    async with sqlite_db.transaction():
        with pytest.raises(RuntimeError, match="nested"):
            async with sqlite_db.transaction():
                pass  # pragma: no cover


@pytest.mark.postgres
async def test_transactions_in_one_task_are_independent_on_postgresql(pg_url):
    db = Database(pg_url)
    try:
        await db.migrate()
        async with db.transaction() as outer:
            await outer.messages.put("k", "s", MessageRef(channel_id="C1", ts="1.0"), now=T0)
            async with db.transaction() as inner:  # another connection: not yet committed
                assert await inner.messages.get("k", "s") is None
        async with db.transaction() as repos:
            assert await repos.messages.get("k", "s") == MessageRef(channel_id="C1", ts="1.0")
    finally:
        await db.dispose()


async def test_cancelled_transaction_rolls_back(db):
    await seed(db)
    entered = asyncio.Event()

    async def stuck() -> None:
        async with db.transaction() as repos:
            await repos.requests.update("r-1", now=T0, last_error="half done")
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(stuck())
    await asyncio.wait_for(entered.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with db.transaction() as repos:
        assert (await repos.requests.get("r-1")).last_error is None


def _thread_calls(monkeypatch) -> list[str]:
    """The calls made on aiosqlite's thread from now on, by what they ran."""
    calls: list[str] = []
    real = aiosqlite.Connection._execute

    async def counted(self, fn, *args, **kwargs):
        calls.append(fn.__qualname__)
        return await real(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return calls


async def test_a_committed_transaction_is_not_rolled_back_again_on_sqlite(sqlite_db,
                                                                           monkeypatch):
    """An empty transaction is two calls on aiosqlite's thread (BEGIN IMMEDIATE, COMMIT): the
    pool's rollback of every connection checked back in, after a commit too, was one more
    (issue 32: every transaction of the bot paid it)."""
    await seed(sqlite_db)  # its connection opened
    calls = _thread_calls(monkeypatch)
    async with sqlite_db.transaction():
        pass
    assert len(calls) == 2 and "Connection.rollback" not in calls, calls


async def test_a_statement_is_one_call_on_aiosqlites_thread(sqlite_db, monkeypatch):
    """A statement is one call on aiosqlite's thread, its rows fetched with it
    (storage/onecall.py): SQLAlchemy's adapter made four of a SELECT (cursor, execute, fetch,
    close) and three of an UPDATE or of BEGIN IMMEDIATE (issue 32: ~4 per statement were most
    of a transaction's cost on the event loop's thread)."""
    await seed(sqlite_db)
    calls = _thread_calls(monkeypatch)
    async with sqlite_db.transaction() as repos:
        await repos.requests.update("r-1", now=T0, last_error="x")  # UPDATE, then SELECT
        assert (await repos.requests.get("r-1")).last_error == "x"
        assert await repos.requests.get("r-none") is None
    assert len(calls) == 1 + 4 + 1, calls  # BEGIN IMMEDIATE, 4 statements, COMMIT
    async with sqlite_db.transaction() as repos:  # what was written is what is read after it
        assert (await repos.requests.get("r-1")).last_error == "x"


async def test_a_connection_back_with_a_transaction_open_is_rolled_back_on_sqlite(sqlite_db):
    """What the pool's reset is kept for (storage/db.py `_sqlite_on_reset`): a transaction the
    driver still has open when its connection comes back (a COMMIT that failed) is rolled back,
    not left holding SQLite's write lock for the next transaction on that connection."""
    async with sqlite_db.engine.connect() as conn:
        raw = await conn.get_raw_connection()
        await raw.driver_connection.execute("BEGIN IMMEDIATE")
        assert raw.driver_connection.in_transaction
    await seed(sqlite_db)  # rolled back on its return: the next transaction writes
    async with sqlite_db.transaction() as repos:
        assert await repos.requests.get("r-1") is not None
