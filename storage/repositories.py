"""Repositories: the only code that reads and writes the tables.

Every repository works inside the one transaction it was given by `Database.transaction()` (its
`session`: the transaction's connection); none of them commits. They take and return the frozen
domain models of `bot.domain.models`, never rows. Statements are SQLAlchemy Core against the
tables, executed on the connection itself: no ORM session, so no identity map to go stale between a
compare-and-set and the read that follows it, and none of the ORM's work on every transaction and
statement (issue 32: an ORM session around Core statements cost ~40% of an empty transaction).

This module holds the quote, request, approval and message repositories and `Repos`, which
bundles every repository; the clusters' is in `storage.clusters`, the watcher's (notices,
volumes) in `storage.watching`, the audit trail's in `storage.audit`.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.errors import UnknownResource
from bot.domain.models import (
    Approval,
    Decision,
    LaunchRequest,
    MessageRef,
    QuoteInfo,
    RequestStatus,
)
from storage.audit import AuditRepo
from storage.budgets import BudgetLocks
from storage.claims import ClaimRepo
from storage.clusters import ClusterRepo
from storage.digests import DigestRepo
from storage.duties import DutyRepo
from storage.extensions import ExtensionRepo
from storage.installs import InstallationRepo, OAuthStateRepo, RouteRepo
from storage.launches import LaunchIntentRepo, RequestQuoteRepo
from storage.leases import LeaseRepo
from storage.outbox import DmChannelRepo, OutboxRepo
from storage.projects import ProjectLookup
from storage.readiness import ReadinessRepo
from storage.rows import field_values, in_chunks, row_values, to_domain
from storage.statements import MANAGED, insert, rowcount
from storage.tables.outbox import MESSAGES
from storage.tables.requests import APPROVALS, QUOTES, REQUESTS
from storage.templates import TemplateRepo
from storage.terminations import TerminationRepo
from storage.watching import NoticeRepo, VolumeRepo

# The everyday reads, built once (module-level, values bound at execution): a statement built
# at each call costs building it and walking it for its cache key, more than its execution on
# SQLite (issue 32).
_QUOTE = sa.select(QUOTES).where(QUOTES.c.id == sa.bindparam("id"))
_REQUEST = sa.select(REQUESTS).where(REQUESTS.c.id == sa.bindparam("id"))
_REQUEST_LOCKED = _REQUEST.with_for_update()
_BY_STATUS = (sa.select(REQUESTS)
              .where(REQUESTS.c.status.in_(sa.bindparam("statuses", expanding=True)))
              .order_by(REQUESTS.c.updated_at, REQUESTS.c.id))
_BY_STATUS_BEFORE = _BY_STATUS.where(REQUESTS.c.updated_at < sa.bindparam("before"))
_APPROVALS = (sa.select(APPROVALS).where(APPROVALS.c.request_id == sa.bindparam("request_id"))
              .order_by(APPROVALS.c.at, APPROVALS.c.id))
_MESSAGE = sa.select(MESSAGES.c.channel_id, MESSAGES.c.ts).where(
    MESSAGES.c.kind == sa.bindparam("kind"), MESSAGES.c.subject_id == sa.bindparam("subject_id"))


class QuoteRepo:
    """Provider quotes, by id."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, q: QuoteInfo) -> None:
        await self._session.execute(sa.insert(QUOTES).values(row_values(q)))

    async def get(self, id: str) -> QuoteInfo | None:
        row = (await self._session.execute(_QUOTE, {"id": id})).mappings().one_or_none()
        return None if row is None else to_domain(QuoteInfo, row)

    async def get_many(self, ids: Collection[str]) -> dict[str, QuoteInfo]:
        """Those of `ids` stored, by id: one query per 500, not one per quote (an approver's
        Home reads the quote of every request waiting on anyone)."""
        found: dict[str, QuoteInfo] = {}
        for chunk in in_chunks(ids):
            rows = (await self._session.execute(sa.select(QUOTES).where(
                QUOTES.c.id.in_(chunk)))).mappings()
            found |= {q.id: q for q in (to_domain(QuoteInfo, row) for row in rows)}
        return found


