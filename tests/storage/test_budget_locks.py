"""Budget locks across processes: two `Database` objects on one database behave like two
replicas. A decision holding a budget's lock makes another decision on the same budget wait
until it commits (PostgreSQL: advisory lock; SQLite: BEGIN IMMEDIATE takes the write lock
before the first read), so the second reads what the first committed — and what it reads counts
a launch committing meanwhile once (bot/services/budgets.py `committed`)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from bot.domain import spend
from bot.domain.models import RequestStatus
from bot.domain.policy import Policy
from bot.services import budgets
from storage.budgets import team_budget, user_budget
from storage.db import Database
from tests.storage.conftest import T0, make_cluster, make_request, seed


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


@pytest.mark.postgres
@pytest.mark.parametrize("before_read", [1, 2, 3])
async def test_a_launch_committing_between_the_budgets_reads_is_counted_once(pg_url, before_read):
    """What a budget holds is read in several statements, and on PostgreSQL each sees what was
    committed when it began. A launch (its cluster linked and its request marked launched, in one
    transaction) committing before any one of them must still count, and count once: twenty
    approvals at once let a fourth launch through a budget that fits three when it counted as
    neither a request nor a cluster."""
    reader, launcher = await _two(pg_url)
    now = T0 + timedelta(minutes=5)
    request = make_request("r-1", requester_id="U1", status=RequestStatus.LAUNCHING)
    policy = Policy(user_budget_cents={"U1": 1_000_000})
    reads = 0

    async def launch_commits() -> None:
        async with launcher.transaction() as repos:
            await repos.clusters.link(make_cluster("c-1", request_id="r-1", owner_id="U1"))
            moved = await repos.requests.transition(
                "r-1", from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHED, now=now,
                cluster_id="c-1")
            assert moved is not None

    def counted(read):  # the launch commits just before the `before_read`-th read
        async def wrapped(*args, **kwargs):
            nonlocal reads
            reads += 1
            if reads == before_read:
                await launch_commits()
            return await read(*args, **kwargs)
        return wrapped

    try:
        await seed(launcher, request)
        async with reader.transaction() as repos:
            for repo, name in ((repos.requests, "list_by_status"),
                               (repos.clusters, "list_in_period"),
                               (repos.clusters, "list_live")):
                setattr(repo, name, counted(getattr(repo, name)))
            racing = await budgets.committed(repos, policy, requester="U1", now=now)
        assert reads == 3
        async with reader.transaction() as repos:
            settled = await budgets.committed(repos, policy, requester="U1", now=now)
        assert settled.user_cents == spend.request_cents(request, now=now) > 0
        assert racing.user_cents == settled.user_cents, (racing, settled)
    finally:
        await reader.dispose()
        await launcher.dispose()
