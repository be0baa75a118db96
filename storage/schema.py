"""Which code may run on the database's schema: the rule behind rolling upgrades both ways.

Migrations are expand-then-contract. Each says whether the previous release's code keeps
running on the schema it produces (`compatible_with_previous`, storage/migrations); every
migration run records, in `schema_compat`, the schema's revision and the oldest code head that
can run on it. A build meeting a database at a revision it doesn't know (an old replica
restarting after a newer one migrated, or a rollback) can't ask its own migrations about it —
it asks that row, by revision id: when its own head is the recorded oldest or any revision it
knows (so, older than the database), it runs without migrating; otherwise it refuses with one
line (`SchemaIncompatible`) and changes nothing.

`read_status` is sync (alembic's side of a connection, and `conn.run_sync`); it reads the
migrations from the files, so a database already current costs no alembic import.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from storage.migrations import head_revision, migrations, oldest_compatible
from storage.tables.coordination import SCHEMA_COMPAT


class SchemaIncompatible(RuntimeError):
    """The database is ahead of this build by a revision its code can't run on."""


@dataclass(frozen=True)
class SchemaStatus:
    current: tuple[str, ...]  # alembic_version's rows; () for a new database
    head: str  # this build's newest revision
    known: tuple[str, ...]  # this build's revisions, oldest first
    recorded_oldest: str | None  # schema_compat's answer for `current` (None: none recorded)

    @property
    def ahead(self) -> bool:
        """The database is at a revision this build doesn't know (a newer build migrated it)."""
        return any(rev not in self.known for rev in self.current)

    @property
    def pending(self) -> list[str]:
        """This build's migrations not yet applied (none when the database is ahead)."""
        if self.ahead:
            return []
        if not self.current:
            return list(self.known)
        newest = max(self.known.index(rev) for rev in self.current)
        return list(self.known[newest + 1:])

    @property
    def stale(self) -> bool:
        """At this build's head, with a record its markers disagree with: a marker corrected
        after the database was migrated (0016 and 0018, found by tests/test_rollback_live.py).
        `migrate` rewrites it, so older code reads the corrected answer."""
        return (self.current == (self.head,)
                and self.recorded_oldest != oldest_compatible(self.head))

    @property
    def runnable(self) -> bool:
        """Whether this build can run on the database (after its own pending migrations)."""
        if not self.ahead:
            return True
        return self.recorded_oldest is not None and self.recorded_oldest in self.known

    @property
    def rolling(self) -> bool:
        """Whether code at the database's current revision keeps running once this build's
        pending migrations are applied: a rolling update needs no stop of the old replicas."""
        if not self.pending or not self.current:
            return True
        oldest = oldest_compatible(self.head)
        return self.known.index(oldest) <= min(self.known.index(rev) for rev in self.current)

    def refusal(self) -> str:
        """The one line a refusing build prints."""
        at = ", ".join(self.current)
        if self.recorded_oldest is None:
            why = ("and it doesn't record which older code can run on it (migrated by a build "
                   "from before that record)")
        else:
            why = f"and it needs code at revision {self.recorded_oldest} or newer"
        return (f"the database is at revision {at}, which this build (head {self.head}) doesn't "
                f"know, {why}: run that release or a newer one (`cluster-bot db status` tells "
                "more); nothing was changed")


def read_status(conn: Connection) -> SchemaStatus:
    """The schema's status as this build sees it (one short read, no writes)."""
    inspector = sa.inspect(conn)
    current: tuple[str, ...] = ()
    if inspector.has_table("alembic_version"):
        current = tuple(str(v) for (v,) in conn.execute(
            sa.text("SELECT version_num FROM alembic_version")))
    recorded: str | None = None
    if current and inspector.has_table("schema_compat"):
        recorded = conn.execute(sa.select(SCHEMA_COMPAT.c.oldest_compatible).where(
            SCHEMA_COMPAT.c.revision == current[0])).scalar()
    return SchemaStatus(current=current, head=head_revision(),
                        known=tuple(m.revision for m in migrations()), recorded_oldest=recorded)


def record_compat(conn: Connection) -> None:
    """After a migration run, inside its transaction: record the schema's revision and the
    oldest code that can run on it (skipped while the table doesn't exist yet: a schema from
    before 0014, downgraded to it)."""
    if not sa.inspect(conn).has_table("schema_compat"):
        return
    versions = [str(v) for (v,) in conn.execute(
        sa.text("SELECT version_num FROM alembic_version"))]
    conn.execute(sa.delete(SCHEMA_COMPAT))
    for revision in versions:
        conn.execute(sa.insert(SCHEMA_COMPAT).values(
            revision=revision, oldest_compatible=oldest_compatible(revision),
            migrated_at=datetime.now(UTC)))
