"""Cluster templates (bot/domain/templates.py): saved, listed by scope, deleted by name."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.templates import ClusterTemplate
from storage.rows import json_data
from storage.tables.people import TEMPLATES

_COLUMNS = ("id", "scope", "name", "owner_id", "created_at")
# Built once (values bound at execution): see storage/repositories.py.
_IN_SCOPES = (sa.select(TEMPLATES)
              .where(TEMPLATES.c.scope.in_(sa.bindparam("scopes", expanding=True)))
              .order_by(TEMPLATES.c.name, TEMPLATES.c.scope))


class TemplateRepo:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, template: ClusterTemplate) -> None:
        """Insert it; IntegrityError when its scope already has that name."""
        settings = template.model_dump(mode="python", exclude=set(_COLUMNS))
        await self._session.execute(sa.insert(TEMPLATES).values(
            id=template.id, scope=template.scope, name=template.name,
            owner_id=template.owner_id, created_at=template.created_at,
            settings=json_data(settings)))

    async def in_scopes(self, scopes: Collection[str]) -> list[ClusterTemplate]:
        """Every template of `scopes`, by name."""
        rows = (await self._session.execute(_IN_SCOPES, {"scopes": sorted(scopes)})
                ).mappings().all()
        return [_template(row) for row in rows]

    async def get(self, id: str) -> ClusterTemplate | None:
        row = (await self._session.execute(
            sa.select(TEMPLATES).where(TEMPLATES.c.id == id))).mappings().first()
        return _template(row) if row is not None else None

    async def delete(self, id: str) -> bool:
        result = await self._session.execute(sa.delete(TEMPLATES).where(TEMPLATES.c.id == id))
        return bool(result.rowcount)


def _template(row: sa.RowMapping) -> ClusterTemplate:
    data: dict[str, Any] = dict(row["settings"])
    data.update({name: row[name] for name in _COLUMNS})
    return ClusterTemplate.model_validate(data)
