"""Alembic migrations for the bot's schema, runnable from an installed package and any cwd.

The configuration is built in code (no alembic.ini lookup relative to the working directory):
`script_location` is this package's own folder. `alembic.ini` beside it is only for developers
using the alembic CLI (`alembic -c storage/migrations/alembic.ini revision --autogenerate …`
with DATABASE_URL set).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parent


def alembic_config() -> Config:
    """An alembic Config pointing at this folder (ConfigParser syntax: '%' must be doubled)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    return config


def upgrade_head(connection: Connection) -> None:
    """`alembic upgrade head` on an open (sync-facing) connection, inside its transaction."""
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
