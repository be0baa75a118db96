"""Extensions waiting for approvers: add one, read it (locked while deciding), decide it once.

Every decision is a compare-and-set on `status` (pending → applied | rejected | refused |
stale), so double presses and racing approvers decide an extension exactly once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.extension import Extension, ExtensionStatus
from storage.rows import field_values, row_values, to_domain
from storage.statements import MANAGED, rowcount
from storage.tables.money import EXTENSIONS

_E = EXTENSIONS.c


class ExtensionRepo:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, extension: Extension) -> None:
        await self._session.execute(sa.insert(EXTENSIONS).values(row_values(extension)))

    async def get(self, id: str, *, for_update: bool = False) -> Extension | None:
        """`for_update`: lock the row until the transaction ends (PostgreSQL; SQLite's
        transactions are serialised already)."""
        query = sa.select(EXTENSIONS).where(_E.id == id)
        row = (await self._session.execute(
            query.with_for_update() if for_update else query)).mappings().one_or_none()
        return None if row is None else to_domain(Extension, row)

    async def pending(self, *, cluster_id: str | None = None) -> list[Extension]:
        query = sa.select(EXTENSIONS).where(_E.status == ExtensionStatus.PENDING.value)
        if cluster_id is not None:
            query = query.where(_E.cluster_id == cluster_id)
        rows = (await self._session.execute(query.order_by(_E.created_at, _E.id))).mappings()
        return [to_domain(Extension, row) for row in rows]

    async def list_all(self) -> list[Extension]:
        rows = (await self._session.execute(
            sa.select(EXTENSIONS).order_by(_E.created_at, _E.id))).mappings()
        return [to_domain(Extension, row) for row in rows]

    async def decide(self, id: str, *, now: datetime, **fields: Any) -> Extension | None:
        """Set `fields` only while the extension is pending; None if it no longer was."""
        values = field_values(Extension, fields, forbidden=MANAGED)
        stmt = (sa.update(EXTENSIONS)
                .where(_E.id == id, _E.status == ExtensionStatus.PENDING.value)
                .values({**values, "updated_at": now}))
        if await rowcount(self._session, stmt) == 0:
            return None
        return await self.get(id)