class RequestRepo:
    """Launch requests; `transition()` is the state machine's atomic compare-and-set."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, r: LaunchRequest) -> None:
        await self._session.execute(sa.insert(REQUESTS).values(row_values(r)))
        await RequestQuoteRepo(self._session).add(request_id=r.id, quote_id=r.quote_id,
                                                  now=r.created_at)

    async def get(self, id: str, *, for_update: bool = False) -> LaunchRequest | None:
        """`for_update`: lock the row for the rest of the transaction (PostgreSQL's SELECT …
        FOR UPDATE), so decisions on one request are serialised across replicas; SQLite's
        transactions are serialised already (BEGIN IMMEDIATE)."""
        row = (await self._session.execute(_REQUEST_LOCKED if for_update else _REQUEST,
                                           {"id": id})).mappings().one_or_none()
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
        updated_before: datetime | None = None,
        idempotency_key_was: str | None = None,
        wait_checks_was: int | None = None,
        **fields: Any,
    ) -> LaunchRequest | None:
        """Move `id` from one of `from_` to `to` in one UPDATE; None if it was not in `from_`.

        `quote_id` is a guard (the request must still be on that quote, e.g. the quote on the
        card the approver clicked); `new_quote_id` replaces the quote (and is remembered among
        the quotes the request held). `updated_before` (a lease: nobody touched the request
        since), `idempotency_key_was` (still that launch key) and `wait_checks_was` (no other
        stock round claimed it since) are guards too. `fields` are
        any other LaunchRequest fields to set in the same statement. Exactly one of several
        concurrent callers wins: the database serializes the UPDATEs and the losers' WHERE no
        longer matches.
        """
        values = field_values(LaunchRequest, fields, forbidden=MANAGED | {"status", "quote_id"})
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
        if updated_before is not None:
            stmt = stmt.where(REQUESTS.c.updated_at < updated_before)
        if idempotency_key_was is not None:
            stmt = stmt.where(REQUESTS.c.idempotency_key == idempotency_key_was)
        if wait_checks_was is not None:
            stmt = stmt.where(REQUESTS.c.wait_checks == wait_checks_was)
        if await rowcount(self._session, stmt) == 0:
            return None
        if new_quote_id is not None:
            await RequestQuoteRepo(self._session).add(request_id=id, quote_id=new_quote_id,
                                                      now=now)
        return await self.get(id)

    async def update(self, id: str, *, now: datetime, **fields: Any) -> LaunchRequest:
        """Set `fields` and `updated_at=now` whatever the status; UnknownResource if no such id."""
        values = field_values(LaunchRequest, fields, forbidden=MANAGED)
        stmt = sa.update(REQUESTS).where(REQUESTS.c.id == id).values({**values, "updated_at": now})
        if await rowcount(self._session, stmt) == 0:
            raise UnknownResource("launch request", id)
        updated = await self.get(id)
        assert updated is not None  # we just updated it inside this transaction
        return updated

    async def list_by_status(
        self, statuses: Collection[RequestStatus], *, updated_before: datetime | None = None
    ) -> list[LaunchRequest]:
        """Requests in `statuses` (last updated strictly before `updated_before`), oldest first."""
        params: dict[str, Any] = {"statuses": [RequestStatus(s).value for s in statuses]}
        if updated_before is not None:
            params["before"] = updated_before
        rows = (await self._session.execute(
            _BY_STATUS if updated_before is None else _BY_STATUS_BEFORE, params)).mappings()
        return [to_domain(LaunchRequest, row) for row in rows]

    async def list_pending(self) -> list[LaunchRequest]:
        """Requests waiting for an approver, oldest (first created) first."""
        rows = (await self._session.execute(
            sa.select(REQUESTS)
            .where(REQUESTS.c.status == RequestStatus.PENDING.value)
            .order_by(REQUESTS.c.created_at, REQUESTS.c.id)
        )).mappings()
        return [to_domain(LaunchRequest, row) for row in rows]


class ApprovalRepo:
    """The approve/reject audit trail."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, a: Approval) -> None:
        await self._session.execute(sa.insert(APPROVALS).values(row_values(a)))

    async def for_request(self, request_id: str) -> list[Approval]:
        """Every decision on `request_id`, oldest first."""
        rows = (await self._session.execute(_APPROVALS, {"request_id": request_id})).mappings()
        return [to_domain(Approval, row, skip=("id",)) for row in rows]

    async def distinct_approvers(self, request_id: str, quote_id: str) -> set[str]:
        """Who approved `request_id` on `quote_id` (each approver once, however often they did).

        An approval of an earlier quote of the request does not count: it approved another price.
        """
        found = await self._session.execute(
            sa.select(APPROVALS.c.approver_id).distinct().where(
                APPROVALS.c.request_id == request_id,
                APPROVALS.c.quote_id == quote_id,
                APPROVALS.c.decision == Decision.APPROVE.value,
            )
        )
        return set(found.scalars())


