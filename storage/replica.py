"""This process among the replicas sharing the database: its name, the clock its leases and
claims are timed by, and the leases it holds.

`Lease` is the small object a replica keeps of one named lease (storage/leases.py: the table):
`hold()` acquires or renews (and says whether this replica holds it now), `release()` gives it
up on a clean stop so another replica takes over at once instead of after the expiry.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError

from bot.domain.errors import StorageUnavailable
from storage.db import Database

log = logging.getLogger(__name__)


def wall_clock() -> datetime:
    """What leases and claims are timed by: the real time every process shares, never a test's
    or a demo's shifted business clock (an hour skipped there must not expire every claim)."""
    return datetime.now(UTC)


def replica_id() -> str:
    """A name for this process among the replicas: host, pid and a random part (pids repeat)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


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
