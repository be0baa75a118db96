"""SQLite's turns within one process go by lane, then first come (storage/turns.py, issue 32):
a person's answer waits for the transaction in progress, not behind a storm's deliveries."""

from __future__ import annotations

import asyncio

from bot.domain.lanes import Lane, lane
from storage.db import Database
from storage.turns import Turns


async def _in(db: Database, which: Lane, name: str, order: list[str],
              hold: asyncio.Event | None = None, holding: asyncio.Event | None = None) -> None:
    with lane(which):
        async with db.transaction():
            order.append(name)
            if holding is not None:
                holding.set()
            if hold is not None:
                await hold.wait()


async def _queued(db: Database, started: list[asyncio.Task[None]], *waiting: tuple[Lane, str],
                  order: list[str]) -> None:
    for which, name in waiting:  # queued one after another, each behind the holder
        started.append(asyncio.create_task(_in(db, which, name, order)))
        await asyncio.sleep(0)


async def test_a_person_s_answer_goes_before_a_storm_s_queued_deliveries(sqlite_db):
    order: list[str] = []
    hold = asyncio.Event()
    holding = asyncio.Event()
    holder = asyncio.create_task(_in(sqlite_db, Lane.HEALTH, "in progress", order, hold,
                                     holding))
    await holding.wait()
    tasks: list[asyncio.Task[None]] = []
    await _queued(sqlite_db, tasks, (Lane.HEALTH, "notice 1"), (Lane.REMINDER, "reminder"),
                  (Lane.HEALTH, "notice 2"), (Lane.MONEY, "sweep"), (Lane.ANSWER, "card"),
                  order=order)
    hold.set()
    await asyncio.gather(holder, *tasks)
    assert order == ["in progress", "card", "sweep", "notice 1", "notice 2", "reminder"]


async def test_a_waiter_cancelled_before_or_as_its_turn_comes_holds_up_nobody():
    turns, order, hold = Turns(), [], asyncio.Event()

    async def take(which: Lane, name: str, until: asyncio.Event | None = None) -> None:
        async with turns.turn(which):
            order.append(name)
            if until is not None:
                await until.wait()

    holder = asyncio.create_task(take(Lane.HEALTH, "in progress", hold))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(take(which, name)) for which, name in (
        (Lane.ANSWER, "gone while waiting"), (Lane.MONEY, "gone as its turn came"),
        (Lane.HEALTH, "next"))]
    await asyncio.sleep(0)
    waiting[0].cancel()
    hold.set()
    await asyncio.sleep(0)  # the holder leaves, handing the turn to the money one: cancel it
    waiting[1].cancel()
    await asyncio.wait_for(asyncio.gather(holder, waiting[2]), 5)
    assert order == ["in progress", "next"]
    async with asyncio.timeout(5), turns.turn(Lane.REMINDER):  # and the turn is free again
        pass