class MessageRepo:
    """Coordinates of the Slack messages the bot edits, one per (kind, subject_id)."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def get(self, kind: str, subject_id: str) -> MessageRef | None:
        row = (await self._session.execute(_MESSAGE, {"kind": kind, "subject_id": subject_id})
               ).mappings().one_or_none()
        return None if row is None else to_domain(MessageRef, row)

    async def among(self, kind: str, subject_ids: Collection[str]) -> set[str]:
        """Which of `subject_ids` have a message of `kind` (one query per 500)."""
        wanted, found = list(subject_ids), set[str]()
        for start in range(0, len(wanted), 500):
            rows = await self._session.execute(sa.select(MESSAGES.c.subject_id).where(
                MESSAGES.c.kind == kind, MESSAGES.c.subject_id.in_(wanted[start:start + 500])))
            found.update(str(r[0]) for r in rows)
        return found

    async def put(self, kind: str, subject_id: str, ref: MessageRef, *, now: datetime) -> None:
        """Record where the message is, replacing any earlier ref (one atomic upsert)."""
        stmt = insert(self._session, MESSAGES).values(
            kind=kind, subject_id=subject_id, channel_id=ref.channel_id, ts=ref.ts,
            created_at=now, updated_at=now,
        )
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["kind", "subject_id"],
            set_={"channel_id": ref.channel_id, "ts": ref.ts, "updated_at": now},
        ))


class Repos:
    """Every repository, bound to one transaction's connection: one `Database.transaction()`."""

    def __init__(self, session: AsyncConnection) -> None:
        self.session = session
        self.quotes = QuoteRepo(session)
        self.requests = RequestRepo(session)
        self.approvals = ApprovalRepo(session)
        self.clusters = ClusterRepo(session)
        self.messages = MessageRepo(session)
        self.notices = NoticeRepo(session)
        self.volumes = VolumeRepo(session)
        self.audit = AuditRepo(session)
        self.claims = ClaimRepo(session)
        self.budgets = BudgetLocks(session)
        self.request_quotes = RequestQuoteRepo(session)
        self.launches = LaunchIntentRepo(session)
        self.outbox = OutboxRepo(session)
        self.leases = LeaseRepo(session)
        self.dm_channels = DmChannelRepo(session)
        self.terminations = TerminationRepo(session)
        self.readiness = ReadinessRepo(session)
        self.extensions = ExtensionRepo(session)
        self.duties = DutyRepo(session)
        self.digests = DigestRepo(session)
        self.templates = TemplateRepo(session)
        self.projects = ProjectLookup(session)
        self.installations = InstallationRepo(session)
        self.oauth_states = OAuthStateRepo(session)
        self.routes = RouteRepo(session)
