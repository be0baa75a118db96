"""Repositories of the watcher: the notices outbox and the persistent volumes.

Like every repository (see `storage.repositories`), they work inside the one transaction they were
given, never commit, and take and return domain models.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.errors import UnknownResource
from bot.domain.models import VolumeRecord
from bot.domain.watch import Notice
from storage.rows import field_values, row_values, to_domain
from storage.statements import MANAGED, insert, rowcount
from storage.tables.clusters import VOLUMES
from storage.tables.outbox import NOTICES

# Built once (values bound at execution, a list as an expanding IN): see storage/repositories.py.
_NOTICE_FREE = sa.or_(NOTICES.c.claimed_until.is_(None),
                      NOTICES.c.claimed_until <= sa.bindparam("now"))
_PENDING = (sa.select(NOTICES).where(NOTICES.c.delivered_at.is_(None))
            .order_by(NOTICES.c.id).limit(sa.bindparam("limit", type_=sa.Integer)))
_PENDING_FREE = _PENDING.where(_NOTICE_FREE)
_VOLUME = sa.select(VOLUMES).where(VOLUMES.c.id == sa.bindparam("id"))
_VOLUMES_DUE = (sa.select(VOLUMES)
                .where(VOLUMES.c.status == "available",
                       VOLUMES.c.next_reminder_at <= sa.bindparam("now"))
                .order_by(VOLUMES.c.next_reminder_at, VOLUMES.c.id))
_VOLUMES = sa.select(VOLUMES).order_by(VOLUMES.c.id)
_VOLUMES_OWNED = _VOLUMES.where(VOLUMES.c.owner_id.in_(sa.bindparam("owners", expanding=True)))


class NoticeRepo:
    """The watcher's outbox: each (cluster_id, key) is stored, and so announced, at most once."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add_new(self, notices: Sequence[Notice]) -> list[Notice]:
        """Store the notices whose (cluster_id, key) is new; return exactly those, in order.

        One INSERT … ON CONFLICT DO NOTHING each: a key stored earlier — or by a concurrent
        transaction, which the database makes this one wait for — inserts nothing and raises
        nothing, so of several racing watchers exactly one gets to announce the notice.
        """
        if not notices:
            return []
        # RETURNING, not rowcount: a row comes back exactly when this statement inserted it,
        # the same on every driver (rowcount next to RETURNING is not). One statement executed
        # with a row each (the hour mark stores a reminder for every cluster at once).
        stmt = (insert(self._session, NOTICES)
                .on_conflict_do_nothing(index_elements=["cluster_id", "key"])
                .returning(NOTICES.c.cluster_id, NOTICES.c.key))
        once: dict[tuple[str, str], Notice] = {}
        for notice in notices:  # a key twice in `notices`: the first is the new one
            once.setdefault((notice.cluster_id, notice.key), notice)
        first = list(once.values())
        stored = {(c, k) for c, k in await self._session.execute(
            stmt, [row_values(n) for n in first])}
        return [n for n in first if (n.cluster_id, n.key) in stored]

    async def pending(self, limit: int = 100, *, now: datetime | None = None) -> list[Notice]:
        """Notices not delivered yet, oldest first (in the order they were stored); with `now`,
        only those nobody is posting (unclaimed, or the claim expired by `now`)."""
        if now is None:
            return await self._list(_PENDING, {"limit": limit})
        return await self._list(_PENDING_FREE, {"limit": limit, "now": now})

    async def claim(self, cluster_id: str, key: str, *, holder: str, now: datetime,
                    ttl: timedelta) -> bool:
        """Claim an undelivered notice for posting until `now + ttl`: True for exactly one of
        any number of racing replicas; False once delivered or while another claim is live.

        One compare-and-set UPDATE: PostgreSQL re-checks the loser's WHERE against the row the
        winner committed; SQLite runs one writer at a time."""
        stmt = (
            sa.update(NOTICES)
            .where(NOTICES.c.cluster_id == cluster_id, NOTICES.c.key == key,
                   NOTICES.c.delivered_at.is_(None), _claim_free(now))
            .values(claimed_by=holder, claimed_until=now + ttl)
        )
        return await rowcount(self._session, stmt) == 1

    async def release(self, cluster_id: str, key: str, *, holder: str) -> None:
        """Give a claim back (Slack refused the post): the next delivery pass tries again."""
        await self._session.execute(
            sa.update(NOTICES)
            .where(NOTICES.c.cluster_id == cluster_id, NOTICES.c.key == key,
                   NOTICES.c.claimed_by == holder, NOTICES.c.delivered_at.is_(None))
            .values(claimed_until=None))

    async def mark_delivered(self, cluster_id: str, key: str, *, now: datetime) -> None:
        """Record the delivery; a notice delivered before keeps its first delivery time.

        UnknownResource if there is no such notice.
        """
        match = (NOTICES.c.cluster_id == cluster_id, NOTICES.c.key == key)
        stmt = (
            sa.update(NOTICES).where(*match, NOTICES.c.delivered_at.is_(None))
            .values(delivered_at=now)
        )
        if await rowcount(self._session, stmt) == 0:
            exists = await self._session.execute(sa.select(NOTICES.c.id).where(*match))
            if exists.first() is None:
                raise UnknownResource("notice", f"{cluster_id}/{key}")

    async def for_cluster(self, cluster_id: str) -> list[Notice]:
        """Every notice about `cluster_id`, delivered or not, oldest first."""
        return await self._list(
            sa.select(NOTICES).where(NOTICES.c.cluster_id == cluster_id).order_by(NOTICES.c.id)
        )

    async def _list(self, stmt: sa.Select[Any],
                    values: Mapping[str, Any] | None = None) -> list[Notice]:
        rows = (await self._session.execute(stmt, values)).mappings()
        return [to_domain(Notice, row, skip=("id", "claimed_by", "claimed_until"))
                for row in rows]


