"""Delivering the watcher's notices: each claimed, posted once, marked delivered — by lane.

Split from the notifier (bot/slack/notifier.py), which renders and edits the messages; this
delivers what the sweeps queued (`notices`) and what the outbox holds (refreshes, refused
posts). Each notice goes in its lane (bot/domain/lanes.py): a termination's, payment's or
receipt's before a degraded one's, reminders last; with Slack's limits paced per channel
(bot/slack/pacing.py) the outbox's concurrency sends many side by side, each waiting its turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock
from bot.domain import lanes
from bot.domain.approvers import approved_by
from bot.domain.digest import storms
from bot.domain.envelope import deadline, margin_for
from bot.domain.models import ClusterRecord, ClusterState, MessageRef
from bot.domain.watch import Notice, NoticeKind
from bot.services.people import People
from bot.slack import asks
from bot.slack.blocks import audit as audit_blocks
from bot.slack.blocks import notices as notice_blocks
from bot.slack.blocks import payment as payment_blocks
from bot.slack.blocks import unreadable as unreadable_blocks
from bot.slack.blocks.message import Message
from bot.slack.digests import StormDigests
from bot.slack.outbox import SlackOutbox
from bot.slack.refusals import POST_ERRORS, Outcome, reason
from bot.slack.tokens import usable
from bot.slack.unreachable import Fallbacks
from storage.db import Database
from storage.repositories import Repos

log = logging.getLogger(__name__)

# One post of a notice: its outbox key, where it goes, and the call that posts it.
Post = tuple[str, str, Callable[[], Awaitable[object]]]
Ident = tuple[str, str]  # a notice: (cluster, key)
# While one channel drains (paced: a storm takes minutes), how often a delivery pass looks for
# newly stored notices of the other channels.
RESCAN_SECONDS = 1.0

PROGRESS = "progress"
_MONEY = frozenset({NoticeKind.GRACE_TERMINATED, NoticeKind.TERMINATED_OUTSIDE,
                    NoticeKind.RECEIPT, NoticeKind.PAST_DUE, NoticeKind.GRACE_ENDING})
_LATER = frozenset({NoticeKind.REMINDER})
DEFAULT_POLL = timedelta(seconds=30)


def lane_of(kind: NoticeKind) -> lanes.Lane:
    if kind in _MONEY:
        return lanes.Lane.MONEY
    return lanes.Lane.REMINDER if kind in _LATER else lanes.Lane.HEALTH


def _lane(notice: Notice, stormy: Collection[str]) -> lanes.Lane:
    """A notice's lane; a storm's per-cluster lines (its digest speaks for the channel) last."""
    which = lane_of(notice.kind)
    return lanes.Lane.THREAD if which is lanes.Lane.HEALTH and notice.cluster_id in stormy \
        else which


def _ident(notice: Notice) -> Ident:
    return notice.cluster_id, notice.key


def top_subject(record: ClusterRecord | None) -> str:
    """The key of a cluster's top message: its request's progress message, or its own card."""
    if record is None:
        return ""
    return record.request_id or f"cluster:{record.id}"


class NoticeDelivery:
    def __init__(self, *, client: AsyncWebClient, db: Database, clock: Clock, people: People,
                 outbox: SlackOutbox, fallbacks: Fallbacks, digests: StormDigests,
                 refresh_request: Callable[[str], Awaitable[None]]) -> None:
        self._client = client
        self._db = db
        self._clock = clock
        self._people = people
        # The envelope sweep's margin (bot/domain/envelope.py): when an enforced envelope ends;
        # the runtime sets the sweep's own.
        self.envelope_margin = margin_for(DEFAULT_POLL)
        self.outbox = outbox
        self._fallbacks = fallbacks
        self._digests = digests
        self._refresh_request = refresh_request
        self._delivering = asyncio.Lock()
        self._stormy: frozenset[str] | set[str] = frozenset()  # clusters in an open digest

    async def deliver(self) -> None:
        """Post every notice nobody else is posting, each claimed first (see `SlackOutbox`);
        what is stored in the outbox first (queued refreshes, refused posts)."""
        async with self._delivering:  # one delivery pass per process; the claims across them
            if not await usable(self._client):  # a refused token: everything stays queued
                return
            await self._fallbacks.recheck(self._refresh_request)
            if self.outbox.concurrency == 1:  # one at a time: stored first, then notices
                await self.outbox.retry()
                await self._notices()
            else:  # side by side: the edits (chat.update) don't wait for the notices' posts,
                # and notices stored while the outbox drains (a found digest of thousands, a
                # storm's edits) go out meanwhile, not at the next pass
                retry = asyncio.create_task(self.outbox.retry())
                try:
                    await self._notices(meanwhile=retry)
                except BaseException:
                    retry.cancel()
                    raise
                await retry
            with lanes.lane(lanes.Lane.HEALTH):  # the digests edited as the storm evolved
                await self._digests.refresh()

    async def _notices(self, *, meanwhile: asyncio.Task[Any] | None = None) -> None:
        """Deliver the pending notices channel by channel: Slack's post limit is per channel,
        so each channel's notices are a queue of their own (`_deliver_batch`), and a storm's
        never holds up another channel's. While some channel still drains (or `meanwhile`
        runs), the pass looks for newly stored notices every `RESCAN_SECONDS` and starts the
        channels that are idle."""
        skipped: set[Ident] = set()  # refused by Slack or busy: a later pass
        where: dict[Ident, str] = {}  # each notice looked at: its channel
        drains: dict[str, tuple[asyncio.Task[set[Ident]], set[Ident]]] = {}
        try:
            while True:
                async with self._db.transaction() as repos:
                    pending = [n for n in await repos.notices.pending(
                                   limit=100 + len(skipped) + len(where),
                                   now=self.outbox.claim_clock())
                               if _ident(n) not in skipped]
                    new = any(_ident(n) not in where for n in pending)
                    stormy = await self._routed(repos, pending, where) if new else set()
                if new:
                    # A calm channel goes at once; a storm's first has its digest (one per
                    # channel, bot/slack/digests.py) gathered — so notices stored while others
                    # went out (the sweep goes on) join it too — and shown before its notices:
                    # the digest speaks for the channel from the start.
                    self._start(pending, where, drains, but=stormy)
                    with lanes.lane(lanes.Lane.HEALTH):
                        if await self._digests.gather():
                            await self._digests.refresh()
                    await self._route((), where)  # who is in a digest now
                self._start(pending, where, drains)
                waits = [t for t, _ in drains.values()]
                if meanwhile is not None and not meanwhile.done():
                    waits.append(meanwhile)
                elif not drains:
                    return
                await asyncio.wait(waits, timeout=RESCAN_SECONDS,
                                   return_when=asyncio.FIRST_COMPLETED)
                for channel, (task, idents) in list(drains.items()):
                    if task.done():
                        del drains[channel]
                        skipped |= task.result()
                        for ident in idents:  # delivered, or skipped from now on
                            where.pop(ident, None)
        finally:
            for task, _ in drains.values():
                task.cancel()
            await asyncio.gather(*(t for t, _ in drains.values()), return_exceptions=True)

    async def _route(self, pending: Sequence[Notice], where: dict[Ident, str]) -> set[str]:
        """Each new notice's channel: its cluster's top message's, else the cluster's; which
        clusters a storm's digest speaks for now (their lines go last). Returns the channels
        with an open digest or a storm starting (their notices wait for the digest)."""
        async with self._db.transaction() as repos:
            return await self._routed(repos, pending, where)

    async def _routed(self, repos: Repos, pending: Sequence[Notice],
                      where: dict[Ident, str]) -> set[str]:
        """`_route` in `repos`' transaction (the one that read `pending`)."""
        digests = await repos.digests.list_open()
        self._stormy = {c for d in digests for c in await repos.digests.members(d.id)}
        stormy = {d.channel_id for d in digests} | storms(
            c.channel_id for c in await repos.clusters.list_degraded())
        for notice in pending:
            if _ident(notice) in where:
                continue
            record = await repos.clusters.get(notice.cluster_id)
            top = await repos.messages.get(PROGRESS, top_subject(record)) if record else None
            where[_ident(notice)] = (top.channel_id if top
                                     else record.channel_id if record else "")
        return stormy

    def _start(self, pending: Sequence[Notice], where: Mapping[Ident, str],
               drains: dict[str, tuple[asyncio.Task[set[Ident]], set[Ident]]], *,
               but: Collection[str] = ()) -> None:
        """A drain for each channel with notices waiting and none running (a channel still
        draining has its next ones started when it is done), `but` those channels."""
        running = {i for _, idents in drains.values() for i in idents}
        waiting: dict[str, list[Notice]] = {}
        for notice in pending:
            if _ident(notice) not in running and _ident(notice) in where:
                waiting.setdefault(where[_ident(notice)], []).append(notice)
        for channel, notices in waiting.items():
            if channel not in drains and channel not in but:
                drains[channel] = (asyncio.create_task(self._deliver_batch(notices)),
                                   {_ident(n) for n in notices})

    async def _deliver_batch(self, pending: Sequence[Notice]) -> set[Ident]:
        """Claim, post and mark each notice delivered, by lane then oldest first — a storm's
        own thread lines (clusters in an open digest) after the channel's other news
        (side by side up to the outbox's concurrency); returns those not delivered now."""
        skipped: set[Ident] = set()
        holder, ttl = self.outbox.holder, self.outbox.claim_ttl
        gate, stormy = asyncio.Semaphore(self.outbox.concurrency), self._stormy

        async def one(notice: Notice) -> None:
            ident = _ident(notice)
            async with self._db.transaction() as repos:
                if not await repos.notices.claim(*ident, holder=holder,
                                                 now=self.outbox.claim_clock(), ttl=ttl):
                    skipped.add(ident)  # delivered or being delivered by another replica
                    return
                record = await repos.clusters.get(notice.cluster_id)
                top = await repos.messages.get(PROGRESS, top_subject(record)) if record else None
                # Broadcast to the channel only when no storm's digest speaks for it.
                broadcast = (notice.kind.broadcast and record is not None
                             and await repos.digests.digest_of(record.id) is None)
            done = True
            if record is not None:
                try:
                    done = await self._deliver(notice, record, top, broadcast)
                except POST_ERRORS as exc:
                    # Left pending: the next pass tries again; later notices still go.
                    log.warning("could not deliver %s notice for %s: %s", notice.kind,
                                notice.cluster_id, reason(exc))
                    done = False
            async with self._db.transaction() as repos:
                if done:
                    await repos.notices.mark_delivered(*ident, now=self._clock.now())
                else:
                    await repos.notices.release(*ident, holder=holder)
                    skipped.add(ident)

        async def gated(notice: Notice) -> None:
            with lanes.lane(_lane(notice, stormy)):  # its claim and mark too (storage/turns.py)
                async with gate:
                    await one(notice)

        ordered = sorted(pending, key=lambda n: (_lane(n, stormy), n.created_at))
        await asyncio.gather(*(gated(n) for n in ordered))
        return skipped

    async def _deliver(self, notice: Notice, record: ClusterRecord,
                       top: MessageRef | None, broadcast: bool) -> bool:
        with self._people.at(record):  # its installation's approvers, channel and policy
            return await self._deliver_here(notice, record, top, broadcast)

    async def _deliver_here(self, notice: Notice, record: ClusterRecord,
                            top: MessageRef | None, broadcast: bool) -> bool:
        """Each post of the notice once (keyed under the notice); False if one is still busy
        at another replica (one that died mid-notice: its claims expire, a later pass ends)
        or held for a channel a person can give back (bot/slack/unreachable.py)."""
        now = self._clock.now()
        prefix = f"notice/{notice.cluster_id}/{notice.key}"
        posts: list[Post] = []
        if notice.kind is NoticeKind.REMINDER:
            if record.status not in (ClusterState.RUNNING, ClusterState.DEGRADED):
                return True  # terminated since it was queued: reminders stop at once
            if record.owner_id is None and top is None:
                return True  # found, unclaimed, no card: its channel's digest shows what it
                # accrues (bot/slack/found.py) — not an hourly DM per cluster per approver
            owners = ([record.owner_id] if record.owner_id
                      else sorted(await self._people.approvers()))
            enforced = self._people.policy.enforce_lifetime or record.auto_terminate
            ends = deadline(record, margin=self.envelope_margin) if enforced else None
            reminder = notice_blocks.reminder_dm(notice, record, now=now,
                                                 terminate_at=ends).as_kwargs()
            posts = [(f"{prefix}/dm/{person}", person, partial(self.outbox.dm, person, reminder))
                     for person in owners]
        elif notice.kind in (NoticeKind.PAST_DUE, NoticeKind.GRACE_ENDING):
            posts = await self._payment_posts(notice, record, prefix=prefix, now=now)
        elif notice.kind is NoticeKind.UNREADABLE:
            if not record.status.is_live:
                return True  # it ended since (read by id): nothing bills, nothing to warn of
            posts = await self._owner_and_approvals(
                prefix, unreadable_blocks.unreadable_notice(notice, record).as_kwargs(), record)
        elif notice.kind in asks.KINDS:  # bot/slack/asks.py: none left to decide, none sent
            posts = [*await asks.owner_asks(notice, record, prefix=prefix, db=self._db,
                                            people=self._people, outbox=self.outbox)]
        else:
            kwargs = (await self._receipt(record) if notice.kind is NoticeKind.RECEIPT
                      else notice_blocks.thread_notice(notice, record, now=now)).as_kwargs()
            if top is not None:
                posts.append((f"{prefix}/thread", top.channel_id, partial(
                    self._digests.thread_post, notice, record, top, kwargs,
                    broadcast=broadcast)))
            else:  # no top message to thread under (it could not be posted): the channel
                posts.append((f"{prefix}/channel", record.channel_id, partial(
                    self._client.chat_postMessage, channel=record.channel_id, **kwargs)))
            posts += [(f"{prefix}/notify/{channel}", channel, partial(
                self._client.chat_postMessage, channel=channel, **kwargs))
                for channel in record.notify_channels]
        outcomes = [await self.outbox.once(key, kind="notice", target=target, send=send)
                    for key, target, send in posts]
        refused = [(t, o) for (_, t, _), o in zip(posts, outcomes, strict=True)
                   if o is Outcome.UNDELIVERABLE]
        await self._fallbacks.owner_unreachable(record, refused)
        # A post for an archived channel, or one the bot was removed from, is held: the notice
        # stays pending (its other posts are done, by their keys) until the channel is back.
        held = bool(refused) and bool({t for t, _ in refused} & await self._fallbacks.held())
        return Outcome.BUSY not in outcomes and not held

    async def _payment_posts(self, notice: Notice, record: ClusterRecord, *, prefix: str,
                             now: datetime) -> list[Post]:
        """The owner (the approvers while nobody owns it) by DM, and the approvals channel."""
        paid = record.observed is not None and record.observed.payment_status != "past_due"
        if paid or record.status not in (ClusterState.RUNNING, ClusterState.DEGRADED):
            return []  # paid, or terminated, since it was queued: the cluster's own notice follows
        kwargs = payment_blocks.payment_notice(notice, record, now=now).as_kwargs()
        return await self._owner_and_approvals(prefix, kwargs, record)

    async def _owner_and_approvals(self, prefix: str, kwargs: dict[str, Any],
                                   record: ClusterRecord) -> list[Post]:
        owners = [record.owner_id] if record.owner_id else sorted(await self._people.approvers())
        posts: list[Post] = [
            (f"{prefix}/dm/{person}", person, partial(self.outbox.dm, person, kwargs))
            for person in owners]
        if channel := self._people.policy.approvals_channel:
            posts.append((f"{prefix}/approvals", channel, partial(
                self._client.chat_postMessage, channel=channel, **kwargs)))
        return posts

    async def _receipt(self, record: ClusterRecord) -> Message:
        requester, approvers, auto = None, [], False
        if record.request_id is not None:
            async with self._db.transaction() as repos:
                request = await repos.requests.get(record.request_id)
                approvals = await repos.approvals.for_request(record.request_id)
            if request is not None:
                requester = request.requester_id
                approvers = approved_by(request, approvals) or (
                    [request.decided_by] if request.decided_by else [])
                auto = not approvers
        return audit_blocks.receipt(
            record, requester=requester, approvers=approvers, auto_approved=auto,
            auto_approve_below_cents=self._people.policy.auto_approve_below_cents,
            now=self._clock.now())
