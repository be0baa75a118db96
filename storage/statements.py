"""What the repository modules share: a dialect-aware upsert INSERT, rowcounts, managed fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

if TYPE_CHECKING:  # each dialect is imported when a database of its kind is used (start-up)
    from sqlalchemy.dialects import postgresql, sqlite

# Set by a repository itself (its update()/transition() stamps `updated_at`), never through
# **fields: an id never changes and a caller's clock must not overrule the statement's `now`.
MANAGED = frozenset({"id", "updated_at"})


def insert(session: AsyncConnection, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
    """An INSERT that knows ON CONFLICT, in the dialect of the connection's database.

    Both supported backends have the same ON CONFLICT clause; an upsert there is one atomic
    statement, unlike select-then-insert, which races between replicas.
    """
    return insert_in(session.dialect.name, table)


def insert_in(dialect: str, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
    """`insert` for the dialect named `dialect` ("sqlite", "postgresql"): what a statement built
    once per dialect starts from (e.g. `@cache def _claim(dialect: str)`, storage/outbox.py)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    raise NotImplementedError(f"no upsert for the {dialect} dialect")  # pragma: no cover


async def rowcount(session: AsyncConnection, stmt: sa.Update,
                   values: Mapping[str, Any] | None = None) -> int:
    """How many rows an UPDATE matched (with `values` bound, for one built once)."""
    result = await session.execute(stmt, values)
    count: int = result.rowcount
    return count
