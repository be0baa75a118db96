"""Watching: keep each cluster's record in step with AI Reserve and say what changed, once.

`sync(id)` reads the cluster, compares the observation with the last one stored, and — in the
same transaction that stores the new observation — queues each transition as a `Notice` whose
key is unique per cluster (the outbox). Then the notifier delivers whatever is queued. A poll
that fails changes nothing; the next one sees the accumulated change and announces it once.
A restart re-reads the stored observation, so nothing is announced twice either.

Also here: the first-time DM of connection details, and the hourly accrual reminder (a notice
keyed by the accrued hour, so no hour is ever reminded twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.clock import Clock
from bot.domain.lanes import Lane, lane
from bot.domain.models import ClusterRecord, ClusterState, Observation
from bot.domain.payment import payment_notices
from bot.domain.ports import Notifier
from bot.domain.readiness import after_observation
from bot.domain.watch import (
    Notice,
    NoticeFacts,
    NoticeKind,
    carry,
    notices_between,
    reminder_hour,
)
from bot.reserve import errors as api
from bot.reserve.port import MAX_PAGE_SIZE, ClusterProvider, SkippedItem, UnexpectedResponse
from bot.reserve.schemas import Cluster, ClusterStatus
from bot.services.audit import ended_elsewhere
from bot.services.duty import DutyService
from bot.services.observing import connection_details, observe, observed_fields, state_of
from bot.services.provider_errors import is_provider_outage
from bot.services.quiet import QuietClusters
from bot.services.readiness import ReadinessService
from bot.services.unreadable import note_unreadable, readable_again
from storage.db import Database
from storage.repositories import Repos
from storage.rows import Remembered

log = logging.getLogger(__name__)

MAX_CONCURRENT_POLLS = 8
# Changed clusters stored per transaction (a listed page's): the hour mark changes them all.
STORED_AT_ONCE = 50
# What a sweep lists: the statuses that can still bill or change (terminated and failed
# clusters stay listed for 30 days, and never change again), at the contract's largest page.
LISTED = (ClusterStatus.PROVISIONING, ClusterStatus.RUNNING, ClusterStatus.DEGRADED,
          ClusterStatus.TERMINATING)
PAGE_SIZE = MAX_PAGE_SIZE

# Sees each listed page before it is synced, with the ids of the live records already tracked.
PageHook = Callable[[list[Cluster], Collection[str]], Awaitable[None]]

# Record fields that, when they change, make the cluster's top message worth editing.
_VISIBLE = ("status", "nodes_ready", "ready_at", "terminated_at", "termination_reason",
            "accrued_cents", "accrued_hours", "last_error", "auto_recovery")


class WatchService:
    def __init__(self, *, db: Database, provider: ClusterProvider, notifier: Notifier,
                 clock: Clock) -> None:
        self._db = db
        self._provider = provider
        self._notifier = notifier
        self._clock = clock
        # Readiness checks ride the same sweep (set by bot/app/runtime.py; services/readiness.py).
        self.readiness: ReadinessService | None = None
        # So does escalating degraded clusters nobody is on (bot/services/duty.py), after the
        # notices it follows are delivered.
        self.duty: DutyService | None = None
        # What the last sweeps read and found quiet: not converted or parsed again unchanged.
        self._rows: Remembered[ClusterRecord] = Remembered()
        self._quiet = QuietClusters()

    async def sync_live(self, *, on_page: PageHook | None = None, deliver: bool = True) -> int:
        """One poll of every cluster that may still bill; deliver what changed. Returns how
        many live records it checked.

        `deliver=False` (the watch sweep): nothing waits for Slack — each changed cluster's
        message is queued in the outbox with its observation, in one transaction, and the
        delivery sweep shows it (by lane, paced): a storm's posts never hold up the next poll,
        a money duty, or readiness.

        The live records are read in one query (converted off the event loop) and compared in
        memory with AI Reserve's listing as its pages arrive — only the statuses that can still
        bill or change, at the largest page. A transaction is opened only for a cluster whose
        observation changed (or that has a notice or its connection DM due). `on_page` sees
        each page first, with the ids already tracked (reconciliation: link or adopt the
        others). A live record missing from the listing is read by id (which also tells one
        that ended or vanished)."""
        async with self._db.transaction() as repos:
            live = {r.id: r for r in await repos.clusters.list_live(remembered=self._rows)}
        listed: set[str] = set()
        self._quiet.begin(live, listed)  # what it holds unparsed is listed too
        # Listed but not parseable (logged by the client): kept as last known, not read by id
        # (the same bad answer again), counted toward telling people (bot/services/unreadable).
        skipped: dict[str, SkippedItem] = {}

        def skip(item: SkippedItem) -> None:
            if item.id is not None:
                skipped[item.id] = item

        try:
            async for page in self._provider.cluster_pages(LISTED, page_size=PAGE_SIZE,
                                                           on_skip=skip, known=self._quiet):
                await self._sync_page(page, live, listed, on_page, tell=deliver)
        except api.ApiError as exc:
            # What was listed is synced; the rest waits for the next poll (no GET storm).
            # An outage is said once by AI Reserve's reachability, not at every poll.
            log.log(logging.DEBUG if is_provider_outage(exc) else logging.WARNING,
                    "listing clusters failed: %s", exc)  # e.g. "GET /clusters is paused …"
        else:
            await self._poll_each([id for id in live if id not in listed and id not in skipped],
                                  unreadable=skipped, tell=deliver)
        self._quiet.end()
        if skipped:
            async with self._db.transaction() as repos:
                await note_unreadable(repos, skipped=skipped, tracked=live.keys(),
                                      now=self._clock.now())
        if self.readiness is not None:
            await self.readiness.follow()
        if deliver:
            await self._notifier.deliver_notices()
        if self.duty is not None:
            with lane(Lane.HEALTH):  # telling only: after the provider's duties
                await self.duty.escalate_due()
        return len(live)

    async def deliver(self) -> None:
        """What the sweeps queued goes out: notices, queued messages, refused posts."""
        await self._notifier.deliver_notices()

    async def _sync_page(self, page: list[Cluster], live: Mapping[str, ClusterRecord],
                         listed: set[str], on_page: PageHook | None, *, tell: bool) -> None:
        if not page:
            return
        if on_page is not None:
            await on_page(page, live.keys())
        mine = [(live[w.id], w) for w in page if w.id in live]
        for record, wire in mine:
            _unknown_status(record, wire)
        listed.update(w.id for _, w in mine)
        now = self._clock.now()
        # Pure and CPU-bound: compared in a thread, the event loop keeps answering Slack.

        def judge() -> list[Cluster]:
            due = []
            for record, wire in mine:
                is_due = self._due(record, wire, now=now)
                self._quiet.judged(record, wire, due=is_due)
                if is_due:
                    due.append(wire)
            return due

        due = await asyncio.to_thread(judge)
        await self._store_many(due, tell=tell)

    async def _store_many(self, wires: list[Cluster], *, tell: bool) -> None:
        """Store what changed of each listed cluster, `STORED_AT_ONCE` in a transaction (the
        hour mark changes every cluster at once: a transaction each cost ~10 ms of CPU), then
        what follows each (its connection DM, an inline edit when telling)."""
        for start in range(0, len(wires), STORED_AT_ONCE):
            chunk = wires[start:start + STORED_AT_ONCE]
            now = self._clock.now()
            async with self._db.transaction() as repos:
                before = await repos.clusters.get_many([w.id for w in chunk])
                seen = [(before[w.id], w) for w in chunk if w.id in before]
                stored = await self._store(repos, seen, now=now, tell=tell)
            await self._gather(self._follow(done, wire, deliver=False, tell=tell)
                               for done, (_, wire) in zip(stored, seen, strict=True))

    async def _poll_each(self, ids: list[str], *, unreadable: dict[str, SkippedItem],
                         tell: bool) -> None:
        """Read each of `ids` by id (bounded concurrency); a failed read changes nothing, and
        one that answers a cluster the bot can't parse joins `unreadable` (as a skipped item)."""

        async def read(cluster_id: str) -> None:
            try:
                await self.sync(cluster_id, deliver=False, tell=tell)
            except UnexpectedResponse as exc:
                field = str(exc.details.get("field") or "<body>")
                log.warning("cluster %s: AI Reserve's answer doesn't parse (field %s)",
                            cluster_id, field)
                unreadable[cluster_id] = SkippedItem(id=cluster_id, field=field,
                                                     reason="unexpected response")

        await self._gather(read(id) for id in ids)

    async def _gather(self, syncs: Iterable[Coroutine[Any, Any, object]]) -> None:
        gate = asyncio.Semaphore(MAX_CONCURRENT_POLLS)

        async def one(sync: Coroutine[Any, Any, object]) -> None:
            async with gate:
                try:
                    await sync
                except api.ApiError as exc:
                    # Nothing is lost: the next poll sees whatever happened meanwhile.
                    log.warning("polling a cluster failed: %s", exc.code)

        await asyncio.gather(*(one(s) for s in syncs))

    def _due(self, before: ClusterRecord, wire: Cluster, *, now: datetime) -> bool:
        """Whether `sync` would do anything for `wire`: a changed observation, a notice to
        queue, or the connection DM to send."""
        after = carry(before.observed, observe(wire, previous=before.status))
        if self._changes(before, wire, after) or self._notices(before, after, now=now):
            return True
        return (after.status is ClusterState.RUNNING and before.connection_sent_at is None
                and before.owner_id is not None and connection_details(wire) is not None)

    async def sync(self, cluster_id: str, *, wire: Cluster | None = None,
                   deliver: bool = True, tell: bool = True) -> ClusterRecord | None:
        """Bring one record up to date with the provider (or with `wire`, already fetched).
        `tell=False`: its message is queued with the observation (shown by a delivery pass)."""
        read_by_id = wire is None
        if wire is None:
            try:
                wire = await self._provider.get_cluster(cluster_id)
            except api.NotFound:
                return await self._vanished(cluster_id)
        async with self._db.transaction() as repos:
            before = await repos.clusters.get(cluster_id)
            if before is None:
                return None
            if read_by_id:  # a listed one was looked at by the sweep already
                _unknown_status(before, wire)
            [done] = await self._store(repos, [(before, wire)], now=self._clock.now(),
                                       tell=tell)
        return await self._follow(done, wire, deliver=deliver, tell=tell)

    async def _store(self, repos: Repos, seen: list[tuple[ClusterRecord, Cluster]], *,
                     now: datetime, tell: bool) -> list[_Stored]:
        """Inside the caller's transaction, for each (stored record, what AI Reserve lists): the
        new observation, its notices (and audit), and — when not telling now — the cluster's
        message queued for an edit. A statement for all of them at each step, not one each."""
        observed = [(before, wire, carry(before.observed, observe(wire, previous=before.status)))
                    for before, wire in seen]
        queued: dict[str, list[Notice]] = {}
        for notice in await repos.notices.add_new(
                [n for before, _, obs in observed for n in self._notices(before, obs, now=now)]):
            queued.setdefault(notice.cluster_id, []).append(notice)
        changes: dict[str, dict[str, Any]] = {}
        for before, wire, obs in observed:
            changed = self._changes(before, wire, obs)
            for notice in queued.get(before.id, ()):
                if notice.kind in (NoticeKind.GRACE_TERMINATED, NoticeKind.TERMINATED_OUTSIDE):
                    await repos.audit.add(ended_elsewhere(
                        before.model_copy(update={"accrued_cents": obs.accrued_cents}),
                        reason=obs.termination_reason, at=now))
                if notice.kind is NoticeKind.REMINDER and notice.facts.hour is not None:
                    changed["last_reminded_hours"] = notice.facts.hour
            if changed:  # a quiet poll (nothing changed at the provider) writes nothing
                changes[before.id] = changed
        stored = await repos.clusters.update_many(changes, now=now) if changes else {}
        done: list[_Stored] = []
        edits: dict[str, int] = {}
        for before, _, obs in observed:
            after = stored.get(before.id, before)
            visible = await _serving_follows(repos, before, obs, now=now) or any(
                getattr(before, k) != getattr(after, k) for k in _VISIBLE)
            if visible and not tell:  # stored with the observation: never dropped
                edits[before.id] = int(lane_for(after.status))
            done.append(_Stored(after=after, queued=before.id in queued, visible=visible))
        await repos.outbox.queue_refreshes("cluster", edits, now=now)
        return done

    async def _follow(self, done: _Stored, wire: Cluster, *, deliver: bool,
                      tell: bool) -> ClusterRecord:
        """After the transaction: the edit when telling now, the connection DM, the notices."""
        after = done.after
        if done.visible and tell:
            await self._notifier.refresh_cluster(after.id)
        if after.status is ClusterState.RUNNING and after.connection_sent_at is None:
            after = await self._send_connection(after, wire, shown=done.visible and tell)
        if deliver and done.queued:
            await self._notifier.deliver_notices()
        return after

    def _changes(self, before: ClusterRecord, wire: Cluster,
                 observation: Observation) -> dict[str, Any]:
        changes = {k: v for k, v in observed_fields(wire).items() if getattr(before, k) != v}
        state = state_of(wire.status)
        if state is not None and state is not before.status:
            changes["status"] = state
        if observation != before.observed:
            changes["observed"] = observation
        previous = before.observed
        if observation.episode and (previous is None or observation.episode > previous.episode):
            changes["accrued_at_degrade"] = observation.accrued_cents  # the episode's start
        return changes

    def _notices(self, before: ClusterRecord, after: Observation, *, now: datetime) -> list[Notice]:
        episode = after.episode
        manual = frozenset(int(a) for e, a in (m.split(":") for m in before.manual_recoveries)
                           if int(e) == episode)
        notices = notices_between(
            before.observed, after, cluster_id=before.id, now=now,
            terminated_by_bot=before.terminate_requested_by is not None,
            manual_attempts=manual, ready_at=before.ready_at, hourly_cents=before.hourly_cents,
        )
        notices += payment_notices(before.observed, after, cluster_id=before.id, now=now)
        notices += readable_again(before.observed, after, cluster_id=before.id, now=now)
        hour = reminder_hour(after, last_reminded_hours=before.last_reminded_hours)
        if hour is not None:
            ready = before.ready_at
            notices.append(Notice(
                cluster_id=before.id, key=f"reminder:{hour}", kind=NoticeKind.REMINDER,
                created_at=now, facts=NoticeFacts(
                    hour=hour, accrued_cents=after.accrued_cents, episode=episode,
                    auto_recovery=after.auto_recovery,
                    running_seconds=int((now - ready).total_seconds()) if ready else None),
            ))
        return notices

    async def _send_connection(self, record: ClusterRecord, wire: Cluster, *,
                               shown: bool) -> ClusterRecord:
        """DM the details just read from the provider (never stored): claimed in the outbox,
        so one replica sends them; the record says so once they are out. Its message shows it
        running first (`shown`: this sync just did), whichever sync gets here."""
        details = connection_details(wire)
        if details is None or record.owner_id is None:
            return record
        if not shown:
            await self._notifier.refresh_cluster(record.id)
        if not await self._notifier.send_connection_details(record, details):
            return record  # another replica is sending them now
        async with self._db.transaction() as repos:
            sent = await repos.clusters.update(record.id, now=self._clock.now(),
                                               connection_sent_at=self._clock.now())
        await self._notifier.refresh_cluster(record.id)  # the thread says they were sent
        return sent

    async def _vanished(self, cluster_id: str) -> ClusterRecord | None:
        """The provider no longer knows it (past retention): it is over and no longer bills."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            before = await repos.clusters.get(cluster_id)
            if before is None or not before.status.is_live:
                return before
            after = await repos.clusters.update(
                cluster_id, now=now, status=ClusterState.TERMINATED,
                terminated_at=before.terminated_at or now,
                termination_reason=before.termination_reason or "not_found_at_provider")
            await repos.audit.add(ended_elsewhere(after, reason=after.termination_reason,
                                                  at=now))
        await self._notifier.refresh_cluster(cluster_id)
        return after


@dataclass(frozen=True)
class _Stored:
    after: ClusterRecord
    queued: bool  # notices were stored
    visible: bool  # its message shows something new


def lane_for(status: ClusterState) -> Lane:
    """A cluster message that shows it ended is a money action's telling; the rest, health."""
    return Lane.HEALTH if status.is_live else Lane.MONEY


def _unknown_status(record: ClusterRecord, wire: Cluster) -> None:
    """A status added after us parses (forward compatible) and keeps the last known state."""
    if state_of(wire.status) is None:
        log.warning("cluster %s: AI Reserve reports a status this bot doesn't know; keeping %s",
                    wire.id, record.status.value)


async def _serving_follows(repos: Repos, before: ClusterRecord, after: Observation, *,
                           now: datetime) -> bool:
    """Serving is a state: a lost node ends it and a restart makes the readiness check watch
    again (bot/domain/readiness.py), in the transaction that stores the observation. Read only
    when the status or the episode moved; True if the check moved."""
    prior = before.observed
    if prior is not None and prior.status is after.status and prior.episode == after.episode:
        return False
    watch = await repos.readiness.get(before.id)
    if watch is None:
        return False
    changes = after_observation(watch, before=prior, after=after, nodes=before.shape.nodes,
                                now=now)
    if changes is None:
        return False
    return await repos.readiness.move(before.id, expected=watch.state, now=now, **changes)
