"""Reconciliation: every cluster AI Reserve bills us for is one the bot watches.

Each sweep lists the provider's clusters. A live one the database doesn't know (launched at
AI Reserve directly, or by a bot whose database was lost) is adopted: recorded, announced in
the approvals channel as untracked with its rate, watched and reminded — to the approvers until
someone claims it. Clusters that ended outside the bot are caught by the watcher's own poll.
"""

from __future__ import annotations

import logging

from bot.clock import Clock
from bot.domain.ports import Notifier
from bot.reserve.port import MAX_PAGE_SIZE, ClusterProvider
from bot.reserve.schemas import Cluster
from bot.services.audit import AuditLog
from bot.services.observing import record_from_wire
from bot.services.quoting import QuotingService
from bot.services.watching import WatchService
from storage.db import Database

log = logging.getLogger(__name__)


class ReconcileService:
    def __init__(self, *, db: Database, provider: ClusterProvider, quoting: QuotingService,
                 watching: WatchService, notifier: Notifier, audit: AuditLog,
                 approvals_channel: str, clock: Clock) -> None:
        self._audit = audit
        self._db = db
        self._provider = provider
        self._quoting = quoting
        self._watching = watching
        self._notifier = notifier
        self._approvals_channel = approvals_channel
        self._clock = clock

    async def reconcile(self) -> dict[str, Cluster]:
        """Adopt every live provider cluster the bot doesn't know. Returns the provider's whole
        listing by id, so the watcher polls from it instead of one GET per cluster."""
        listing = {c.id: c async for c in self._provider.iter_clusters(
            page_size=MAX_PAGE_SIZE)}
        live = [c for c in listing.values() if c.status.is_live]
        async with self._db.transaction() as repos:
            known = await repos.clusters.ids([c.id for c in live])
        unknown = [c for c in live if c.id not in known]
        if not unknown:
            return listing
        names = {a.id: a.name for a in await self._quoting.catalog()}
        for wire in unknown:
            record = record_from_wire(
                wire, owner_id=None, channel_id=self._approvals_channel, request_id=None,
                accelerator_name=names.get(wire.shape.accelerator, wire.shape.accelerator),
                now=self._clock.now(), adopted=True)
            async with self._db.transaction() as repos:
                await repos.clusters.add(record)
            log.warning("adopted untracked cluster %s (%s¢/h)", wire.id,
                        wire.locked_rate.hourly_cents)
            await self._audit.write(actor=None, action="adopt", subject_id=wire.id,
                                    outcome="ok", amount_cents=wire.locked_rate.hourly_cents,
                                    detail="found at AI Reserve, not launched through the bot")
            await self._notifier.refresh_cluster(wire.id)  # the untracked card
            await self._watching.sync(wire.id, wire=wire, deliver=False)
        await self._notifier.deliver_notices()
        return listing
