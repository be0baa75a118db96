"""The database tables (sqlmodel), one module per aggregate, all on one `MetaData`.

Owns: the table definitions — requests (quotes, requests, launch intents, approvals), clusters
(clusters, volumes, terminations, readiness), money (audit, extensions), outbox (notices, posts,
messages, DM channels, digests), people (duties, templates), coordination (leases, action
claims, schema compatibility), installs (Slack installations, OAuth states) — and `metadata`,
complete once this package is imported (what alembic's env.py and the migration tests compare
against). Enums are plain strings, money BIGINT cents, every datetime column a `UtcDateTime`;
the rows' translation to domain models is storage/rows.py's.
May import: storage.types, storage.sealing (column types); nothing of bot/.
"""

from storage.tables import clusters, coordination, installs, money, outbox, people, requests
from storage.tables.base import metadata

__all__ = ["clusters", "coordination", "installs", "metadata", "money", "outbox", "people",
           "requests"]
