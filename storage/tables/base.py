"""What every table shares: one `MetaData` of the bot's own, with a naming convention so every
constraint and index has a stable, predictable name for migrations on both SQLite and
PostgreSQL, and the server defaults of the NOT NULL columns added after 0001."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlmodel import SQLModel

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Server defaults of the NOT NULL columns added after 0001 (the same ones the migration uses).
EMPTY_LIST = sa.text("'[]'")


def default(value: sa.TextClause | sa.ColumnElement[bool]) -> dict[str, Any]:
    """`sa_column_kwargs` for a column the database fills in for rows older than it."""
    return {"server_default": value}


class Base(SQLModel):
    """The bot's tables: a metadata of their own, apart from any other SQLModel user."""

    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


metadata = Base.metadata
