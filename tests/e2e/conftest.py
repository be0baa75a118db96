"""The e2e tests' choice of database: `database_url` runs a test on the harness's SQLite file and
on a fresh PostgreSQL database of the session's throwaway server (tests/conftest.py); and the
slow-callback check (tests/loopwatch.py) on every e2e test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.loopwatch import SLOW, watch


@pytest.fixture(autouse=True)
async def no_slow_callbacks() -> AsyncIterator[None]:
    """Fails the test if any callback held its event loop for SLOW s of CPU or more."""
    with watch(asyncio.get_running_loop()) as slow:
        yield
    if slow.found:
        pytest.fail(f"the event loop was blocked ≥ {SLOW * 1000:.0f} ms: {slow.report()}",
                    pytrace=False)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None (the harness's default SQLite file in tmp_path) or a PostgreSQL DATABASE_URL: a
    fresh database already at the newest migration (tests/conftest.py's template copy; the
    real-process tests and tests/storage/test_migrations.py migrate empty ones)."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_migrated_url")
        return url
    return None
