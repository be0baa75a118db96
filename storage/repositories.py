"""Repositories: the only code that reads and writes the tables.

Every repository works inside the one `AsyncSession` (one transaction) it was given by
`Database.transaction()`; none of them commits. They take and return the frozen domain models of
`bot.domain.models`, never rows. Statements are SQLAlchemy Core against the tables, so there is no
identity map to go stale between a compare-and-set and the read that follows it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from bot.domain.errors import UnknownResource
from bot.domain.models import (
    Approval,
    ClusterRecord,
    ClusterState,
    LaunchRequest,
    MessageRef,
    QuoteInfo,
    RequestStatus,
    VolumeRecord,
)
from bot.domain.watch import Notice
from storage.tables import (
    APPROVALS,
    CLUSTERS,
    MESSAGES,
    NOTICES,
    QUOTES,
    REQUESTS,
    VOLUMES,
    field_values,
    row_values,
    to_domain,
)

# Set by the repository itself in transition()/update(), never through **fields.
_MANAGED = frozenset({"id", "updated_at"})
_LIVE = tuple(s.value for s in ClusterState if s.is_live)
# Bound parameters per IN (…): well under SQLite's limit (32766; 999 before 3.32).
_IN_CHUNK = 500


class QuoteRepo:
    """Provider quotes, by id."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add(self, q: QuoteInfo) -> None:
        await self._session.execute(sa.insert(QUOTES).values(row_values(q)))

    async def get(self, id: str) -> QuoteInfo | None:
        row = (await self._session.execute(
            sa.select(QUOTES).where(QUOTES.c.id == id)
        )).mappings().one_or_none()
        return None if row is None else to_domain(QuoteInfo, row)


class RequestRepo:
    """Launch requests; `transition()` is the state machine's atomic compare-and-set."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add(self, r: LaunchRequest) -> None:
        await self._session.execute(sa.insert(REQUESTS).values(row_values(r)))

    async def get(self, id: str) -> LaunchRequest | None:
        row = (await self._session.execute(
            sa.select(REQUESTS).where(REQUESTS.c.id == id)
        )).mappings().one_or_none()
        return None if row is None else to_domain(LaunchRequest, row)

    async def for_quote(self, quote_id: str) -> LaunchRequest | None:
        """The request on `quote_id`, if any: there is at most one (`quote_id` is unique)."""
        row = (await self._session.execute(
            sa.select(REQUESTS).where(REQUESTS.c.quote_id == quote_id)
        )).mappings().one_or_none()
        return None if row is None else to_domain(LaunchRequest, row)

    async def transition(
        self,
        id: str,
        *,
        from_: Collection[RequestStatus],
        to: RequestStatus,
        now: datetime,
        quote_id: str | None = None,
        new_quote_id: str | None = None,
        **fields: Any,
    ) -> LaunchRequest | None:
        """Move `id` from one of `from_` to `to` in one UPDATE; None if it was not in `from_`.

        `quote_id` is a guard (the request must still be on that quote, e.g. the quote on the
        card the approver clicked); `new_quote_id` replaces the quote. `fields` are any other
        LaunchRequest fields to set in the same statement. Exactly one of several concurrent
        callers wins: the database serializes the UPDATEs and the losers' WHERE no longer matches.
        """
        values = field_values(LaunchRequest, fields, forbidden=_MANAGED | {"status", "quote_id"})
        if new_quote_id is not None:
            values["quote_id"] = new_quote_id
        expected = [RequestStatus(s).value for s in from_]
        if not expected:
            return None
        stmt = (
            sa.update(REQUESTS)
            .where(REQUESTS.c.id == id, REQUESTS.c.status.in_(expected))
            .values({**values, "status": RequestStatus(to).value, "updated_at": now})
        )
        if quote_id is not None:
            stmt = stmt.where(REQUESTS.c.quote_id == quote_id)
        if await _rowcount(self._session, stmt) == 0:
            return None
        return await self.get(id)

    async def update(self, id: str, *, now: datetime, **fields: Any) -> LaunchRequest:
        """Set `fields` and `updated_at=now` whatever the status; UnknownResource if no such id."""
        values = field_values(LaunchRequest, fields, forbidden=_MANAGED)
        stmt = sa.update(REQUESTS).where(REQUESTS.c.id == id).values({**values, "updated_at": now})
        if await _rowcount(self._session, stmt) == 0:
            raise UnknownResource("launch request", id)
        updated = await self.get(id)
        assert updated is not None  # we just updated it inside this transaction
        return updated

    async def list_by_status(
        self, statuses: Collection[RequestStatus], *, updated_before: datetime | None = None
    ) -> list[LaunchRequest]:
        """Requests in `statuses` (last updated strictly before `updated_before`), oldest first."""
        stmt = (
            sa.select(REQUESTS)
            .where(REQUESTS.c.status.in_([RequestStatus(s).value for s in statuses]))
            .order_by(REQUESTS.c.updated_at, REQUESTS.c.id)
        )
        if updated_before is not None:
            stmt = stmt.where(REQUESTS.c.updated_at < updated_before)
        rows = (await self._session.execute(stmt)).mappings()
        return [to_domain(LaunchRequest, row) for row in rows]


class ApprovalRepo:
    """The approve/reject audit trail."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add(self, a: Approval) -> None:
        await self._session.execute(sa.insert(APPROVALS).values(row_values(a)))

    async def for_request(self, request_id: str) -> list[Approval]:
        """Every decision on `request_id`, oldest first."""
        rows = (await self._session.execute(
            sa.select(APPROVALS)
            .where(APPROVALS.c.request_id == request_id)
            .order_by(APPROVALS.c.at, APPROVALS.c.id)
        )).mappings()
        return [to_domain(Approval, row, skip=("id",)) for row in rows]


