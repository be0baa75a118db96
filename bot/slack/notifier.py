"""The Slack side of `Notifier`: render the stored state and post it, or edit what was posted.

Every message the bot edits has its coordinates (channel, ts) in the database, keyed by what it
shows: one approval card per (request, quote) in the approvals channel, one progress message per
request where it was asked (storms: bot/slack/digests.py). A refresh renders the current state
and edits the stored message — repeated, or after a restart, it never posts a duplicate."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from hashlib import sha256
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock
from bot.domain.claims import ClaimKey
from bot.domain.connection import ConnectionDetails
from bot.domain.models import (
    Approval,
    ClusterRecord,
    ClusterState,
    Decision,
    LaunchRequest,
    MessageRef,
    RequestStatus,
    VolumeRecord,
)
from bot.domain.watch import Notice, NoticeKind
from bot.services.home import HomeService
from bot.services.people import People
from bot.slack import asks
from bot.slack.blocks import approval as approval_blocks
from bot.slack.blocks import audit as audit_blocks
from bot.slack.blocks import cluster as cluster_blocks
from bot.slack.blocks import common as common_blocks
from bot.slack.blocks import envelope as envelope_blocks
from bot.slack.blocks import extension as extension_blocks
from bot.slack.blocks import home as home_blocks
from bot.slack.blocks import notices as notice_blocks
from bot.slack.blocks import payment as payment_blocks
from bot.slack.blocks import readiness as readiness_blocks
from bot.slack.blocks import story as story_blocks
from bot.slack.blocks import unreadable as unreadable_blocks
from bot.slack.blocks import volumes as volume_blocks
from bot.slack.blocks.message import Message
from bot.slack.digests import StormDigests
from bot.slack.outbox import DEFAULT_CLAIM, POST_ERRORS, Outcome, SlackOutbox, Unreachable, reason
from bot.slack.unreachable import Fallbacks
from storage.db import Database
from storage.leases import replica_id

log = logging.getLogger(__name__)

# One post of a notice: its outbox key, where it goes, and the call that posts it.
Post = tuple[str, str, Callable[[], Awaitable[object]]]

APPROVAL, PROGRESS, EXTENSION = "approval", "progress", "extension"  # kinds of edited message


class SlackNotifier:
    def __init__(self, *, client: AsyncWebClient, db: Database, approvals_channel: str,
                 people: People, home: HomeService, clock: Clock, holder: str | None = None,
                 claim_ttl: timedelta = DEFAULT_CLAIM) -> None:
        self._client = client
        self._db = db
        self._approvals_channel = approvals_channel
        self._clock = clock
        self._people = people
        self._home = home
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._delivering = asyncio.Lock()
        self.outbox = SlackOutbox(client=client, db=db, clock=clock,
                                  holder=holder or replica_id(), claim_ttl=claim_ttl)
        self.fallbacks = Fallbacks(client=client, db=db, outbox=self.outbox, people=people,
                                   clock=clock, approvals_channel=approvals_channel)
        self.digests = StormDigests(client=client, db=db, outbox=self.outbox, clock=clock)

    async def refresh_request(self, request_id: str, *,
                              superseded_quote_id: str | None = None,
                              card: bool = True) -> None:
        """`card=False`: the cluster moved, the request didn't — leave the approval card be."""
        async with self._locks[request_id]:
            async with self._db.transaction() as repos:
                request = await repos.requests.get(request_id)
                if request is None:
                    return
                quote = await repos.quotes.get(request.quote_id)
                old_quote = (await repos.quotes.get(superseded_quote_id)
                             if superseded_quote_id else None)
                approvals = await repos.approvals.for_request(request_id)
                record = await repos.clusters.by_request(request_id)
                readiness = await repos.readiness.get(record.id) if record else None
            assert quote is not None
            now = self._clock.now()
            if old_quote is not None:
                stale = request.model_copy(update={"status": RequestStatus.SUPERSEDED,
                                                   "hourly_cents": request.previous_hourly_cents
                                                   or request.hourly_cents})
                retired = approval_blocks.approval_outcome(stale, old_quote, approvals, now=now)
                await self.outbox.upsert(APPROVAL, f"{request_id}/{old_quote.id}",
                                   self._approvals_channel, retired, create=False)
            if card:
                policy = self._people.policy
                current = [a for a in approvals if a.quote_id == quote.id]
                shown = (approval_blocks.approval_card(request, quote, now=now,
                                                       approvals=current, policy=policy)
                         if request.status is RequestStatus.PENDING
                         else approval_blocks.approval_outcome(request, quote, approvals,
                                                               now=now, policy=policy))
                try:
                    await self.outbox.upsert(APPROVAL, f"{request_id}/{quote.id}",
                                             self._approvals_channel, shown)
                except Unreachable as exc:
                    await self.fallbacks.card_by_dm(request, quote.id, shown, exc)
            progress = cluster_blocks.request_progress(request, quote, record, now=now,
                                                       approvals=approvals,
                                                       policy=self._people.policy,
                                                       serving=readiness_blocks.serving_line(
                                                           record, readiness)
                                                       if record else None)
            await self.outbox.upsert(PROGRESS, request_id, request.channel_id, progress,
                               fallback_user=request.requester_id)
            await self._tell_story(request, approvals, record)
        # Approvers' homes list what waits for them: only a submission or a decision changes it.
        deciding = card and request.status in (RequestStatus.PENDING, RequestStatus.APPROVED,
                                               RequestStatus.REJECTED, RequestStatus.WITHDRAWN)
        await self._refresh_homes([request.requester_id,
                                   *(await self._people.approvers() if deciding else ())])

    async def _tell_story(self, request: LaunchRequest, approvals: Sequence[Approval],
                          record: ClusterRecord | None) -> None:
        """Each step of the request's story once in its thread (bot/slack/blocks/story.py)."""
        async with self._db.transaction() as repos:
            top = await repos.messages.get(PROGRESS, request.id)
            if top is None:
                return
            held = [q for q in reversed(await repos.request_quotes.quotes_of(request.id))
                    if q != request.quote_id] + [request.quote_id]  # oldest first, current last
            quotes = [q for q in [await repos.quotes.get(i) for i in held] if q is not None]
            # Oldest first: attempts created at one instant are told apart by the live one
            # (the request's key) coming last, and the closed ones by when each closed.
            attempts = sorted(await repos.launches.for_request(request.id),
                              key=lambda i: (i.idempotency_key == request.idempotency_key,
                                             i.created_at, i.updated_at))
            # Who pressed Retry launch on each failed attempt: the press's claim says.
            retried_by = {}
            for intent in attempts:
                attempt = story_blocks.attempt_of(request, intent)
                claim = await repos.claims.get(ClaimKey(action="retry", subject_id=request.id,
                                                        version=attempt))
                if claim is not None:
                    retried_by[attempt] = claim.actor_id
        for step, words in story_blocks.story(request, approvals, record, quotes=quotes,
                                              attempts=attempts, retried_by=retried_by,
                                              now=self._clock.now()):
            await self.outbox.post_once(story_blocks.story_key(request, step), top.channel_id,
                                        story_blocks.story_post(words), thread_ts=top.ts)

    async def refresh_cluster(self, cluster_id: str) -> None:
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
        if record is None:
            return
        if record.request_id is not None:
            await self.refresh_request(record.request_id, card=False)
            return
        # Adopted (found at AI Reserve, not launched here): its card in the approvals channel.
        async with self._locks[cluster_id]:
            await self.fallbacks.quietly(self.outbox.upsert(  # a card, not a record
                PROGRESS, _top_subject(record), self._approvals_channel,
                notice_blocks.untracked_cluster(record, now=self._clock.now())))
        await self._refresh_homes([record.owner_id])

    async def deliver_notices(self) -> None:
        """Post every notice nobody else is posting, each claimed first (see `SlackOutbox`)."""
        async with self._delivering:  # one delivery pass per process; the claims across them
            await self.fallbacks.recheck(self.refresh_request)
            await self.outbox.retry()
            await self.digests.gather()  # a storm: one digest per channel, edited after
            skipped: set[tuple[str, str]] = set()  # refused by Slack or busy: a later pass
            while True:
                async with self._db.transaction() as repos:
                    pending = [n for n in await repos.notices.pending(
                                   limit=100 + len(skipped), now=self.outbox.claim_clock())
                               if (n.cluster_id, n.key) not in skipped]
                if not pending:
                    await self.digests.refresh()
                    return
                skipped |= await self._deliver_batch(pending)

    async def _deliver_batch(self, pending: Sequence[Notice]) -> set[tuple[str, str]]:
        """Claim, post and mark each notice delivered; returns those not delivered now."""
        skipped: set[tuple[str, str]] = set()
        holder, ttl = self.outbox.holder, self.outbox.claim_ttl
        for notice in pending:
            ident = (notice.cluster_id, notice.key)
            async with self._db.transaction() as repos:
                if not await repos.notices.claim(*ident, holder=holder,
                                                 now=self.outbox.claim_clock(), ttl=ttl):
                    skipped.add(ident)  # delivered or being delivered by another replica
                    continue
                record = await repos.clusters.get(notice.cluster_id)
                top = await repos.messages.get(PROGRESS, _top_subject(record)) if record else None
            done = True
            if record is not None:
                try:
                    done = await self._deliver(notice, record, top)
                except POST_ERRORS as exc:
                    # Left pending: the next sweep tries again; later notices still go.
                    log.warning("could not deliver %s notice for %s: %s", notice.kind,
                                notice.cluster_id, reason(exc))
                    done = False
            async with self._db.transaction() as repos:
                if done:
                    await repos.notices.mark_delivered(*ident, now=self._clock.now())
                else:
                    await repos.notices.release(*ident, holder=holder)
                    skipped.add(ident)
        return skipped

    async def _deliver(self, notice: Notice, record: ClusterRecord,
                       top: MessageRef | None) -> bool:
        """Each post of the notice once (keyed under the notice); False if one is still busy
        at another replica (one that died mid-notice: its claims expire, a later pass ends)."""
        now = self._clock.now()
        prefix = f"notice/{notice.cluster_id}/{notice.key}"
        posts: list[Post] = []
        if notice.kind is NoticeKind.REMINDER:
            if record.status not in (ClusterState.RUNNING, ClusterState.DEGRADED):
                return True  # terminated since it was queued: reminders stop at once
            owners = ([record.owner_id] if record.owner_id
                      else sorted(await self._people.approvers()))
            reminder = notice_blocks.reminder_dm(notice, record, now=now).as_kwargs()
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
                    self.digests.thread_post, notice, record, top, kwargs)))
            else:  # no top message to thread under (it could not be posted): the channel
                posts.append((f"{prefix}/channel", record.channel_id, partial(
                    self._client.chat_postMessage, channel=record.channel_id, **kwargs)))
            posts += [(f"{prefix}/notify/{channel}", channel, partial(
                self._client.chat_postMessage, channel=channel, **kwargs))
                for channel in record.notify_channels]
        outcomes = [await self.outbox.once(key, kind="notice", target=target, send=send)
                    for key, target, send in posts]
        await self.fallbacks.owner_unreachable(record, [(t, o) for (_, t, _), o in zip(
            posts, outcomes, strict=True) if o is Outcome.UNDELIVERABLE])
        return Outcome.BUSY not in outcomes

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
        if self._approvals_channel:
            posts.append((f"{prefix}/approvals", self._approvals_channel, partial(
                self._client.chat_postMessage, channel=self._approvals_channel, **kwargs)))
        return posts

    async def send_connection_details(self, cluster: ClusterRecord,
                                      details: ConnectionDetails) -> bool:
        """DM the owner once (claimed under `connection/<cluster>`); False while another
        replica is sending them or Slack refused (the next sweep tries again). `details` come
        from the provider now and are never stored."""
        if cluster.owner_id is None:
            return False
        owner, message = cluster.owner_id, cluster_blocks.connection_dm(cluster, details)
        try:
            outcome = await self.outbox.once(
                f"connection/{cluster.id}", kind="connection", target=owner,
                send=partial(self.outbox.dm, owner, message.as_kwargs()))
        except POST_ERRORS as exc:  # released: the next sweep reads them again and retries
            log.warning("could not DM the connection details of %s: %s", cluster.id,
                        reason(exc))
            return False
        return outcome is not Outcome.BUSY

    async def send_connection_again(self, cluster: ClusterRecord, details: ConnectionDetails,
                                    *, key: str) -> None:
        if cluster.owner_id is None:
            return
        message = cluster_blocks.connection_dm(cluster, details)
        await self.outbox.once(f"connection/{cluster.id}/again/{key}", kind="connection",
                               target=cluster.owner_id,
                               send=partial(self.outbox.dm, cluster.owner_id,
                                            message.as_kwargs()))

    async def remind_volume(self, volume: VolumeRecord, recipients: Sequence[str]) -> None:
        due = (volume.next_reminder_at or self._clock.now()).isoformat()
        message = volume_blocks.volume_reminder(volume, now=self._clock.now())
        for person in recipients:
            await self.outbox.dm_once(f"volume/{volume.id}/{due}/{person}", person, message)

    async def _receipt(self, record: ClusterRecord) -> Message:
        requester, approvers, auto = None, [], False
        if record.request_id is not None:
            async with self._db.transaction() as repos:
                request = await repos.requests.get(record.request_id)
                approvals = await repos.approvals.for_request(record.request_id)
            if request is not None:
                requester = request.requester_id
                approvers = [a.approver_id for a in approvals
                             if a.decision is Decision.APPROVE and a.quote_id == request.quote_id]
                auto = not approvers
        return audit_blocks.receipt(
            record, requester=requester, approvers=approvers, auto_approved=auto,
            auto_approve_below_cents=self._people.policy.auto_approve_below_cents,
            now=self._clock.now())

    async def envelope_notice(self, cluster: ClusterRecord, *, stage: str, ends_at: datetime,
                              terminate_at: datetime | None,
                              recipients: Sequence[str]) -> None:
        now = self._clock.now()
        # Extend offers the policy's lifetime once more (else the envelope once more).
        more = self._people.policy.max_lifetime_hours
        if stage == "warned":
            message = envelope_blocks.envelope_warning(cluster, now=now, ends_at=ends_at)
        elif stage == "due":
            message = envelope_blocks.envelope_due(cluster, now=now, ends_at=ends_at,
                                                   enforced=terminate_at is not None,
                                                   terminate_at=terminate_at, extend_hours=more)
        else:
            assert terminate_at is not None
            message = envelope_blocks.envelope_final_warning(cluster, now=now,
                                                             terminate_at=terminate_at,
                                                             extend_hours=more)
        for person in recipients:
            await self.outbox.dm_once(
                f"envelope/{cluster.id}/{stage}/{ends_at.isoformat()}/{person}", person, message)

    async def envelope_extended(self, cluster: ClusterRecord, *, by: str, hours: int) -> None:
        message = envelope_blocks.envelope_extended(cluster, by=by, hours=hours)
        async with self._db.transaction() as repos:
            top = await repos.messages.get(PROGRESS, _top_subject(cluster))
        if top is not None:
            await self.outbox.post_once(f"extended/{cluster.id}/{cluster.lifetime_hours}",
                                        top.channel_id, message, thread_ts=top.ts)
        await self.refresh_cluster(cluster.id)

    async def refresh_extension(self, extension_id: str) -> None:
        async with self._db.transaction() as repos:
            ext = await repos.extensions.get(extension_id)
        if ext is None:
            return
        await self.outbox.upsert(EXTENSION, ext.id, self._approvals_channel,
                                 extension_blocks.extension_card(ext))
        async with self._db.transaction() as repos:  # the thread tells each step, once
            record = await repos.clusters.get(ext.cluster_id)
            top = await repos.messages.get(PROGRESS, _top_subject(record))
        if top is not None:
            for key, words in extension_blocks.extension_steps(ext):
                await self.outbox.post_once(key, top.channel_id,
                                            story_blocks.story_post(words), thread_ts=top.ts)

    async def refresh_home(self, user_id: str) -> None:
        facts = await self._home.facts(user_id)
        view = home_blocks.home_view(
            user_id=user_id, clusters=facts.clusters, pending=facts.pending,
            is_approver=facts.is_approver, month_spent_cents=facts.month_spent_cents,
            budget_cents=facts.budget_cents, month=facts.month, now=self._clock.now())
        await self._client.views_publish(user_id=user_id, view=view)

    async def _refresh_homes(self, user_ids: Iterable[str | None]) -> None:
        """The App Home of everyone a change concerns (best effort: a home is not a record)."""
        for user_id in sorted({u for u in user_ids if u}):
            try:
                await self.refresh_home(user_id)
            except SlackApiError as exc:
                log.warning("could not publish the home of %s: %s", user_id,
                            exc.response.get("error"))

    async def tell(self, user_id: str, text: str, *, key: str | None = None) -> None:
        """A DM, once per `key` across replicas; without a key, the same words to the same
        person are said once (pass a key for a message that may be repeated)."""
        key = key or sha256(text.encode()).hexdigest()[:24]
        await self.outbox.dm_once(f"tell/{user_id}/{key}", user_id, common_blocks.notice(text))

def _top_subject(record: ClusterRecord | None) -> str:
    """The key of a cluster's top message: its request's progress message, or its own card."""
    if record is None:
        return ""
    return record.request_id or f"cluster:{record.id}"
