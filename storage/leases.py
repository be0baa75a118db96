"""Named leases in the database: one holder at a time, taken over once the holder stops renewing.

A lease row says who holds `name` until when. `acquire` is one compare-and-set: the holder
renews its own lease, anyone takes an expired one, nobody takes a live one held by another.
On PostgreSQL the losing UPDATE waits for the winner's row lock and re-checks its WHERE against
the committed row; on SQLite every transaction holds the write lock from its start. So it works
the same on both, across processes and hosts, without advisory locks or an in-process lock.

A lease also records its holder's `capability` (what that build's code knows how to do). A
replica with a higher capability takes a live lease over from a lower one at its next attempt
(so no duty a newer build added is skipped while an older one sweeps during a rollout); a lower
one never takes it from a higher one while that one renews — but does take an expired one, so
with only old replicas alive the work still runs (availability over purity).

What a replica keeps of a lease (`Lease`: hold, renew, release) is storage/replica.py's.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.statements import insert, rowcount
from storage.tables.coordination import LEASES


class LeaseRepo:
    """The `leases` table, inside one transaction (see `storage.repositories`)."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def acquire(self, name: str, *, holder: str, now: datetime, ttl: timedelta,
                      capability: int = 0) -> bool:
        """Take or renew `name` for `holder` until `now + ttl`; False while another holds it
        with at least `capability`."""
        until = now + ttl
        added = await self._session.execute(
            insert(self._session, LEASES)
            .values(name=name, holder=holder, expires_at=until, capability=capability)
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(LEASES.c.name))
        if added.first() is not None:
            return True
        stmt = (sa.update(LEASES)
                .where(LEASES.c.name == name,
                       sa.or_(LEASES.c.holder == holder, LEASES.c.expires_at <= now,
                              LEASES.c.capability < capability))
                .values(holder=holder, expires_at=until, capability=capability))
        return await rowcount(self._session, stmt) == 1

    async def release(self, name: str, *, holder: str) -> None:
        """Give `name` up, if `holder` still holds it."""
        await self._session.execute(
            sa.delete(LEASES).where(LEASES.c.name == name, LEASES.c.holder == holder))

    async def holder(self, name: str, *, now: datetime) -> str | None:
        """Who holds `name` at `now` (None: nobody, or the lease expired)."""
        row = (await self._session.execute(
            sa.select(LEASES.c.holder).where(LEASES.c.name == name, LEASES.c.expires_at > now)
        )).first()
        return None if row is None else str(row[0])
