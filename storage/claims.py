"""Button claims' repository: take a (action, subject, version) once, finish or release it;
and the deliveries from Slack, recorded once (bot/services/deliveries.py)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.claims import ActionClaim, ClaimKey
from storage.statements import insert, rowcount
from storage.tables.coordination import ACTION_CLAIMS


class ClaimRepo:
    """Claims of button presses. Exactly one of any number of racing takers gets a key: the
    INSERT … ON CONFLICT DO NOTHING (or, past the lease, the UPDATE guarded by the old
    `claimed_at`) matches for one transaction only."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def take(self, key: ClaimKey, *, actor_id: str, now: datetime,
                   stale_before: datetime) -> ActionClaim | None:
        """Claim `key` for `actor_id`: None if taken now, else the claim that holds it.

        An unfinished claim taken before `stale_before` (its process died mid-action) is taken
        over, once."""
        inserted = (await self._session.execute(
            insert(self._session, ACTION_CLAIMS)
            .values(**key.model_dump(), actor_id=actor_id, claimed_at=now)
            .on_conflict_do_nothing()
            .returning(ACTION_CLAIMS.c.action)
        )).first()
        if inserted is not None:
            return None
        held = await self.get(key)
        assert held is not None  # it conflicted, and claims are deleted only by their taker
        if held.done_at is None and held.claimed_at < stale_before:
            taken = await rowcount(self._session, self._where(key).where(
                ACTION_CLAIMS.c.done_at.is_(None),
                ACTION_CLAIMS.c.claimed_at == held.claimed_at,
            ).values(actor_id=actor_id, claimed_at=now))
            if taken:
                return None
            held = await self.get(key) or held
        return held

    async def record(self, key: ClaimKey, *, actor_id: str, now: datetime) -> bool:
        """Claim `key` as done at once (a delivery from Slack, not a button): True when it is
        new; False when any replica recorded it first."""
        inserted = (await self._session.execute(
            insert(self._session, ACTION_CLAIMS)
            .values(**key.model_dump(), actor_id=actor_id, claimed_at=now, done_at=now)
            .on_conflict_do_nothing()
            .returning(ACTION_CLAIMS.c.action)
        )).first()
        return inserted is not None

    async def record_all(self, keys: Collection[ClaimKey], *, actor_id: str,
                         now: datetime) -> None:
        """Record many keys as done in one statement; those recorded already stay as they are."""
        if keys:
            await self._session.execute(
                insert(self._session, ACTION_CLAIMS)
                .values([{**key.model_dump(), "actor_id": actor_id, "claimed_at": now,
                          "done_at": now} for key in keys])
                .on_conflict_do_nothing())

    async def forget(self, *, actions: Collection[str], before: datetime) -> int:
        """Delete the claims of `actions` taken before `before`; how many went."""
        result = await self._session.execute(
            sa.delete(ACTION_CLAIMS).where(ACTION_CLAIMS.c.action.in_(actions),
                                           ACTION_CLAIMS.c.claimed_at < before))
        count: int = result.rowcount
        return count

    async def get(self, key: ClaimKey) -> ActionClaim | None:
        row = (await self._session.execute(
            sa.select(ACTION_CLAIMS).where(*self._match(key))
        )).mappings().one_or_none()
        if row is None:
            return None
        return ActionClaim(key=key, actor_id=row["actor_id"], claimed_at=row["claimed_at"],
                           done_at=row["done_at"], answer=row["answer"])

    async def finish(self, key: ClaimKey, *, answer: str, now: datetime) -> None:
        await self._session.execute(self._where(key).values(done_at=now, answer=answer))

    async def release(self, key: ClaimKey) -> None:
        """The action was refused or failed: a later press may try again."""
        await self._session.execute(sa.delete(ACTION_CLAIMS).where(*self._match(key)))

    @staticmethod
    def _match(key: ClaimKey) -> tuple[sa.ColumnElement[bool], ...]:
        return (ACTION_CLAIMS.c.action == key.action,
                ACTION_CLAIMS.c.subject_id == key.subject_id,
                ACTION_CLAIMS.c.version == key.version)

    def _where(self, key: ClaimKey) -> sa.Update:
        return sa.update(ACTION_CLAIMS).where(*self._match(key))
