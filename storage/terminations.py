"""The terminate intents' repository: record, claim an attempt, and move an intent along.

Every move is a compare-and-set on the row, so replicas sharing the database never take the same
attempt twice and never announce the same outcome twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.termination import TerminationIntent, TerminationState
from storage.rows import row_values, to_domain
from storage.statements import insert, rowcount
from storage.tables.clusters import TERMINATIONS

_T = TERMINATIONS.c


class TerminationRepo:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, intent: TerminationIntent) -> TerminationIntent:
        """Store the intent; a cluster that already has one keeps it (first asker, attempts),
        except that an intent already announced done is replaced. Returns the stored one."""
        stmt = insert(self._session, TERMINATIONS).values(row_values(intent))
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["cluster_id"],
            set_=row_values(intent),
            where=_T.state == TerminationState.DONE.value,
        ))
        stored = await self.get(intent.cluster_id)
        assert stored is not None
        return stored

    async def get(self, cluster_id: str) -> TerminationIntent | None:
        row = (await self._session.execute(
            sa.select(TERMINATIONS).where(_T.cluster_id == cluster_id))).mappings().one_or_none()
        return None if row is None else to_domain(TerminationIntent, row)

    async def due(self, *, now: datetime, limit: int = 100) -> list[TerminationIntent]:
        """Pending intents whose next attempt is due, oldest first."""
        rows = (await self._session.execute(
            sa.select(TERMINATIONS)
            .where(_T.state == TerminationState.PENDING.value, _T.next_attempt_at <= now)
            .order_by(_T.next_attempt_at).limit(limit))).mappings()
        return [to_domain(TerminationIntent, row) for row in rows]

    async def in_state(self, state: TerminationState) -> list[TerminationIntent]:
        rows = (await self._session.execute(
            sa.select(TERMINATIONS).where(_T.state == state.value)
            .order_by(_T.requested_at))).mappings()
        return [to_domain(TerminationIntent, row) for row in rows]

    async def claim(self, cluster_id: str, *, now: datetime,
                    lease: timedelta) -> TerminationIntent | None:
        """Take the due attempt (counted) for `lease`; None if it isn't due or another took it."""
        taken = await rowcount(self._session, sa.update(TERMINATIONS).where(
            _T.cluster_id == cluster_id, _T.state == TerminationState.PENDING.value,
            _T.next_attempt_at <= now,
        ).values(attempts=_T.attempts + 1, next_attempt_at=now + lease, updated_at=now))
        return await self.get(cluster_id) if taken else None

    async def failed(self, cluster_id: str, *, now: datetime, error: str,
                     retry_at: datetime) -> None:
        await self._session.execute(sa.update(TERMINATIONS).where(
            _T.cluster_id == cluster_id, _T.state == TerminationState.PENDING.value,
        ).values(last_error=error, next_attempt_at=retry_at, updated_at=now))

    async def sent(self, cluster_id: str, requests: int) -> None:
        """Count `requests` more terminate requests sent to AI Reserve for this intent."""
        if requests:
            await self._session.execute(sa.update(TERMINATIONS).where(
                _T.cluster_id == cluster_id).values(requests=_T.requests + requests))

    async def move(self, cluster_id: str, *, from_: TerminationState, to: TerminationState,
                   now: datetime) -> bool:
        """Compare-and-set the state; True if this call made the move."""
        done_at = now if to is TerminationState.DONE else None
        return bool(await rowcount(self._session, sa.update(TERMINATIONS).where(
            _T.cluster_id == cluster_id, _T.state == from_.value,
        ).values(state=to.value, updated_at=now, done_at=done_at)))

    async def warn_once(self, cluster_id: str, *, now: datetime) -> bool:
        """Mark the "still billing" warning sent; True only for the call that marked it."""
        return bool(await rowcount(self._session, sa.update(TERMINATIONS).where(
            _T.cluster_id == cluster_id, _T.warned_at.is_(None),
        ).values(warned_at=now, updated_at=now)))
