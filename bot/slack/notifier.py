"""The Slack side of `Notifier`: render the stored state and post it, or edit what was posted.

Every message the bot edits has its coordinates (channel, ts) in the database, keyed by what it
shows: one approval card per (request, quote) in the approvals channel and one progress message
per request in the channel where it was asked. A refresh renders the current state and edits
the stored message — so repeating it, or doing it after a restart, never posts a duplicate.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock
from bot.domain.models import (
    ClusterRecord,
    ClusterState,
    ConnectionDetails,
    Decision,
    MessageRef,
    RequestStatus,
    VolumeRecord,
)
from bot.domain.watch import Notice, NoticeKind
from bot.services.home import HomeService
from bot.services.people import People
from bot.slack.blocks import approval as approval_blocks
from bot.slack.blocks import audit as audit_blocks
from bot.slack.blocks import cluster as cluster_blocks
from bot.slack.blocks import common as common_blocks
from bot.slack.blocks import envelope as envelope_blocks
from bot.slack.blocks import home as home_blocks
from bot.slack.blocks import notices as notice_blocks
from bot.slack.blocks import volumes as volume_blocks
from bot.slack.blocks.message import Message
from storage.db import Database

log = logging.getLogger(__name__)

APPROVAL = "approval"
PROGRESS = "progress"
# Posting into a channel the bot can't reach: tell the requester by DM instead.
_UNREACHABLE = {"channel_not_found", "not_in_channel", "is_archived", "restricted_action"}


class SlackNotifier:
    def __init__(self, *, client: AsyncWebClient, db: Database, approvals_channel: str,
                 people: People, home: HomeService, clock: Clock) -> None:
        self._client = client
        self._db = db
        self._approvals_channel = approvals_channel
        self._clock = clock
        self._people = people
        self._home = home
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._delivering = asyncio.Lock()

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
            assert quote is not None
            now = self._clock.now()
            if old_quote is not None:
                stale = request.model_copy(update={"status": RequestStatus.SUPERSEDED,
                                                   "hourly_cents": request.previous_hourly_cents
                                                   or request.hourly_cents})
                retired = approval_blocks.approval_outcome(stale, old_quote, approvals, now=now)
                await self._upsert(APPROVAL, f"{request_id}/{old_quote.id}",
                                   self._approvals_channel, retired, create=False)
            if card:
                policy = self._people.policy
                current = [a for a in approvals if a.quote_id == quote.id]
                shown = (approval_blocks.approval_card(request, quote, now=now,
                                                       approvals=current, policy=policy)
                         if request.status is RequestStatus.PENDING
                         else approval_blocks.approval_outcome(request, quote, approvals,
                                                               now=now, policy=policy))
                await self._upsert(APPROVAL, f"{request_id}/{quote.id}",
                                   self._approvals_channel, shown)
            progress = cluster_blocks.request_progress(request, quote, record, now=now,
                                                       approvals=approvals,
                                                       policy=self._people.policy)
            await self._upsert(PROGRESS, request_id, request.channel_id, progress,
                               fallback_user=request.requester_id)
        # Approvers' homes list what waits for them: only a submission or a decision changes it.
        deciding = card and request.status in (RequestStatus.PENDING, RequestStatus.APPROVED,
                                               RequestStatus.REJECTED)
        await self._refresh_homes([request.requester_id,
                                   *(await self._people.approvers() if deciding else ())])

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
            await self._upsert(PROGRESS, _top_subject(record), self._approvals_channel,
                               notice_blocks.untracked_cluster(record, now=self._clock.now()))
        await self._refresh_homes([record.owner_id])

    async def deliver_notices(self) -> None:
        async with self._delivering:  # one delivery pass at a time: each notice posted once
            stuck: set[tuple[str, str]] = set()  # refused by Slack this pass: next sweep
            while True:
                async with self._db.transaction() as repos:
                    pending = [n for n in await repos.notices.pending(limit=100 + len(stuck))
                               if (n.cluster_id, n.key) not in stuck]
                if not pending:
                    return
                stuck |= await self._deliver_batch(pending)

    async def _deliver_batch(self, pending: Sequence[Notice]) -> set[tuple[str, str]]:
        """Post each notice, then mark it delivered; returns those Slack refused."""
        stuck: set[tuple[str, str]] = set()
        for notice in pending:
            async with self._db.transaction() as repos:
                record = await repos.clusters.get(notice.cluster_id)
                top = await repos.messages.get(PROGRESS, _top_subject(record)) if record else None
            if record is not None:
                try:
                    await self._deliver(notice, record, top)
                except SlackApiError as exc:
                    # Left pending: the next sweep tries again; later notices still go.
                    log.warning("could not deliver %s notice for %s: %s", notice.kind,
                                notice.cluster_id, exc.response.get("error"))
                    stuck.add((notice.cluster_id, notice.key))
                    continue
            async with self._db.transaction() as repos:
                await repos.notices.mark_delivered(notice.cluster_id, notice.key,
                                                   now=self._clock.now())
        return stuck

    async def _deliver(self, notice: Notice, record: ClusterRecord,
                       top: MessageRef | None) -> None:
        now = self._clock.now()
        if notice.kind is NoticeKind.REMINDER:
            if record.status not in (ClusterState.RUNNING, ClusterState.DEGRADED):
                return  # terminated since it was queued: reminders stop at once
            owners = ([record.owner_id] if record.owner_id
                      else sorted(await self._people.approvers()))
            for person in owners:
                await self._dm(person, notice_blocks.reminder_dm(notice, record, now=now))
            return
        message = (await self._receipt(record) if notice.kind is NoticeKind.RECEIPT
                   else notice_blocks.thread_notice(notice, record, now=now))
        if top is not None:
            await self._client.chat_postMessage(
                channel=top.channel_id, thread_ts=top.ts,
                reply_broadcast=notice.kind.broadcast, **message.as_kwargs())
        else:  # no top message to thread under (it could not be posted): the channel itself
            await self._client.chat_postMessage(channel=record.channel_id, **message.as_kwargs())
        for channel in record.notify_channels:
            await self._client.chat_postMessage(channel=channel, **message.as_kwargs())

    async def send_connection_details(self, cluster: ClusterRecord,
                                      details: ConnectionDetails) -> None:
        if cluster.owner_id is not None:
            await self._dm(cluster.owner_id, cluster_blocks.connection_dm(cluster, details))

    async def remind_volume(self, volume: VolumeRecord, recipients: Sequence[str]) -> None:
        for person in recipients:
            await self._dm(person, volume_blocks.volume_reminder(volume, now=self._clock.now()))

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
        if stage == "warned":
            message = envelope_blocks.envelope_warning(cluster, now=now, ends_at=ends_at)
        elif stage == "due":
            message = envelope_blocks.envelope_due(cluster, now=now, ends_at=ends_at,
                                                   enforced=terminate_at is not None,
                                                   terminate_at=terminate_at)
        else:
            assert terminate_at is not None
            message = envelope_blocks.envelope_final_warning(cluster, now=now,
                                                             terminate_at=terminate_at)
        for person in recipients:
            await self._dm(person, message)

    async def envelope_extended(self, cluster: ClusterRecord, *, by: str, hours: int) -> None:
        message = envelope_blocks.envelope_extended(cluster, by=by, hours=hours)
        async with self._db.transaction() as repos:
            top = await repos.messages.get(PROGRESS, _top_subject(cluster))
        if top is not None:
            await self._client.chat_postMessage(channel=top.channel_id, thread_ts=top.ts,
                                                **message.as_kwargs())
        await self.refresh_cluster(cluster.id)

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

    async def tell(self, user_id: str, text: str) -> None:
        await self._dm(user_id, common_blocks.notice(text))

    # --- plumbing -------------------------------------------------------------------------

    async def _dm(self, user_id: str, message: Message) -> None:
        opened = await self._client.conversations_open(users=user_id)
        channel = opened["channel"]["id"]
        await self._client.chat_postMessage(channel=channel, **message.as_kwargs())

    async def _upsert(self, kind: str, subject: str, channel: str, message: Message, *,
                      create: bool = True, fallback_user: str | None = None) -> None:
        async with self._db.transaction() as repos:
            ref = await repos.messages.get(kind, subject)
        if ref is not None:
            try:
                await self._client.chat_update(channel=ref.channel_id, ts=ref.ts,
                                               **message.as_kwargs())
                return
            except SlackApiError as exc:
                if exc.response.get("error") != "message_not_found":
                    raise
                log.warning("%s message for %s was deleted; posting it again", kind, subject)
        if not create:
            return
        try:
            posted = await self._client.chat_postMessage(channel=channel, **message.as_kwargs())
        except SlackApiError as exc:
            if fallback_user is None or exc.response.get("error") not in _UNREACHABLE:
                raise
            log.warning("can't post to %s (%s); using a DM", channel, exc.response.get("error"))
            opened = await self._client.conversations_open(users=fallback_user)
            posted = await self._client.chat_postMessage(channel=opened["channel"]["id"],
                                                         **message.as_kwargs())
        async with self._db.transaction() as repos:
            await repos.messages.put(kind, subject,
                                     MessageRef(channel_id=posted["channel"], ts=posted["ts"]),
                                     now=self._clock.now())



def _top_subject(record: ClusterRecord | None) -> str:
    """The key of a cluster's top message: its request's progress message, or its own card."""
    if record is None:
        return ""
    return record.request_id or f"cluster:{record.id}"
