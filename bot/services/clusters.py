"""Read-only questions: `/cluster list`, `status <id>`, `spend [YYYY-MM]`, `audit [id]`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.clock import Clock
from bot.domain import spend
from bot.domain.errors import InvalidCommand, NotAllowed, UnknownResource
from bot.domain.models import Actor, AuditEntry, ClusterRecord, NodeSummary
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.services.audit import AuditLog
from bot.services.observing import node_summaries
from bot.services.people import People
from bot.services.provider_errors import explain
from bot.services.watching import WatchService
from storage.db import Database

AUDIT_LINES = 40
LIST_PAGE_SIZE = 25  # clusters per `/cluster list` message


@dataclass(frozen=True)
class LivePage:
    clusters: list[ClusterRecord]
    count: int  # every live cluster, not only this page's
    hourly_cents: int  # … and what they cost together
    page: int
    pages: int


class ClusterQueries:
    def __init__(self, *, db: Database, provider: ClusterProvider, watching: WatchService,
                 people: People, audit: AuditLog, clock: Clock) -> None:
        self._db = db
        self._provider = provider
        self._watching = watching
        self._people = people
        self._audit = audit
        self._clock = clock

    async def live(self) -> list[ClusterRecord]:
        async with self._db.transaction() as repos:
            return await repos.clusters.list_live()

    async def live_page(self, page: int) -> LivePage:
        """One page of `/cluster list` (oldest first), with the totals of every live cluster:
        two bounded queries, however many clusters there are."""
        async with self._db.transaction() as repos:
            count, cents = await repos.clusters.live_totals()
            pages = max(1, -(-count // LIST_PAGE_SIZE))
            page = min(page, pages)
            clusters = await repos.clusters.list_live(offset=(page - 1) * LIST_PAGE_SIZE,
                                                      limit=LIST_PAGE_SIZE)
        return LivePage(clusters=clusters, count=count, hourly_cents=cents, page=page,
                        pages=pages)

    async def status(self, cluster_id: str) -> tuple[ClusterRecord, list[NodeSummary]]:
        """The stored record refreshed from the provider, with each node's state."""
        async with self._db.transaction() as repos:
            if await repos.clusters.get(cluster_id) is None:
                raise UnknownResource("cluster", cluster_id)
        try:
            wire = await self._provider.get_cluster(cluster_id)
        except api.ApiError as exc:
            raise explain(exc) from exc
        record = await self._watching.sync(cluster_id, wire=wire)
        assert record is not None
        return record, node_summaries(wire)

    async def spend(self, *, month: str | None) -> spend.SpendReport:
        """What the clusters billed in a month (AI Reserve's billed hours), by owner and cluster."""
        now = self._clock.now()
        try:
            start, end = spend.month_bounds(month, now)
        except ValueError as exc:
            raise InvalidCommand(str(exc), bad_part=month, usage="/cluster spend [YYYY-MM]") \
                from None
        async with self._db.transaction() as repos:
            clusters = await repos.clusters.list_in_period(start, end)
        # Pure, and linear in the month's clusters (thousands): computed off the event loop.
        return await asyncio.to_thread(spend.spend_report, clusters, month, now)

    async def audit(self, *, subject_id: str | None, actor: Actor) -> list[AuditEntry]:
        """The audit trail (of one request or cluster), newest first: approvers only."""
        if actor.user_id not in await self._people.approvers():
            await self._audit.write(actor=actor, action="read_audit",
                                    subject_id=subject_id or "*", outcome="refused",
                                    detail="not an approver")
            raise NotAllowed("Only approvers can read the audit trail.")
        async with self._db.transaction() as repos:
            return await repos.audit.list(subject_id=subject_id, limit=AUDIT_LINES)
