"""UtcDateTime and normalize_url: the two small pieces everything else relies on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import pytest_asyncio
import sqlalchemy as sa
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from storage.db import Database, normalize_url
from storage.types import UtcDateTime

_meta = sa.MetaData()
_stamps = sa.Table(
    "stamps", _meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("at", UtcDateTime, nullable=True),
)


@pytest_asyncio.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def engine(request, tmp_path):
    # PostgreSQL's session TimeZone is not UTC on the test server (tests/pg.py): timestamptz
    # values must still go in and come out as the same instants.
    if request.param == "postgres":
        url = normalize_url(request.getfixturevalue("pg_url"))
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(_meta.create_all)
    yield engine
    await engine.dispose()


async def _round_trip(engine: AsyncEngine, value: datetime | None) -> datetime | None:
    async with engine.begin() as conn:
        await conn.execute(sa.delete(_stamps))
        await conn.execute(sa.insert(_stamps).values(id=1, at=value))
        back: datetime | None = (await conn.execute(sa.select(_stamps.c.at))).scalar_one()
        return back


async def test_aware_utc_in_aware_utc_out(engine):
    when = datetime(2026, 11, 29, 10, 0, 1, 123456, tzinfo=UTC)
    back = await _round_trip(engine, when)
    assert back == when
    assert back.tzinfo is UTC


async def test_other_offset_is_stored_as_the_same_instant_in_utc(engine):
    paris = timezone(timedelta(hours=2))
    when = datetime(2026, 11, 29, 12, 30, tzinfo=paris)
    back = await _round_trip(engine, when)
    assert back == when
    assert back.tzinfo is UTC
    assert back.hour == 10
    # What SQLite holds is the UTC wall time as text; PostgreSQL holds the instant, shown here
    # in UTC whatever the session's zone.
    sql = ("SELECT at FROM stamps" if engine.dialect.name == "sqlite"
           else "SELECT CAST(at AT TIME ZONE 'UTC' AS TEXT) FROM stamps")
    async with engine.connect() as conn:
        raw = (await conn.execute(sa.text(sql))).scalar_one()
    assert raw.startswith("2026-11-29 10:30:00")


async def test_none_round_trips(engine):
    assert await _round_trip(engine, None) is None


async def test_naive_datetime_is_refused(engine):
    with pytest.raises(StatementError) as caught:
        await _round_trip(engine, datetime(2026, 11, 29, 10, 0))
    assert isinstance(caught.value.orig, ValueError)
    assert "naive" in str(caught.value.orig)


def test_bind_refuses_non_datetimes():
    with pytest.raises(TypeError):
        UtcDateTime().process_bind_param(
            "2026-11-29", sa.create_engine("sqlite://").dialect  # type: ignore[arg-type]
        )


async def test_comparisons_convert_the_parameter_too(engine):
    await _round_trip(engine, datetime(2026, 11, 29, 10, 0, tzinfo=UTC))
    # 10:30+02:00 is 08:30 UTC: before the stored 10:00 UTC, although "10:30" > "10:00" as text.
    bound = datetime(2026, 11, 29, 10, 30, tzinfo=timezone(timedelta(hours=2)))
    async with engine.connect() as conn:
        hits = (await conn.execute(sa.select(_stamps.c.id).where(_stamps.c.at < bound))).all()
    assert hits == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///bot.db", "sqlite+aiosqlite:///bot.db"),
        ("sqlite:////var/lib/bot/bot.db", "sqlite+aiosqlite:////var/lib/bot/bot.db"),
        ("sqlite://", "sqlite+aiosqlite://"),
        ("sqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite:///x.db"),
        ("postgresql://u:p@db:5432/bot", "postgresql+asyncpg://u:p@db:5432/bot"),
        ("postgres://u:p@db/bot?ssl=require", "postgresql+asyncpg://u:p@db/bot?ssl=require"),
        ("postgresql+asyncpg://u@db/bot", "postgresql+asyncpg://u@db/bot"),
        ("  sqlite:///bot.db\n", "sqlite+aiosqlite:///bot.db"),
    ],
)
def test_normalize_url(url, expected):
    assert normalize_url(url) == expected


@pytest.mark.parametrize(
    "url",
    ["mysql://u:secret@db/bot", "sqlite+pysqlite:///x.db", "postgresql+psycopg2://u:secret@db/b",
     "bot.db", "", "http://example.com"],
)
def test_normalize_url_refuses_the_rest_without_leaking_secrets(url):
    with pytest.raises(ValueError, match="unsupported database URL") as caught:
        normalize_url(url)
    assert "secret" not in str(caught.value)


async def test_database_takes_a_postgres_url_without_connecting():
    db = Database("postgres://bot:pw@127.0.0.1:9/bot")
    try:
        assert db.engine.dialect.name == "postgresql"
        assert db.engine.dialect.driver == "asyncpg"
    finally:
        await db.dispose()
