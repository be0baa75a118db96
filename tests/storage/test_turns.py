"""SQLite's turns within one process go by lane, then first come (storage/turns.py, issue 32):
a person's answer waits for the transaction in progress, not behind a storm's deliveries."""

from __future__ import annotations

import asyncio

from bot.domain.lanes import Lane, lane
from storage.db import Database
from storage.turns import PASSED_AT_MOST, Turns


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



async def test_a_sweep_behind_a_stream_of_answers_gets_its_turn_within_a_bound():
    """A person's answers go first, but a stream of them (hundreds of `/cluster list` a second,
    the next one queued before the one ahead is done) doesn't hold the watch sweep for ever: it
    goes once PASSED_AT_MOST turns went to transactions queued after it (issue 28: in the scale
    benchmark's list load the bot made no list call for four minutes, and no degraded notice
    went out until 20 s after the first node failed)."""
    turns, order, hold = Turns(), [], asyncio.Event()
    answers = 5 * PASSED_AT_MOST
    tasks: list[asyncio.Task[None]] = []

    async def take(which: Lane, name: str, until: asyncio.Event | None = None) -> None:
        async with turns.turn(which):
            order.append(name)
            if until is not None:
                await until.wait()
            if which is Lane.ANSWER and len(tasks) < answers:  # the next person's, queued
                tasks.append(asyncio.create_task(take(Lane.ANSWER, f"answer {len(tasks)}")))
                await asyncio.sleep(0)  # … before this one is done

    holder = asyncio.create_task(take(Lane.HEALTH, "in progress", hold))
    await asyncio.sleep(0)
    sweep = asyncio.create_task(take(Lane.MONEY, "sweep"))
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(take(Lane.ANSWER, "answer 0")))
    await asyncio.sleep(0)
    hold.set()
    async with asyncio.timeout(5):
        await asyncio.gather(holder, sweep)
        while not all(t.done() for t in tasks):
            await asyncio.gather(*tasks)
    assert order[1] == "answer 0"  # the lanes still say who goes first
    assert order.index("sweep") == 1 + PASSED_AT_MOST, order
    assert len(order) == answers + 2
