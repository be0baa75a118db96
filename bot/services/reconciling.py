"""Reconciliation: every cluster AI Reserve bills us for is one the bot watches.

Each sweep lists the provider's clusters. Every cluster carries the quote it was launched from,
and the bot keeps every quote each request was ever priced with: a listed cluster whose quote a
request held is that request's — linked to it, its owner and channel (`linking.py`), even while
the launch itself is still waiting for AI Reserve's answer or was cut short by a crash. Only a
live cluster no request ever held the quote of (launched at AI Reserve directly, or by a bot
whose database was lost) is adopted: recorded, announced in the approvals channel as untracked
with its rate, watched and reminded — to the approvers until someone claims it. Clusters that
ended outside the bot are caught by the watcher's own poll.

A sweep records, it never tells: a page's found clusters are stored in one transaction with
their audit rows and one queued telling of the approvals channel (bot/slack/found.py: a card
each for a few, one digest for many), which the delivery sweep sends, paced. A first install
on an account running thousands of clusters adopts them all in the first sweep, and the sweep
goes on watching the clusters it tracks meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from bot.clock import Clock
from bot.domain.lanes import Lane
from bot.domain.models import AuditEntry
from bot.domain.ports import Notifier
from bot.reserve.port import ClusterProvider
from bot.reserve.schemas import Cluster
from bot.services.audit import AuditLog
from bot.services.linking import link_cluster
from bot.services.observing import observe, record_from_wire
from bot.services.people import People
from bot.services.quoting import QuotingService
from bot.services.watching import LISTED, PAGE_SIZE, WatchService
from storage.db import Database
from storage.outbox import FOUND

log = logging.getLogger(__name__)


class ReconcileService:
    def __init__(self, *, db: Database, provider: ClusterProvider, quoting: QuotingService,
                 watching: WatchService, notifier: Notifier, audit: AuditLog,
                 people: People, clock: Clock) -> None:
        self._audit = audit
        self._db = db
        self._provider = provider
        self._quoting = quoting
        self._watching = watching
        self._notifier = notifier
        self._people = people
        self._clock = clock

    async def reconcile(self) -> dict[str, Cluster]:
        """Link or adopt every live provider cluster the bot doesn't track. Returns what was
        listed (the clusters that can still bill or change) by id."""
        listing: dict[str, Cluster] = {}
        page: list[Cluster] = []
        async for wire in self._provider.iter_clusters(LISTED, page_size=PAGE_SIZE):
            listing[wire.id] = wire
            page.append(wire)
            if len(page) == PAGE_SIZE:
                await self.reconcile_page(page, ())
                page = []
        await self.reconcile_page(page, ())
        await self._notifier.deliver_notices()
        return listing

    async def reconcile_page(self, page: list[Cluster], tracked: Collection[str]) -> None:
        """Link or adopt the live clusters of one listed page that are not among `tracked`
        (ids known to be linked already): what a sweep does with each page as it arrives.
        Adopting tells nobody yet: the delivery sweep does."""
        live = [c for c in page if c.status.is_live and c.id not in tracked]
        if not live:
            return
        async with self._db.transaction() as repos:
            unlinked = await repos.clusters.untracked([c.id for c in live])
            candidates = [c for c in live if c.id in unlinked]
            held = await repos.request_quotes.requests_of([c.quote_id for c in candidates])
        if not candidates:
            return
        strangers = [c for c in candidates if c.quote_id not in held and not unlinked[c.id]]
        for wire in candidates:
            if wire.quote_id in held:
                await self._link(wire, held[wire.quote_id])
        if strangers:  # not stored yet (an adopted row stays as it is until claimed)
            await self._adopt(strangers)

    async def _link(self, wire: Cluster, request_id: str) -> None:
        async with self._db.transaction() as repos:
            request = await repos.requests.get(request_id)
            quote = await repos.quotes.get(wire.quote_id)
        assert request is not None and quote is not None  # foreign keys of request_quotes
        linked = await link_cluster(db=self._db, clock=self._clock, wire=wire, request=request,
                                    accelerator_name=quote.accelerator_name)
        log.info("linked cluster %s to request %s by its quote %s", wire.id, request_id,
                 wire.quote_id)
        await self._audit.write(actor=None, action="link", subject_id=wire.id, outcome="ok",
                                amount_cents=wire.locked_rate.hourly_cents,
                                detail=f"found at AI Reserve from quote {wire.quote_id} of "
                                       f"request {request_id}"
                                       + ("; the request is now launched" if linked.request
                                          else ""))
        await self._notifier.refresh_request(request_id)
        await self._watching.sync(wire.id, wire=wire)

    async def _adopt(self, strangers: list[Cluster]) -> None:
        """Record them as they are now (observed, their billed hours already reminded of: the
        telling shows them), audit each, and queue the telling — one transaction."""
        names = {a.id: a.name for a in await self._quoting.catalog()}
        now = self._clock.now()
        # One AI Reserve account per deployment: a cluster launched outside the bot is no
        # installation's; the top level's approvals channel is told.
        channel = self._people.policy_for(None).approvals_channel or ""
        records = [record_from_wire(
            wire, owner_id=None, channel_id=channel, request_id=None,
            accelerator_name=names.get(wire.shape.accelerator, wire.shape.accelerator),
            now=now, adopted=True).model_copy(update={
                "observed": observe(wire),
                "last_reminded_hours": wire.billing.accrued_hours}) for wire in strangers]
        async with self._db.transaction() as repos:
            await repos.clusters.add_many(records)
            await repos.audit.add_many([AuditEntry(
                at=now, actor_id=None, team_id=None, action="adopt", subject_id=wire.id,
                amount_cents=wire.locked_rate.hourly_cents, outcome="ok",
                detail="found at AI Reserve, not launched through the bot") for wire in strangers])
            await repos.outbox.queue_refresh(FOUND, channel,
                                             lane=int(Lane.HEALTH), now=now)
        log.warning("adopted %d untracked clusters (%s¢/h together): %s%s", len(records),
                    sum(r.hourly_cents for r in records),
                    ", ".join(r.id for r in records[:5]), " …" if len(records) > 5 else "")
