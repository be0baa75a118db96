"""The readiness checks' repository: start one, list those still watching, move one along.

Every move is a compare-and-set on the row (its state, or `prompts` for Keep waiting), so two
replicas or a restart never announce Serving twice nor ask the owner twice — nor end a serving
period twice when a node is lost.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.idle import IdleState
from bot.domain.readiness import ReadinessState, ReadinessWatch
from storage.rows import json_data, row_values, to_domain
from storage.statements import insert, rowcount
from storage.tables.clusters import READINESS

_R = READINESS.c
# Built once (values bound at execution): see storage/repositories.py.
_GET = sa.select(READINESS).where(_R.cluster_id == sa.bindparam("cluster_id"))


class ReadinessRepo:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, watch: ReadinessWatch) -> None:
        """Start watching; a cluster that already has a check keeps it."""
        stmt = insert(self._session, READINESS).values(row_values(watch))
        await self._session.execute(stmt.on_conflict_do_nothing(index_elements=["cluster_id"]))

    async def get(self, cluster_id: str) -> ReadinessWatch | None:
        row = (await self._session.execute(_GET, {"cluster_id": cluster_id})
               ).mappings().one_or_none()
        return None if row is None else to_domain(ReadinessWatch, row)

    async def watching(self, *, limit: int = 200) -> list[ReadinessWatch]:
        rows = (await self._session.execute(
            sa.select(READINESS).where(_R.state == ReadinessState.WATCHING.value)
            .order_by(_R.updated_at).limit(limit))).mappings()
        return [to_domain(ReadinessWatch, row) for row in rows]

    async def followed(self, *, limit: int = 200) -> list[ReadinessWatch]:
        """The rows whose log is followed: a readiness check still watching, or an idle rule
        still in play (active, asked, or its terminate under way)."""
        live = (IdleState.ACTIVE.value, IdleState.IDLE.value, IdleState.TERMINATING.value)
        rows = (await self._session.execute(
            sa.select(READINESS).where(sa.or_(_R.state == ReadinessState.WATCHING.value,
                                              _R.idle_state.in_(live)))
            .order_by(_R.updated_at).limit(limit))).mappings()
        return [to_domain(ReadinessWatch, row) for row in rows]

    async def read_to(self, watch: ReadinessWatch, *, cursors: dict[str, datetime],
                      last_line_at: datetime | None, now: datetime) -> bool:
        """Store the one shared cursor per node after a poll, whatever the readiness state —
        unless the watcher re-armed the check since (a restart: its cursors win)."""
        rearmed = (_R.rearmed_at.is_(None) if watch.rearmed_at is None
                   else _R.rearmed_at == watch.rearmed_at)
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == watch.cluster_id, rearmed,
        ).values(cursors=json_data(cursors), last_line_at=last_line_at, updated_at=now)))

    async def idle_move(self, cluster_id: str, *, from_: IdleState, episode: int,
                        to: IdleState, now: datetime, **changes: Any) -> bool:
        """One idle move (fire, keep, terminate), only from the state and episode it was
        decided on: True for the one call that made it (a restart or a replica: False)."""
        values = {k: v if isinstance(v, datetime) or v is None else json_data(v)
                  for k, v in changes.items()}
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == cluster_id, _R.idle_state == from_.value,
            _R.idle_episode == episode,
        ).values(**values, idle_state=to.value, updated_at=now)))

    async def idle_end(self, cluster_id: str, *, now: datetime) -> bool:
        """The cluster stopped billing: its idle rule stops too."""
        live = (IdleState.ACTIVE.value, IdleState.IDLE.value, IdleState.TERMINATING.value)
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == cluster_id, _R.idle_state.in_(live),
        ).values(idle_state=IdleState.ENDED.value, updated_at=now)))

    async def advance(self, cluster_id: str, *, now: datetime, **changes: Any) -> bool:
        """Store what one poll read, only while still watching; True if it was stored."""
        values = {k: v if isinstance(v, datetime) or v is None else json_data(v)
                  for k, v in changes.items()}
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == cluster_id, _R.state == ReadinessState.WATCHING.value,
        ).values(**values, updated_at=now)))

    async def settle(self, cluster_id: str, *, to: ReadinessState, now: datetime,
                     serving_at: datetime | None = None) -> bool:
        """watching → serving | ended; True only for the call that made the move."""
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == cluster_id, _R.state == ReadinessState.WATCHING.value,
        ).values(state=to.value, serving_at=serving_at, updated_at=now)))

    async def move(self, cluster_id: str, *, expected: ReadinessState, now: datetime,
                   **changes: Any) -> bool:
        """A move the cluster's state made (serving → stopped → watching again, or ended;
        bot/domain/readiness.py `after_observation`), only from the state it was decided on;
        True if it was stored."""
        values = {k: v if isinstance(v, datetime) or v is None else json_data(v)
                  for k, v in changes.items()}
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == cluster_id, _R.state == expected.value,
        ).values(**values, updated_at=now)))

    async def ask(self, cluster_id: str, *, shown: int, now: datetime) -> bool:
        """The limit passed: count the prompt and stop the clock until the owner answers.
        Bound to the count the caller saw; True only for the call that asked."""
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == cluster_id, _R.state == ReadinessState.WATCHING.value,
            _R.prompts == shown, _R.deadline_at.is_not(None),
        ).values(prompts=shown + 1, deadline_at=None, updated_at=now)))

    async def keep_waiting(self, cluster_id: str, *, prompt: int, until: datetime,
                           now: datetime) -> bool:
        """Keep waiting on prompt `prompt`: a new deadline, once; False if already answered
        (or the cluster served or ended meanwhile)."""
        return bool(await rowcount(self._session, sa.update(READINESS).where(
            _R.cluster_id == cluster_id, _R.state == ReadinessState.WATCHING.value,
            _R.prompts == prompt, _R.deadline_at.is_(None),
        ).values(deadline_at=until, updated_at=now)))
