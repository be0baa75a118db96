"""Button claims: of any number of racing presses of one (action, subject, version) exactly one
acts; a refused or failed action frees the key; a claim whose process died is taken over once."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot.clock import ManualClock
from bot.domain.claims import ClaimKey
from bot.domain.errors import Conflict, NotAllowed
from bot.domain.models import Actor
from bot.services.audit import AuditLog
from bot.services.claims import LEASE, ButtonClaims

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
KEY = ClaimKey(action="extend", subject_id="c-1", version="72")


async def take(db, key=KEY, actor="U1", now=NOW):
    async with db.transaction() as repos:
        return await repos.claims.take(key, actor_id=actor, now=now,
                                       stale_before=now - LEASE)


async def test_take_finish_release(db):
    assert await take(db) is None
    held = await take(db, actor="U2")
    assert (held.actor_id, held.done_at, held.answer) == ("U1", None, None)
    assert await take(db, ClaimKey(action="extend", subject_id="c-1", version="144")) is None
    async with db.transaction() as repos:
        await repos.claims.finish(KEY, answer="Already extended by <@U1> to 144 h.", now=NOW)
    held = await take(db, actor="U2", now=NOW + 2 * LEASE)  # done: never taken over
    assert (held.actor_id, held.done_at, held.answer) == (
        "U1", NOW, "Already extended by <@U1> to 144 h.")
    async with db.transaction() as repos:
        await repos.claims.release(KEY)
    assert await take(db, actor="U2") is None


async def test_twenty_racing_takes_one_wins(db):
    results = await asyncio.gather(*(take(db, actor=f"U{i}") for i in range(20)))
    assert sum(r is None for r in results) == 1


async def test_an_abandoned_claim_is_taken_over_once_after_the_lease(db):
    assert await take(db, actor="U1") is None
    assert (await take(db, actor="U2", now=NOW + LEASE / 2)).actor_id == "U1"
    later = NOW + LEASE + timedelta(seconds=1)
    results = await asyncio.gather(*(take(db, actor=f"U{i}", now=later) for i in range(2, 12)))
    assert sum(r is None for r in results) == 1


@pytest.fixture
def claims(db):
    clock = ManualClock(NOW)
    return ButtonClaims(db=db, audit=AuditLog(db=db, clock=clock), clock=clock)


async def test_once_acts_once_and_tells_the_rest_who_did_it(db, claims):
    acted = []
    started, release = asyncio.Event(), asyncio.Event()

    async def act():
        acted.append(1)
        started.set()
        await release.wait()
        return 144

    async def press(user):
        return await claims.once(KEY, actor=Actor(user_id=user), act=act,
                                 told=lambda hours: f"Already extended by <@U0> to {hours} h.")

    first = asyncio.create_task(press("U0"))
    await asyncio.wait_for(started.wait(), timeout=10)
    with pytest.raises(Conflict, match="being done now"):
        await press("U1")  # while the first is still acting
    release.set()
    assert await first == 144
    for user in ("U0", "U2"):
        with pytest.raises(Conflict, match=r"Already extended by <@U0> to 144 h\."):
            await press(user)
    assert acted == [1]
    async with db.transaction() as repos:
        refused = [e for e in await repos.audit.list() if e.outcome == "refused"]
    assert [e.actor_id for e in refused] == ["U2", "U0", "U1"]  # newest first


async def test_a_refused_or_failed_action_frees_the_key(db, claims):
    async def refuse():
        raise NotAllowed("Only an approver can extend a cluster's envelope.")

    async def fail():
        raise RuntimeError("provider down")

    async def succeed():
        return "ok"

    for act, error in ((refuse, NotAllowed), (fail, RuntimeError)):
        with pytest.raises(error):
            await claims.once(KEY, actor=Actor(user_id="U1"), act=act, told=str)
    assert await claims.once(KEY, actor=Actor(user_id="U2"), act=succeed, told=str) == "ok"
