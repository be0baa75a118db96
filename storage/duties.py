"""Who is on a degraded episode (`Duty`): one row per (cluster, episode), every change a
single statement — acknowledging and each escalation are compare-and-sets, so of any number
of replicas (or presses) exactly one wins."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.duty import Duty, Escalation
from storage.statements import insert, rowcount
from storage.tables.people import DUTIES


class DutyRepo:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def get(self, cluster_id: str, episode: int) -> Duty | None:
        row = (await self._session.execute(sa.select(DUTIES).where(
            DUTIES.c.cluster_id == cluster_id, DUTIES.c.episode == episode))
        ).mappings().one_or_none()
        if row is None:
            return None
        return Duty(**{k: v for k, v in row.items() if k in Duty.model_fields})

    async def _ensure(self, cluster_id: str, episode: int, now: datetime) -> None:
        await self._session.execute(
            insert(self._session, DUTIES)
            .values(cluster_id=cluster_id, episode=episode, snoozes=0, updated_at=now)
            .on_conflict_do_nothing(index_elements=["cluster_id", "episode"]))

    def _where(self, cluster_id: str, episode: int) -> sa.Update:
        return sa.update(DUTIES).where(DUTIES.c.cluster_id == cluster_id,
                                       DUTIES.c.episode == episode)

    async def acknowledge(self, cluster_id: str, episode: int, *, by: str,
                          now: datetime) -> bool:
        """True for the one acknowledgement of the episode; False once someone has."""
        await self._ensure(cluster_id, episode, now)
        return await rowcount(self._session, self._where(cluster_id, episode).where(
            DUTIES.c.acknowledged_by.is_(None)).values(
            acknowledged_by=by, acknowledged_at=now, snoozed_until=None, updated_at=now)) == 1

    async def snooze(self, cluster_id: str, episode: int, *, by: str, until: datetime,
                     shown: int, now: datetime) -> bool:
        """Snooze until `until`, if it was snoozed `shown` times so far (the button's version);
        False for a stale button."""
        await self._ensure(cluster_id, episode, now)
        return await rowcount(self._session, self._where(cluster_id, episode).where(
            DUTIES.c.snoozes == shown).values(
            snoozed_by=by, snoozed_until=until, snoozes=shown + 1, updated_at=now)) == 1

    async def escalated(self, cluster_id: str, episode: int, kind: Escalation, *,
                        now: datetime) -> bool:
        """Stamp the escalation: True for the one replica that does; an exhausted escalation
        also stamps the first (it says everything the first would)."""
        await self._ensure(cluster_id, episode, now)
        column = (DUTIES.c.exhausted_escalated_at if kind is Escalation.EXHAUSTED
                  else DUTIES.c.escalated_at)
        values: dict[str, object] = {column.name: now, "updated_at": now}
        if kind is Escalation.EXHAUSTED:
            values["escalated_at"] = sa.func.coalesce(DUTIES.c.escalated_at, now)
        return await rowcount(self._session, self._where(cluster_id, episode).where(
            column.is_(None)).values(**values)) == 1