class ClusterRepo:
    """Clusters the bot keeps track of until they stop billing."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add(self, c: ClusterRecord) -> ClusterRecord:
        """Insert `c`; if its id is already stored, return the stored record unchanged."""
        stmt = _insert(self._session, CLUSTERS).values(row_values(c))
        await self._session.execute(stmt.on_conflict_do_nothing(index_elements=["id"]))
        stored = await self.get(c.id)
        assert stored is not None  # inserted now or earlier, and visible to this transaction
        return stored

    async def get(self, id: str) -> ClusterRecord | None:
        row = (await self._session.execute(
            sa.select(CLUSTERS).where(CLUSTERS.c.id == id)
        )).mappings().one_or_none()
        return None if row is None else to_domain(ClusterRecord, row)

    async def update(self, id: str, *, now: datetime, **fields: Any) -> ClusterRecord:
        """Set `fields` (and `updated_at=now`); UnknownResource if no such cluster."""
        values = field_values(ClusterRecord, fields, forbidden=_MANAGED)
        stmt = sa.update(CLUSTERS).where(CLUSTERS.c.id == id).values({**values, "updated_at": now})
        if await _rowcount(self._session, stmt) == 0:
            raise UnknownResource("cluster", id)
        updated = await self.get(id)
        assert updated is not None  # we just updated it inside this transaction
        return updated

    async def list_live(self) -> list[ClusterRecord]:
        """Clusters that may still bill (provisioning…terminating), oldest first."""
        return await self._list(
            sa.select(CLUSTERS)
            .where(CLUSTERS.c.status.in_(_LIVE))
            .order_by(CLUSTERS.c.created_at, CLUSTERS.c.id)
        )

    async def list_recent(self, limit: int = 50) -> list[ClusterRecord]:
        """The `limit` most recently created clusters, newest first."""
        return await self._list(
            sa.select(CLUSTERS)
            .order_by(CLUSTERS.c.created_at.desc(), CLUSTERS.c.id.desc())
            .limit(limit)
        )

    async def list_all(self) -> list[ClusterRecord]:
        """Every cluster, oldest first."""
        return await self._list(sa.select(CLUSTERS).order_by(CLUSTERS.c.created_at, CLUSTERS.c.id))

    async def ids(self, ids: Collection[str]) -> set[str]:
        """Which of `ids` are stored."""
        wanted = list(dict.fromkeys(ids))
        known: set[str] = set()
        for start in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[start:start + _IN_CHUNK]
            found = await self._session.execute(
                sa.select(CLUSTERS.c.id).where(CLUSTERS.c.id.in_(chunk))
            )
            known.update(found.scalars())
        return known

    async def by_request(self, request_id: str) -> ClusterRecord | None:
        """The cluster launched for `request_id` (the newest, should there ever be several)."""
        found = await self._list(
            sa.select(CLUSTERS)
            .where(CLUSTERS.c.request_id == request_id)
            .order_by(CLUSTERS.c.created_at.desc(), CLUSTERS.c.id.desc())
            .limit(1)
        )
        return found[0] if found else None

    async def _list(self, stmt: sa.Select[Any]) -> list[ClusterRecord]:
        rows = (await self._session.execute(stmt)).mappings()
        return [to_domain(ClusterRecord, row) for row in rows]


class MessageRepo:
    """Coordinates of the Slack messages the bot edits, one per (kind, subject_id)."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def get(self, kind: str, subject_id: str) -> MessageRef | None:
        row = (await self._session.execute(
            sa.select(MESSAGES.c.channel_id, MESSAGES.c.ts)
            .where(MESSAGES.c.kind == kind, MESSAGES.c.subject_id == subject_id)
        )).mappings().one_or_none()
        return None if row is None else to_domain(MessageRef, row)

    async def put(self, kind: str, subject_id: str, ref: MessageRef, *, now: datetime) -> None:
        """Record where the message is, replacing any earlier ref (one atomic upsert)."""
        stmt = _insert(self._session, MESSAGES).values(
            kind=kind, subject_id=subject_id, channel_id=ref.channel_id, ts=ref.ts,
            created_at=now, updated_at=now,
        )
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["kind", "subject_id"],
            set_={"channel_id": ref.channel_id, "ts": ref.ts, "updated_at": now},
        ))


