"""Column types shared by the tables.

SQLite has no time zone type: a `DateTime(timezone=True)` column comes back naive there, while
PostgreSQL's `timestamptz` comes back aware. `UtcDateTime` hides the difference so the rest of the
bot only ever sees aware UTC datetimes, whatever the backend.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """An aware-UTC datetime column.

    On the way in it refuses naive datetimes (a naive value is a bug: we could only guess its
    zone) and converts any other offset to UTC, so values stored on SQLite sort and compare as
    text correctly. On the way out it always returns an aware datetime in UTC.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"UtcDateTime expects a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: pass an aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):  # pragma: no cover - every supported driver parses
            raise TypeError(f"UtcDateTime read a {type(value).__name__}, not a datetime")
        if value.tzinfo is None:
            # Only SQLite gets here: we stored UTC, the zone was dropped on the way.
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
