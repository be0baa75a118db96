"""`cluster-bot db status`: the database's revision against this build's, and what that means.

Exit codes (scripts and deploy steps branch on them):
  0  this build runs on the database as it is (at its head, or ahead by compatible revisions);
  3  this build has migrations to apply (`cluster-bot migrate`, or the bot applies them when it
     starts) — the output says whether replicas of the current revision keep running after;
  2  this build can't run on it (ahead by an incompatible revision), or there is no database
     to read. Nothing is ever created or changed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from storage.schema import SchemaStatus

RUNS = 0
CANNOT = 2
PENDING = 3


def describe(status: SchemaStatus, *, version: str) -> tuple[list[str], int]:
    """The lines `db status` prints and its exit code."""
    lines = [f"database revision: {', '.join(status.current) or 'none (an empty database)'}",
             f"this build: cluster-bot {version}, head {status.head}"]
    if status.ahead:
        recorded = status.recorded_oldest or "not recorded"
        lines.append(f"ahead: the database is at a revision this build doesn't know; code "
                     f"from revision {recorded} on can run on it")
    else:
        lines.append(f"pending: {', '.join(status.pending) or 'none'}")
    if status.ahead and not status.runnable:
        lines.append("can run: no — " + status.refusal())
        return lines, CANNOT
    if status.pending:
        keep = ("yes" if status.rolling else
                "no: stop every replica before migrating (a migration in it is not compatible "
                "with the code now running)")
        lines.append("can run: yes, after `cluster-bot migrate` (the bot also migrates when it "
                     "starts)")
        if status.current:
            lines.append(f"replicas at {', '.join(status.current)} keep running after it: "
                         f"{keep}")
        return lines, PENDING
    lines.append("can run: yes" + (" (without migrating)" if status.ahead else ""))
    return lines, RUNS


async def _read(url: str) -> SchemaStatus:
    from storage.db import Database

    db = Database(url)
    try:
        return await db.schema_status()
    finally:
        await db.dispose()


def run(database_url: str, *, version: str) -> int:
    """Print the status; the exit code as above. A SQLite file that isn't there is not
    created (a wrong DATABASE_URL would otherwise look like a new, empty database)."""
    from sqlalchemy.exc import DBAPIError

    from storage.db import sqlite_path

    path = sqlite_path(database_url)
    if path is not None and not Path(path).is_file():
        print(f"cluster-bot: db status: no database at {path} (DATABASE_URL)",  # noqa: T201
              file=sys.stderr)
        return CANNOT
    try:
        status = asyncio.run(_read(database_url))
    except (DBAPIError, sqlite3.Error, OSError) as exc:
        print(f"cluster-bot: db status: can't read the database ({type(exc).__name__})",  # noqa: T201
              file=sys.stderr)
        return CANNOT
    lines, code = describe(status, version=version)
    for line in lines:
        print(line)  # noqa: T201
    return code
