"""Storm digests: one open digest per channel (UNIQUE `open_channel`), its member clusters
(joined once), and a digest of the last rendering so an unchanged digest is not edited."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.statements import insert, rowcount
from storage.tables.outbox import DIGEST_MEMBERS, DIGESTS


@dataclass(frozen=True)
class Digest:
    id: str
    channel_id: str
    opened_at: datetime
    closed_at: datetime | None
    shown: str | None


class DigestRepo:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def open_in(self, channel_id: str) -> Digest | None:
        return await self._one(DIGESTS.c.open_channel == channel_id)

    async def get(self, digest_id: str) -> Digest | None:
        return await self._one(DIGESTS.c.id == digest_id)

    async def open(self, channel_id: str, *, now: datetime) -> Digest:
        """The channel's open digest: the one there is, or a new one (one statement: of
        racing replicas one inserts, the others find it)."""
        await self._session.execute(
            insert(self._session, DIGESTS)
            .values(id=f"{channel_id}-{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}",
                    channel_id=channel_id,
                    open_channel=channel_id, opened_at=now)
            .on_conflict_do_nothing())
        found = await self.open_in(channel_id)
        assert found is not None  # inserted now, or open already (closing is the only way out)
        return found

    async def join(self, digest_id: str, cluster_ids: Collection[str], *,
                   now: datetime) -> None:
        for cluster_id in cluster_ids:
            await self._session.execute(
                insert(self._session, DIGEST_MEMBERS)
                .values(digest_id=digest_id, cluster_id=cluster_id, joined_at=now)
                .on_conflict_do_nothing())

    async def members(self, digest_id: str) -> list[str]:
        rows = await self._session.execute(
            sa.select(DIGEST_MEMBERS.c.cluster_id).where(DIGEST_MEMBERS.c.digest_id == digest_id)
            .order_by(DIGEST_MEMBERS.c.joined_at, DIGEST_MEMBERS.c.cluster_id))
        return [str(r[0]) for r in rows]

    async def digest_of(self, cluster_id: str) -> Digest | None:
        """The open digest `cluster_id` is in, if any."""
        return await self._one(DIGESTS.c.open_channel.is_not(None), DIGESTS.c.id.in_(
            sa.select(DIGEST_MEMBERS.c.digest_id).where(
                DIGEST_MEMBERS.c.cluster_id == cluster_id)))

    async def list_open(self) -> list[Digest]:
        rows = await self._session.execute(
            sa.select(DIGESTS).where(DIGESTS.c.open_channel.is_not(None))
            .order_by(DIGESTS.c.opened_at))
        return [_digest(r) for r in rows.mappings()]

    async def shown(self, digest_id: str, shown: str, *, close_at: datetime | None) -> bool:
        """Record what the digest shows now (and close it at `close_at`); False when it shows
        that already (another replica edited it to the same)."""
        values: dict[str, object] = {"shown": shown}
        if close_at is not None:
            values |= {"open_channel": None, "closed_at": close_at}
        return await rowcount(self._session, sa.update(DIGESTS).where(
            DIGESTS.c.id == digest_id,
            sa.or_(DIGESTS.c.shown.is_(None), DIGESTS.c.shown != shown)).values(**values)) == 1

    async def unshown(self, digest_id: str) -> None:
        """Slack refused the edit: the next pass renders and edits it again."""
        await self._session.execute(sa.update(DIGESTS).where(DIGESTS.c.id == digest_id)
                                    .values(shown=None))

    async def _one(self, *where: sa.ColumnElement[bool]) -> Digest | None:
        row = (await self._session.execute(sa.select(DIGESTS).where(*where))
               ).mappings().one_or_none()
        return None if row is None else _digest(row)


def _digest(row: sa.RowMapping) -> Digest:
    return Digest(id=row["id"], channel_id=row["channel_id"], opened_at=row["opened_at"],
                  closed_at=row["closed_at"], shown=row["shown"])
