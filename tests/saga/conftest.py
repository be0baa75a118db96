"""The saga tests run on the harness's SQLite file and on a fresh PostgreSQL database."""

from tests.e2e.conftest import database_url

__all__ = ["database_url"]
