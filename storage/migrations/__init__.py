"""Alembic migrations for the bot's schema, runnable from an installed package and any cwd.

The configuration is built in code (no alembic.ini lookup relative to the working directory):
`script_location` is this package's own folder. `alembic.ini` beside it is only for developers
using the alembic CLI (`alembic -c storage/migrations/alembic.ini revision --autogenerate …`
with DATABASE_URL set).

Owns: the revisions (versions/), the environment alembic runs them in (env.py, against
storage.tables.metadata) and the head this build knows.
May import: storage (and alembic, sqlalchemy); nothing of bot/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # alembic costs ~0.15 s to import: only when a migration must run
    from alembic.config import Config
    from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parent
_REVISION = re.compile(r"^(down_)?revision\s*(?::[^=]*)?=\s*['\"]?([\w]+)?['\"]?", re.M)
# Every migration says whether the previous release's code keeps running on the schema it
# produces (expand-then-contract, docs/operations.md "Upgrading"): True for additive changes
# only (a new table, a nullable or defaulted column, an index); False for anything that drops,
# renames, narrows or makes a column required that older code writes without.
MARKER = "compatible_with_previous"
_MARKER = re.compile(rf"^{MARKER}\s*(?::[^=]*)?=\s*(True|False)\s*(?:#.*)?$", re.M)


@dataclass(frozen=True)
class Migration:
    revision: str
    down_revision: str | None
    compatible_with_previous: bool | None  # None: the file doesn't say (a test refuses that)
    path: Path


def migrations() -> list[Migration]:
    """This build's migrations, oldest first (read from the files: alembic is not imported)."""
    found: dict[str, Migration] = {}
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        text = path.read_text()
        ids = {bool(m[1]): m[2] for m in _REVISION.finditer(text)}
        if not ids.get(False):
            continue
        marker = _MARKER.search(text)
        down = ids.get(True)
        found[ids[False]] = Migration(
            revision=ids[False], down_revision=None if down in (None, "None") else down,
            compatible_with_previous=None if marker is None else marker[1] == "True",
            path=path)
    chain: list[Migration] = []
    by_down = {m.down_revision: m for m in found.values()}
    step = by_down.get(None)
    while step is not None:
        chain.append(step)
        step = by_down.get(step.revision)
    return chain


def oldest_compatible(revision: str) -> str:
    """The oldest revision whose code can run on the schema at `revision`: walk back while each
    migration says the code before it keeps running (additive steps compose)."""
    by_id = {m.revision: m for m in migrations()}
    oldest = revision
    while (step := by_id.get(oldest)) and step.compatible_with_previous and step.down_revision:
        oldest = step.down_revision
    return oldest


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
