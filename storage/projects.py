"""Which project each subject (a request, a cluster, a quote) is charged to: the audit
export's `project` column (bot/domain/audit_csv.py)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.rows import in_chunks
from storage.tables.clusters import CLUSTERS
from storage.tables.requests import QUOTES, REQUESTS


class ProjectLookup:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def of_subjects(self, subject_ids: list[str]) -> dict[str, str]:
        """The project of each of `subject_ids` that is a request, a cluster or a quote with
        one (`project=`)."""
        found: dict[str, str] = {}
        for chunk in in_chunks(subject_ids):
            for table in (REQUESTS, CLUSTERS):
                rows = await self._session.execute(sa.select(table.c.id, table.c.project).where(
                    table.c.id.in_(chunk), table.c.project.is_not(None)))
                found.update({str(id): str(project) for id, project in rows})
            quotes = await self._session.execute(sa.select(QUOTES.c.id, QUOTES.c.spec)
                                                 .where(QUOTES.c.id.in_(chunk)))
            for id, spec in quotes:
                if isinstance(spec, dict) and isinstance(spec.get("project"), str):
                    found[str(id)] = spec["project"]
        return found
