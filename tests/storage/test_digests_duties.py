"""Storm digests and degraded duties in the database: one open digest per channel however many
open it, members joined once, a rendering claimed once; acknowledging and each escalation are
compare-and-sets (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from bot.domain.duty import Escalation
from tests.storage.conftest import T0, make_cluster, seed


async def _clusters(db, *ids):
    await seed(db)
    async with db.transaction() as repos:
        for cluster_id in ids:
            await repos.clusters.add(make_cluster(id=cluster_id))


async def test_one_open_digest_per_channel_and_a_new_one_after_it_closes(db):
    await _clusters(db, "c-1", "c-2")

    async def open_one():
        async with db.transaction() as repos:
            return await repos.digests.open("C1", now=T0)

    opened = await asyncio.gather(*(open_one() for _ in range(3)))
    assert len({d.id for d in opened}) == 1
    digest = opened[0]
    async with db.transaction() as repos:
        await repos.digests.join(digest.id, ["c-1", "c-2"], now=T0)
        await repos.digests.join(digest.id, ["c-2"], now=T0)  # joined once
        assert await repos.digests.members(digest.id) == ["c-1", "c-2"]
        assert (await repos.digests.digest_of("c-1")).id == digest.id
        assert await repos.digests.shown(digest.id, "a", close_at=None)
        assert not await repos.digests.shown(digest.id, "a", close_at=None)  # claimed once
        assert await repos.digests.shown(digest.id, "b", close_at=T0)
        assert await repos.digests.open_in("C1") is None
        assert await repos.digests.digest_of("c-1") is None
        again = await repos.digests.open("C1", now=T0)  # the same second: a new digest
    assert again.id != digest.id


async def test_acknowledge_and_escalations_happen_once(db):
    await _clusters(db, "c-1")
    async with db.transaction() as repos:
        assert await repos.duties.acknowledge("c-1", 1, by="U1", now=T0)
        assert not await repos.duties.acknowledge("c-1", 1, by="U2", now=T0)
        assert (await repos.duties.get("c-1", 1)).acknowledged_by == "U1"
        until = T0 + timedelta(hours=1)
        assert await repos.duties.snooze("c-1", 2, by="U1", until=until, shown=0, now=T0)
        assert not await repos.duties.snooze("c-1", 2, by="U2", until=until, shown=0, now=T0)
        assert (await repos.duties.get("c-1", 2)).snoozes == 1
        assert await repos.duties.escalated("c-1", 2, Escalation.OVERDUE, now=T0)
        assert not await repos.duties.escalated("c-1", 2, Escalation.OVERDUE, now=T0)
        later = T0 + timedelta(hours=2)
        assert await repos.duties.escalated("c-1", 2, Escalation.EXHAUSTED, now=later)
        duty = await repos.duties.get("c-1", 2)
        assert (duty.escalated_at, duty.exhausted_escalated_at) == (T0, later)
        # Exhausted first: it stands for the first escalation too.
        assert await repos.duties.escalated("c-1", 3, Escalation.EXHAUSTED, now=T0)
        assert not await repos.duties.escalated("c-1", 3, Escalation.OVERDUE, now=T0)
