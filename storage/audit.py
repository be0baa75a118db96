"""The audit trail's repository: append and read, nothing else."""

from __future__ import annotations

import builtins
from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.models import AuditEntry
from storage.rows import row_values, to_domain
from storage.tables.money import AUDIT


class AuditRepo:
    """The append-only audit trail: every state change and every refusal, in the order recorded.

    Append-only by construction: this repository has no update and no delete, and nothing else
    in the bot writes the `audit` table. Like every write, an entry added inside a transaction
    that rolls back is gone with it.

    "Newest" means most recently appended (highest id), which is also what `before_id` pages by;
    `at` is the time the caller stated and is not used for ordering.
    """

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, e: AuditEntry) -> None:
        await self._session.execute(sa.insert(AUDIT).values(row_values(e)))

    async def add_many(self, entries: Collection[AuditEntry]) -> None:
        """Append `entries` in their order: one statement, executed with a row each."""
        if entries:
            await self._session.execute(sa.insert(AUDIT), [row_values(e) for e in entries])

    async def list(
        self, *, subject_id: str | None = None, limit: int = 50, before_id: int | None = None
    ) -> builtins.list[AuditEntry]:
        """Up to `limit` entries, newest first: about `subject_id` if given, and appended before
        the entry numbered `before_id` if given (the next page of an earlier listing)."""
        # builtins.list: inside this class, a bare `list` in an annotation is this method.
        if limit < 1:
            # SQLite reads a negative LIMIT as "no limit": refuse rather than return everything.
            raise ValueError(f"limit must be at least 1, not {limit}")
        stmt = sa.select(AUDIT).order_by(AUDIT.c.id.desc()).limit(limit)
        if subject_id is not None:
            stmt = stmt.where(AUDIT.c.subject_id == subject_id)
        if before_id is not None:
            stmt = stmt.where(AUDIT.c.id < before_id)
        rows = (await self._session.execute(stmt)).mappings()
        return [to_domain(AuditEntry, row, skip=("id",)) for row in rows]

    async def in_period(self, start: datetime, end: datetime) -> builtins.list[AuditEntry]:
        """Every entry stated at an instant in [start, end), oldest first (by `at`; entries at
        the same instant in the order appended) — a month's trail for the export. Appended order
        alone is not oldest-first: a sweep or a replica may append an earlier instant later."""
        stmt = (sa.select(AUDIT).where(AUDIT.c.at >= start, AUDIT.c.at < end)
                .order_by(AUDIT.c.at, AUDIT.c.id))
        rows = (await self._session.execute(stmt)).mappings()
        return [to_domain(AuditEntry, row, skip=("id",)) for row in rows]

    async def count(self) -> int:
        """How many entries the trail holds."""
        total = await self._session.scalar(sa.select(sa.func.count()).select_from(AUDIT))
        return int(total or 0)

