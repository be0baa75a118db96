"""The outbox of posts other than watcher notices, and the cached DM channel of each person.

A post is keyed by what it says to whom (e.g. `connection/c-1`, `tell/U1/<digest>`). Before
calling Slack a replica *claims* the key: one statement that inserts the row claimed, or takes
over a claim that was released or expired, and matches nothing while the post is delivered or
another replica's claim is live. So of any number of replicas exactly one posts; one that dies
holding a claim loses it at `claimed_until`, and the post goes out from another.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from storage.statements import insert, rowcount
from storage.tables import DM_CHANNELS, OUTBOX

MAX_ATTEMPTS = 5
# A target Slack refuses for good (a deactivated person, an archived channel) is one row of
# its own in the outbox: key `undeliverable/<target>`, payload {"reason": <Slack's code>},
# created (and "delivered") when it was found. Inserted once; removed when it works again.
UNDELIVERABLE = "undeliverable"


@dataclass(frozen=True)
class OutboxItem:
    key: str
    kind: str
    target: str
    payload: dict[str, Any] | None
    created_at: datetime
    claimed_by: str | None
    claimed_until: datetime | None
    delivered_at: datetime | None
    attempts: int


class OutboxRepo:
    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def claim(self, key: str, *, kind: str, target: str, holder: str, now: datetime,
                    ttl: timedelta, payload: dict[str, Any] | None = None) -> bool:
        """True when `holder` may post `key` now: the key is new, or its earlier claim was
        released or has expired. False when it was delivered or another claim is live."""
        until = now + ttl
        added = await self._session.execute(
            insert(self._session, OUTBOX)
            .values(key=key, kind=kind, target=target, payload=payload, created_at=now,
                    claimed_by=holder, claimed_until=until, attempts=1)
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(OUTBOX.c.key))
        if added.first() is not None:
            return True
        stmt = (sa.update(OUTBOX)
                .where(OUTBOX.c.key == key, OUTBOX.c.delivered_at.is_(None),
                       sa.or_(OUTBOX.c.claimed_until.is_(None), OUTBOX.c.claimed_until <= now))
                .values(claimed_by=holder, claimed_until=until,
                        attempts=OUTBOX.c.attempts + 1))
        return await rowcount(self._session, stmt) == 1

    async def delivered(self, key: str, *, now: datetime) -> None:
        await self._session.execute(
            sa.update(OUTBOX).where(OUTBOX.c.key == key, OUTBOX.c.delivered_at.is_(None))
            .values(delivered_at=now, claimed_until=None))

    async def release(self, key: str, *, holder: str) -> None:
        """Give a claim back (the post failed): the next delivery pass may try again."""
        await self._session.execute(
            sa.update(OUTBOX).where(OUTBOX.c.key == key, OUTBOX.c.claimed_by == holder,
                                    OUTBOX.c.delivered_at.is_(None))
            .values(claimed_until=None))

    async def retryable(self, *, now: datetime, limit: int = 100) -> list[OutboxItem]:
        """Stored posts not delivered, unclaimed (or whose claim expired), oldest first;
        after MAX_ATTEMPTS a post is left alone (logged by whoever gave up on it), and so is
        one to an undeliverable target (else they would fill every page and starve the rest)."""
        gone = OUTBOX.alias("gone")
        stmt = (sa.select(OUTBOX)
                .where(OUTBOX.c.delivered_at.is_(None), OUTBOX.c.payload.is_not(None),
                       OUTBOX.c.attempts < MAX_ATTEMPTS,
                       ~sa.exists().where(gone.c.kind == UNDELIVERABLE,
                                          gone.c.target == OUTBOX.c.target),
                       sa.or_(OUTBOX.c.claimed_until.is_(None), OUTBOX.c.claimed_until <= now))
                .order_by(OUTBOX.c.created_at, OUTBOX.c.key).limit(limit))
        return [OutboxItem(**row) for row in (await self._session.execute(stmt)).mappings()]

    async def mark_undeliverable(self, target: str, *, reason: str, now: datetime) -> bool:
        """Record that Slack refuses `target` for good; True only for the first record."""
        added = await self._session.execute(
            insert(self._session, OUTBOX)
            .values(key=f"{UNDELIVERABLE}/{target}", kind=UNDELIVERABLE, target=target,
                    payload={"reason": reason}, created_at=now, delivered_at=now, attempts=1)
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(OUTBOX.c.key))
        return added.first() is not None

    async def undeliverable(self) -> list[OutboxItem]:
        """Every target recorded undeliverable, oldest first."""
        stmt = (sa.select(OUTBOX).where(OUTBOX.c.kind == UNDELIVERABLE)
                .order_by(OUTBOX.c.created_at, OUTBOX.c.key))
        return [OutboxItem(**row) for row in (await self._session.execute(stmt)).mappings()]

    async def reachable_again(self, target: str) -> None:
        await self._session.execute(
            sa.delete(OUTBOX).where(OUTBOX.c.key == f"{UNDELIVERABLE}/{target}"))

    async def get(self, key: str) -> OutboxItem | None:
        row = (await self._session.execute(
            sa.select(OUTBOX).where(OUTBOX.c.key == key))).mappings().one_or_none()
        return None if row is None else OutboxItem(**row)


class DmChannelRepo:
    """user id → DM channel id, written once per person."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def get(self, user_id: str) -> str | None:
        row = (await self._session.execute(
            sa.select(DM_CHANNELS.c.channel_id).where(DM_CHANNELS.c.user_id == user_id))).first()
        return None if row is None else str(row[0])

    async def put(self, user_id: str, channel_id: str) -> None:
        stmt = insert(self._session, DM_CHANNELS).values(user_id=user_id, channel_id=channel_id)
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["user_id"], set_={"channel_id": stmt.excluded.channel_id}))
