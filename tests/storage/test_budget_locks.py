"""Budget locks across processes: two `Database` objects on one database behave like two
replicas. A decision holding a budget's lock makes another decision on the same budget wait
until it commits (PostgreSQL: advisory lock; SQLite: BEGIN IMMEDIATE takes the write lock
before the first read), so the second reads what the first committed."""

from __future__ import annotations

import asyncio

import pytest

from storage.budgets import team_budget, user_budget
from storage.db import Database


async def _two(db_url: str) -> tuple[Database, Database]:
    first, second = Database(db_url), Database(db_url)
    await first.migrate()
    return first, second


async def test_a_second_decision_on_the_same_budget_waits_for_the_first(db_url):
    first, second = await _two(db_url)
    order: list[str] = []
    locked, release = asyncio.Event(), asyncio.Event()

    async def decide_first() -> None:
        async with first.transaction() as repos:
            await repos.budgets.hold([user_budget("U1"), team_budget("research")])
            await repos.clusters.list_live()  # what the decision reads
            locked.set()
            await release.wait()
            order.append("first commits")

    async def decide_second() -> None:
        await locked.wait()
        async with second.transaction() as repos:
            await repos.budgets.hold([team_budget("research"), user_budget("U2")])
            await repos.clusters.list_live()
            order.append("second reads")

    try:
        one, two = asyncio.create_task(decide_first()), asyncio.create_task(decide_second())
        await locked.wait()
        done, _ = await asyncio.wait({two}, timeout=0.5)  # it must still be waiting
        assert not done and order == []
        release.set()
        await asyncio.wait_for(asyncio.gather(one, two), 30)
        assert order == ["first commits", "second reads"]
    finally:
        await first.dispose()
        await second.dispose()


@pytest.mark.postgres
async def test_other_budgets_do_not_wait_on_postgres(pg_url):
    first, second = await _two(pg_url)
    release = asyncio.Event()
    locked = asyncio.Event()

    async def hold_alice() -> None:
        async with first.transaction() as repos:
            await repos.budgets.hold([user_budget("U0ALICE")])
            locked.set()
            await release.wait()

    try:
        task = asyncio.create_task(hold_alice())
        await locked.wait()
        async with second.transaction() as repos:  # Bob's budget: not blocked by Alice's
            await asyncio.wait_for(repos.budgets.hold([user_budget("U0BOB")]), 10)
        release.set()
        await task
    finally:
        await first.dispose()
        await second.dispose()
