"""A SQLite database already at the newest migration, for tests about what comes after.

Migrating an empty SQLite file to head (alembic, eighteen revisions) costs ~0.25 s of CPU; the
suite starts a bot on a fresh file hundreds of times. `migrated_sqlite(path)` copies a file that
this process migrated once instead (the PostgreSQL tests do the same with a template database:
`pg_migrated_url`, tests/conftest.py). What the copy skips is covered where it is the subject:
tests/storage/test_migrations.py migrates empty databases of each kind, the `db_url` fixture
hands out untouched ones, every real-process test's bot migrates its own, and every e2e test on
PostgreSQL starts from an empty database.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from storage.db import Database
from tests.pg import run_in_own_loop


def migrated_sqlite(path: Path) -> str:
    """DATABASE_URL of a SQLite file at `path` at the newest migration: a copy of this
    process's template, unless a file is there already (a restart on the same database)."""
    if not path.exists():
        shutil.copyfile(_template(), path)
    return f"sqlite:///{path}"


@functools.cache
def _template() -> Path:
    where = Path(tempfile.mkdtemp(prefix="bot-schema-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    path = where / "template.db"

    async def migrate() -> None:
        database = Database(f"sqlite:///{path}")
        try:
            await database.migrate()
        finally:
            await database.dispose()  # every change in the file itself, nothing in a journal

    run_in_own_loop(migrate())
    return path
