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

`Lease` is the small object a replica keeps: `hold()` acquires or renews (and says whether this
replica holds it now), `release()` gives it up on a clean stop so another replica takes over at
once instead of after the expiry.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.domain.errors import StorageUnavailable
from storage.statements import insert, rowcount
from storage.tables import LEASES

if TYPE_CHECKING:
    from storage.db import Database

log = logging.getLogger(__name__)


def wall_clock() -> datetime:
    """What leases and claims are timed by: the real time every process shares, never a test's
    or a demo's shifted business clock (an hour skipped there must not expire every claim)."""
    return datetime.now(UTC)


def replica_id() -> str:
    """A name for this process among the replicas: host, pid and a random part (pids repeat)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class LeaseRepo:
    """The `leases` table, inside one transaction (see `storage.repositories`)."""

    def __init__(self, session: AsyncSession) -> None:
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


class Lease:
    """One replica's view of one named lease."""

    def __init__(self, *, db: Database, name: str, holder: str, ttl: timedelta,
                 capability: int = 0, now: Callable[[], datetime] = wall_clock) -> None:
        self._db = db
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self.capability = capability
        self._now = now
        self.held = False
        # When this replica last took the lease (monotonic seconds): readiness times the
        # holder's first sweep from here, not from when some other replica last swept.
        self.since = time.monotonic()

    async def hold(self) -> bool:
        """Acquire or renew; True when this replica holds the lease now. A database error
        counts as not holding it (the work waits; another replica may hold it)."""
        try:
            async with self._db.transaction() as repos:
                held = await repos.leases.acquire(self.name, holder=self.holder,
                                                  now=self._now(), ttl=self.ttl,
                                                  capability=self.capability)
        except StorageUnavailable:  # an outage: logged once by the database (storage/outages)
            held = False
        except (SQLAlchemyError, OSError) as exc:
            log.warning("could not renew the %s lease: %s", self.name, type(exc).__name__)
            held = False
        if held != self.held:
            log.info("%s the %s lease", "took" if held else "lost", self.name)
            if held:
                self.since = time.monotonic()
        self.held = held
        return held

    async def release(self) -> None:
        if not self.held:
            return
        self.held = False
        try:
            async with self._db.transaction() as repos:
                await repos.leases.release(self.name, holder=self.holder)
        except StorageUnavailable:  # it expires on its own; the outage is logged once
            pass
        except (SQLAlchemyError, OSError) as exc:  # it expires on its own
            log.warning("could not release the %s lease: %s", self.name, type(exc).__name__)
