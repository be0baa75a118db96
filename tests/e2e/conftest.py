"""The e2e tests' choice of database: `database_url` runs a test on the harness's SQLite file and
on a fresh PostgreSQL database of the session's throwaway server (tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None (the harness's default SQLite file in tmp_path) or a PostgreSQL DATABASE_URL."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        return url
    return None