def _claim_free(now: datetime) -> sa.ColumnElement[bool]:
    return sa.or_(NOTICES.c.claimed_until.is_(None), NOTICES.c.claimed_until <= now)


class VolumeRepo:
    """Persistent volumes the bot knows of, and when to remind about the orphaned ones."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def upsert(self, v: VolumeRecord) -> VolumeRecord:
        """Insert `v`, or replace every field of the stored volume with `v`'s (one statement)."""
        stmt = insert(self._session, VOLUMES).values(row_values(v))
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["id"],
            set_={c.name: stmt.excluded[c.name] for c in VOLUMES.columns if c.name != "id"},
        ))
        stored = await self.get(v.id)
        assert stored is not None  # written just now, inside this transaction
        return stored

    async def get(self, id: str) -> VolumeRecord | None:
        row = (await self._session.execute(_VOLUME, {"id": id})).mappings().one_or_none()
        return None if row is None else to_domain(VolumeRecord, row)

    async def update(self, id: str, *, now: datetime, **fields: Any) -> VolumeRecord:
        """Set `fields` (and `updated_at=now`); UnknownResource if no such volume."""
        values = field_values(VolumeRecord, fields, forbidden=MANAGED)
        stmt = sa.update(VOLUMES).where(VOLUMES.c.id == id).values({**values, "updated_at": now})
        if await rowcount(self._session, stmt) == 0:
            raise UnknownResource("volume", id)
        updated = await self.get(id)
        assert updated is not None  # we just updated it inside this transaction
        return updated

    async def due(self, now: datetime) -> list[VolumeRecord]:
        """Available (orphaned) volumes whose reminder is due at `now`, longest overdue first."""
        return await self._list(_VOLUMES_DUE, {"now": now})

    async def list_all(self) -> list[VolumeRecord]:
        """Every volume, by id."""
        return await self._list(_VOLUMES)

    async def list_owned(self, owners: Collection[str]) -> list[VolumeRecord]:
        """The volumes `owners` own, by id."""
        return await self._list(_VOLUMES_OWNED, {"owners": sorted(owners)})

    async def _list(self, stmt: sa.Select[Any],
                    values: Mapping[str, Any] | None = None) -> list[VolumeRecord]:
        rows = (await self._session.execute(stmt, values)).mappings()
        return [to_domain(VolumeRecord, row) for row in rows]
