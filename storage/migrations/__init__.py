"""Alembic migrations for the bot's schema, runnable from an installed package and any cwd.

The configuration is built in code (no alembic.ini lookup relative to the working directory):
`script_location` is this package's own folder. `alembic.ini` beside it is only for developers
using the alembic CLI (`alembic -c storage/migrations/alembic.ini revision --autogenerate …`
with DATABASE_URL set).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # alembic costs ~0.15 s to import: only when a migration must run
    from alembic.config import Config
    from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parent
_REVISION = re.compile(r"^(down_)?revision\s*(?::[^=]*)?=\s*['\"]?([\w]+)?['\"]?", re.M)


def head_revision() -> str:
    """The newest revision, read from the version files without importing alembic: the one no
    other revision names as its `down_revision` (the chain has one head)."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        for match in _REVISION.finditer(path.read_text()):
            if match[2] and match[2] != "None":
                (downs if match[1] else revisions).add(match[2])
    heads = revisions - downs
    if len(heads) != 1:
        raise RuntimeError(f"migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def alembic_config() -> Config:
    """An alembic Config pointing at this folder (ConfigParser syntax: '%' must be doubled)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    return config


def upgrade_head(connection: Connection) -> None:
    """`alembic upgrade head` on an open (sync-facing) connection, inside its transaction."""
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
