"""Read-only questions: `/cluster list`, `status <id>`, `spend [YYYY-MM]`, `audit [id]`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Unpack

from bot.domain import hours, spend
from bot.domain.errors import InvalidCommand, NotAllowed
from bot.domain.models import Actor, AuditEntry, ClusterRecord, ClusterState, NodeSummary
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.services.acting import ActingService, Basics
from bot.services.observing import node_summaries
from bot.services.provider_errors import explain
from bot.services.volume_charges import volume_spans
from bot.services.volumes import VolumeService
from bot.services.watching import WatchService

AUDIT_LINES = 40
LIST_PAGE_SIZE = 25  # clusters per `/cluster list` message


@dataclass(frozen=True)
class LivePage:
    clusters: list[ClusterRecord]
    # Every live cluster's (not only this page's): how many, and their hourly cents, by state.
    by_state: dict[ClusterState, tuple[int, int]]
    page: int
    pages: int


class ClusterQueries(ActingService):
    def __init__(self, *, provider: ClusterProvider, watching: WatchService,
                 volumes: VolumeService | None = None, **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._volumes = volumes
        self._provider = provider
        self._watching = watching

    async def billed_hours(self, *, cluster_id: str) -> tuple[ClusterRecord, list[
            tuple[datetime, hours.HourState]]]:
        """Each hour mark the cluster passed and what it was (billed, degraded, not serving,
        uncharged), for the receipt's chart; degraded episodes as the watcher announced them."""
        async with self._db.transaction() as repos:
            record = await repos.clusters.require(cluster_id)
            notices = await repos.notices.for_cluster(cluster_id)
        end = record.terminated_at or self._clock.now()
        return record, hours.hour_states(
            record, degraded=hours.degraded_spans(notices, end=end),
            not_serving=await self.not_serving(record))

    async def not_serving(self, record: ClusterRecord) -> list[hours.Span]:
        """The spans a cluster billed while its workload was not serving: from ready to the
        moment its readiness rule matched (bot/services/readiness.py), and from each lost node
        until the line appeared again — to its end when it never did. None without a readiness
        rule, or before the cluster was ready."""
        async with self._db.transaction() as repos:
            watch = await repos.readiness.get(record.id)
        if watch is None or record.ready_at is None:
            return []
        end = record.terminated_at or self._clock.now()
        return watch.not_serving(ready_at=record.ready_at, end=end)

    async def live(self) -> list[ClusterRecord]:
        async with self._db.transaction() as repos:
            return await repos.clusters.list_live()

    async def live_page(self, page: int) -> LivePage:
        """One page of `/cluster list` (oldest first), with the totals of every live cluster:
        two bounded queries, however many clusters there are."""
        async with self._db.transaction() as repos:
            by_state = await repos.clusters.live_totals()
            count = sum(n for n, _ in by_state.values())
            pages = max(1, -(-count // LIST_PAGE_SIZE))
            page = min(page, pages)
            clusters = await repos.clusters.list_live(offset=(page - 1) * LIST_PAGE_SIZE,
                                                      limit=LIST_PAGE_SIZE)
        return LivePage(clusters=clusters, by_state=by_state, page=page, pages=pages)

    async def status(self, cluster_id: str) -> tuple[ClusterRecord, list[NodeSummary]]:
        """The stored record refreshed from the provider, with each node's state."""
        async with self._db.transaction() as repos:
            await repos.clusters.require(cluster_id)
        try:
            wire = await self._provider.get_cluster(cluster_id)
        except api.ApiError as exc:
            raise explain(exc, ident=cluster_id) from exc
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
        if self._volumes is not None:
            await self._volumes.refresh()  # orphaned volumes are charged too: count them fresh
        async with self._db.transaction() as repos:
            clusters = await repos.clusters.list_in_period(start, end)
            volumes = await volume_spans(repos, now=now)
        # Pure, and linear in the month's clusters (thousands): computed off the event loop.
        return await asyncio.to_thread(
            spend.spend_report, clusters, month, now, volumes=volumes,
            enforce_lifetime=self._people.policy.enforce_lifetime)

    async def audit(self, *, subject_id: str | None, actor: Actor) -> list[AuditEntry]:
        """The audit trail (of one request or cluster), newest first: approvers only."""
        if actor.user_id not in await self._people.approvers():
            await self._audit.write(actor=actor, action="read_audit",
                                    subject_id=subject_id or "*", outcome="refused",
                                    detail="not an approver")
            raise NotAllowed("Only approvers can read the audit trail.")
        async with self._db.transaction() as repos:
            entries = await repos.audit.list(subject_id=subject_id, limit=AUDIT_LINES)
        # Reading the trail is itself recorded (after the read: it doesn't list itself).
        await self._audit.write(actor=actor, action="read_audit", subject_id=subject_id or "*",
                                outcome="ok",
                                detail=f"read {len(entries)} entries"
                                       + (f" about {subject_id}" if subject_id else ""))
        return entries


    async def audit_projects(self, entries: list[AuditEntry]) -> dict[str, str]:
        """The project of each entry's subject, for the export's `project` column."""
        async with self._db.transaction() as repos:
            return await repos.projects.of_subjects([e.subject_id for e in entries])

    async def audit_month(self, *, month: str | None, actor: Actor) -> tuple[str, list[AuditEntry]]:
        """A month's whole audit trail, oldest first, for the CSV export: approvers only."""
        if actor.user_id not in await self._people.approvers():
            await self._audit.write(actor=actor, action="export_audit", subject_id=month or "*",
                                    outcome="refused", detail="not an approver")
            raise NotAllowed("Only approvers can export the audit trail.")
        try:
            start, end = spend.month_bounds(month, self._clock.now())
        except ValueError as exc:
            raise InvalidCommand(str(exc), bad_part=month,
                                 usage="/cluster audit export [YYYY-MM]") from None
        async with self._db.transaction() as repos:
            entries = await repos.audit.in_period(start, end)
        await self._audit.write(actor=actor, action="export_audit", subject_id=f"{start:%Y-%m}",
                                outcome="ok",
                                detail=f"exported {len(entries)} entries of {start:%Y-%m} as CSV")
        return f"{start:%Y-%m}", entries