class NoticeRepo:
    """The watcher's outbox: each (cluster_id, key) is stored, and so announced, at most once."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def add_new(self, notices: Sequence[Notice]) -> list[Notice]:
        """Store the notices whose (cluster_id, key) is new; return exactly those, in order.

        One INSERT … ON CONFLICT DO NOTHING each: a key stored earlier — or by a concurrent
        transaction, which the database makes this one wait for — inserts nothing and raises
        nothing, so of several racing watchers exactly one gets to announce the notice.
        """
        added: list[Notice] = []
        for notice in notices:
            # RETURNING, not rowcount: a row comes back exactly when this statement inserted,
            # the same on every driver (rowcount next to RETURNING is not).
            stmt = (
                _insert(self._session, NOTICES).values(row_values(notice))
                .on_conflict_do_nothing(index_elements=["cluster_id", "key"])
                .returning(NOTICES.c.id)
            )
            if (await self._session.execute(stmt)).first() is not None:
                added.append(notice)
        return added

    async def pending(self, limit: int = 100) -> list[Notice]:
        """Notices not delivered yet, oldest first (in the order they were stored)."""
        return await self._list(
            sa.select(NOTICES).where(NOTICES.c.delivered_at.is_(None))
            .order_by(NOTICES.c.id).limit(limit)
        )

    async def mark_delivered(self, cluster_id: str, key: str, *, now: datetime) -> None:
        """Record the delivery; a notice delivered before keeps its first delivery time.

        UnknownResource if there is no such notice.
        """
        match = (NOTICES.c.cluster_id == cluster_id, NOTICES.c.key == key)
        stmt = (
            sa.update(NOTICES).where(*match, NOTICES.c.delivered_at.is_(None))
            .values(delivered_at=now)
        )
        if await _rowcount(self._session, stmt) == 0:
            exists = await self._session.execute(sa.select(NOTICES.c.id).where(*match))
            if exists.first() is None:
                raise UnknownResource("notice", f"{cluster_id}/{key}")

    async def for_cluster(self, cluster_id: str) -> list[Notice]:
        """Every notice about `cluster_id`, delivered or not, oldest first."""
        return await self._list(
            sa.select(NOTICES).where(NOTICES.c.cluster_id == cluster_id).order_by(NOTICES.c.id)
        )

    async def _list(self, stmt: sa.Select[Any]) -> list[Notice]:
        rows = (await self._session.execute(stmt)).mappings()
        return [to_domain(Notice, row, skip=("id",)) for row in rows]


class VolumeRepo:
    """Persistent volumes the bot knows of, and when to remind about the orphaned ones."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def upsert(self, v: VolumeRecord) -> VolumeRecord:
        """Insert `v`, or replace every field of the stored volume with `v`'s (one statement)."""
        stmt = _insert(self._session, VOLUMES).values(row_values(v))
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["id"],
            set_={c.name: stmt.excluded[c.name] for c in VOLUMES.columns if c.name != "id"},
        ))
        stored = await self.get(v.id)
        assert stored is not None  # written just now, inside this transaction
        return stored

    async def get(self, id: str) -> VolumeRecord | None:
        row = (await self._session.execute(
            sa.select(VOLUMES).where(VOLUMES.c.id == id)
        )).mappings().one_or_none()
        return None if row is None else to_domain(VolumeRecord, row)

    async def update(self, id: str, *, now: datetime, **fields: Any) -> VolumeRecord:
        """Set `fields` (and `updated_at=now`); UnknownResource if no such volume."""
        values = field_values(VolumeRecord, fields, forbidden=_MANAGED)
        stmt = sa.update(VOLUMES).where(VOLUMES.c.id == id).values({**values, "updated_at": now})
        if await _rowcount(self._session, stmt) == 0:
            raise UnknownResource("volume", id)
        updated = await self.get(id)
        assert updated is not None  # we just updated it inside this transaction
        return updated

    async def due(self, now: datetime) -> list[VolumeRecord]:
        """Available (orphaned) volumes whose reminder is due at `now`, longest overdue first."""
        return await self._list(
            sa.select(VOLUMES)
            .where(VOLUMES.c.status == "available", VOLUMES.c.next_reminder_at <= now)
            .order_by(VOLUMES.c.next_reminder_at, VOLUMES.c.id)
        )

    async def list_all(self) -> list[VolumeRecord]:
        """Every volume, by id."""
        return await self._list(sa.select(VOLUMES).order_by(VOLUMES.c.id))

    async def _list(self, stmt: sa.Select[Any]) -> list[VolumeRecord]:
        rows = (await self._session.execute(stmt)).mappings()
        return [to_domain(VolumeRecord, row) for row in rows]


class Repos:
    """Every repository, bound to one session: one `Database.transaction()`."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.quotes = QuoteRepo(session)
        self.requests = RequestRepo(session)
        self.approvals = ApprovalRepo(session)
        self.clusters = ClusterRepo(session)
        self.messages = MessageRepo(session)
        self.notices = NoticeRepo(session)
        self.volumes = VolumeRepo(session)


def _insert(session: AsyncSession, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
    """An INSERT that knows ON CONFLICT, in the dialect of the session's database.

    Both supported backends have the same ON CONFLICT clause; an upsert there is one atomic
    statement, unlike select-then-insert, which races between replicas.
    """
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        return sqlite.insert(table)
    if dialect == "postgresql":
        return postgresql.insert(table)
    raise NotImplementedError(f"no upsert for the {dialect} dialect")  # pragma: no cover


async def _rowcount(session: AsyncSession, stmt: sa.Update) -> int:
    result = await session.execute(stmt)
    count: int = result.rowcount  # type: ignore[attr-defined]  # CursorResult for DML
    return count
