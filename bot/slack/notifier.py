"""The Slack side of `Notifier`: render the stored state and post it, or edit what was posted.

Every message the bot edits has its coordinates (channel, ts) in the database, keyed by what it
shows: one approval card per (request, quote) in the approvals channel, one progress message per
request where it was asked (storms: bot/slack/digests.py). A refresh renders the current state
and edits the stored message — repeated, or after a restart, it never posts a duplicate."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
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
    LaunchRequest,
    RequestStatus,
    VolumeRecord,
)
from bot.services.home import HomeService
from bot.services.people import People
from bot.slack import audiences
from bot.slack.blocks import approval as approval_blocks
from bot.slack.blocks import cluster as cluster_blocks
from bot.slack.blocks import common as common_blocks
from bot.slack.blocks import envelope as envelope_blocks
from bot.slack.blocks import extension as extension_blocks
from bot.slack.blocks import home as home_blocks
from bot.slack.blocks import notices as notice_blocks
from bot.slack.blocks import readiness as readiness_blocks
from bot.slack.blocks import story as story_blocks
from bot.slack.blocks import volumes as volume_blocks
from bot.slack.blocks.message import compose, context
from bot.slack.coalesce import Coalesced
from bot.slack.digests import StormDigests
from bot.slack.found import FoundClusters
from bot.slack.notices import PROGRESS, NoticeDelivery, top_subject
from bot.slack.outbox import DEFAULT_CLAIM, SlackOutbox
from bot.slack.refusals import HELD, POST_ERRORS, Outcome, Unreachable, gone, reason
from bot.slack.unreachable import Fallbacks
from storage.db import Database
from storage.outbox import FOUND
from storage.replica import replica_id
from storage.repositories import Repos

log = logging.getLogger(__name__)

APPROVAL = "approval"
EXTENSION = "extension"


class SlackNotifier:
    def __init__(self, *, client: AsyncWebClient, db: Database, people: People,
                 home: HomeService, clock: Clock, holder: str | None = None,
                 claim_ttl: timedelta = DEFAULT_CLAIM) -> None:
        self._client = client
        self._db = db
        self._clock = clock
        self._people = people
        self._home = home
        self._homes = Coalesced(self._publish_home)  # one publish of a home at a time
        self._audiences = audiences.Audiences()  # what a request's refresh republishes
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # A request's refreshes asked while one runs fold into one run after it (a launch's
        # steps, the approval and the watch sweep ask at once; each run is paced Slack calls).
        self._requests = Coalesced(self._refresh_folded)
        # A cluster's request, once linked, never changes (storage/clusters.py): known here,
        # a cluster's refresh goes to its request's without reading the cluster first.
        self._request_of: dict[str, str] = {}
        self.outbox = SlackOutbox(client=client, db=db, clock=clock,
                                  holder=holder or replica_id(), claim_ttl=claim_ttl)
        self.outbox.on_refresh = self._refresh_queued
        self.fallbacks = Fallbacks(client=client, db=db, outbox=self.outbox, people=people,
                                   clock=clock)
        self.digests = StormDigests(client=client, db=db, outbox=self.outbox, clock=clock)
        self.found = FoundClusters(db=db, outbox=self.outbox, clock=clock,
                                   card=self._found_card, homes=self._approvers_homes)
        self.notices = NoticeDelivery(client=client, db=db, clock=clock, people=people,
                                      outbox=self.outbox, fallbacks=self.fallbacks,
                                      digests=self.digests,
                                      refresh_request=self.refresh_request)

    async def refresh_request(self, request_id: str, *,
                              superseded_quote_id: str | None = None,
                              card: bool = True) -> None:
        """`card=False`: the cluster moved, the request didn't — leave the approval card be.
        Slack refusing (a storm's 429s) fails nothing: what it shows is stored, so showing it
        is queued in the outbox and goes out on a later delivery pass, until it does."""
        try:
            if superseded_quote_id is None:
                await self._requests((request_id, card))
            else:
                await self._refresh_request(request_id, superseded_quote_id=superseded_quote_id,
                                            card=card)
        except POST_ERRORS as exc:
            await self._queue("request", request_id, exc, superseded=superseded_quote_id)

    async def _refresh_folded(self, key: tuple[str, bool]) -> None:
        request_id, card = key
        await self._refresh_request(request_id, superseded_quote_id=None, card=card)

    async def refresh_cluster(self, cluster_id: str) -> None:
        """The cluster's message shows its stored state now, or (Slack refusing) later."""
        try:
            await self._refresh_cluster(cluster_id)
        except POST_ERRORS as exc:
            await self._queue("cluster", cluster_id, exc)

    async def _queue(self, what: str, subject: str, exc: BaseException, **extra: Any) -> None:
        if gone(exc) not in (None, *HELD):  # undeliverable: the fallbacks told who must know
            log.info("the %s message of %s can't be shown (%s)", what, subject, reason(exc))
            return
        if gone(exc) is not None:  # held: shown once the channel is back (unreachable.py)
            log.info("the %s message of %s is held (%s)", what, subject, reason(exc))
            await self.outbox.queue_refresh(what, subject, **extra)
            return
        log.warning("could not show the %s message of %s (%s); queued until Slack takes it",
                    what, subject, reason(exc))
        await self.outbox.queue_refresh(what, subject, **extra)

    async def _refresh_queued(self, what: str, subject: str,
                              payload: Mapping[str, Any]) -> None:
        """A queued refresh, from the outbox (raises on a refusal: it stays queued)."""
        if what == "request":
            superseded = payload.get("superseded")
            await self._refresh_request(subject, card=True,
                                        superseded_quote_id=str(superseded) if superseded
                                        else None)
        elif what == FOUND:
            await self.found.tell(subject)
        else:
            await self._refresh_cluster(subject)

    async def _refresh_request(self, request_id: str, *, superseded_quote_id: str | None,
                               card: bool) -> None:
        async with self._locks[request_id]:
            # What the card, the progress message and the story show, and what their upserts
            # read first, read together: one transaction (one view of the request), not one each.
            async with self._db.transaction() as repos:
                request = await repos.requests.get(request_id)
                if request is None:
                    return
                # Where the request was made: its installation's approvals channel and policy.
                policy = self._people.policy_for(request)
                channel = policy.approvals_channel or ""
                quote = await repos.quotes.get(request.quote_id)
                old_quote = (await repos.quotes.get(superseded_quote_id)
                             if superseded_quote_id else None)
                approvals = await repos.approvals.for_request(request_id)
                record = await repos.clusters.by_request(request_id)
                readiness = await repos.readiness.get(record.id) if record else None
                held = await repos.request_quotes.quotes_of(request_id)  # newest first
                card_key = await _card_key(repos, request, held) if card else ""
                card_seen = (await self.outbox.seen(repos, APPROVAL, card_key, channel)
                             if card else None)
                top_seen = await self.outbox.seen(repos, PROGRESS, request_id,
                                                  request.channel_id)
                story = await self._untold(repos, request, approvals, record, held)
            assert quote is not None
            now = self._clock.now()
            if old_quote is not None:
                stale = request.model_copy(update={"status": RequestStatus.SUPERSEDED,
                                                   "hourly_cents": request.previous_hourly_cents
                                                   or request.hourly_cents})
                retired = approval_blocks.approval_outcome(stale, old_quote, approvals, now=now)
                await self.outbox.upsert(APPROVAL, f"{request_id}/{old_quote.id}",
                                         channel, retired, create=False)
            if card:
                current = [a for a in approvals if a.quote_id == quote.id]
                shown = (approval_blocks.approval_card(request, quote, now=now,
                                                       approvals=current, policy=policy)
                         if request.status is RequestStatus.PENDING
                         else approval_blocks.approval_outcome(request, quote, approvals,
                                                               now=now, policy=policy))
                try:
                    await self.outbox.upsert(APPROVAL, card_key, channel, shown, seen=card_seen)
                except Unreachable as exc:
                    with self._people.at(request):  # its approvers, by DM
                        await self.fallbacks.card_by_dm(request, quote.id, shown, exc)
            progress = cluster_blocks.request_progress(request, quote, record, now=now,
                                                       approvals=approvals,
                                                       policy=policy,
                                                       serving=readiness_blocks.serving_line(
                                                           record, readiness)
                                                       if record else None)
            top = await self.outbox.upsert(PROGRESS, request_id, request.channel_id, progress,
                                           fallback_user=request.requester_id, seen=top_seen)
            for key, words in story:  # in the progress message's thread, each step once
                if top is not None:
                    await self.outbox.post_once(key, top.channel_id,
                                                story_blocks.story_post(words), thread_ts=top.ts)
        # Only the Homes this state of the request changes (bot/slack/audiences.py).
        now_shown = audiences.shown(request, record)
        with self._people.at(request):  # its installation's approvers, budgets and teams
            whose = await self._audiences.whose(request, now_shown, self._people.approvers)
            if await self._refresh_homes(whose):
                self._audiences.published(request, now_shown)

    async def _untold(self, repos: Repos, request: LaunchRequest,
                      approvals: Sequence[Approval], record: ClusterRecord | None,
                      held: Sequence[str]) -> list[tuple[str, str]]:
        """The steps of the request's story not yet told in its thread, oldest first, by key
        (bot/slack/blocks/story.py): each refresh retells none of them."""
        held = [q for q in reversed(held) if q != request.quote_id] + [request.quote_id]
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
        steps = [(story_blocks.story_key(request, step), words) for step, words in
                 story_blocks.story(request, approvals, record, quotes=quotes,
                                    attempts=attempts, retried_by=retried_by,
                                    now=self._clock.now())]
        told = await repos.outbox.delivered_among([key for key, _ in steps])
        return [(key, words) for key, words in steps if key not in told]

    async def _refresh_cluster(self, cluster_id: str) -> None:
        if request_id := self._request_of.get(cluster_id):
            await self._requests((request_id, False))
            return
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
        if record is None:
            return
        if record.request_id is not None:
            self._request_of[cluster_id] = record.request_id
            await self._requests((record.request_id, False))
            return
        # Adopted (found at AI Reserve, not launched here): its card in the approvals channel,
        # posted when it was told (bot/slack/found.py) — or, told in its channel's digest and
        # still unclaimed, the digest (edits of it coalesce in the outbox).
        listed = await self.found.listed(record)
        if listed or record.owner_id is None:
            async with self._db.transaction() as repos:
                carded = await repos.messages.get(PROGRESS, top_subject(record)) is not None
            if listed or not carded:
                await self.outbox.queue_refresh(FOUND, record.channel_id)
            if record.owner_id is None and not carded:
                return  # not told yet, or told in the digest: not a card of its own
        await self._found_card(cluster_id)

    async def _found_card(self, cluster_id: str) -> None:
        """A found cluster's own card (Claim, Terminate), posted or edited."""
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
        if record is None:
            return
        async with self._locks[cluster_id]:
            await self.fallbacks.quietly(self.outbox.upsert(  # a card, not a record
                PROGRESS, top_subject(record),
                self._people.policy_for(record).approvals_channel or "",
                notice_blocks.untracked_cluster(record, now=self._clock.now())))
        await self._refresh_homes([record.owner_id])

    async def _approvers_homes(self) -> None:
        await self._refresh_homes(await self._people.approvers())

    async def deliver_notices(self) -> None:
        """Post every notice nobody else is posting, by lane (bot/slack/notices.py)."""
        await self.notices.deliver()

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

    async def envelope_notice(self, cluster: ClusterRecord, *, stage: str, ends_at: datetime,
                              terminate_at: datetime | None,
                              recipients: Sequence[str]) -> None:
        now = self._clock.now()
        # Extend offers the policy's lifetime once more (else the envelope once more).
        more = self._people.policy_for(cluster).max_lifetime_hours
        if stage == "warned":
            message = envelope_blocks.envelope_warning(cluster, now=now, ends_at=ends_at,
                                                       terminate_at=terminate_at)
        elif stage == "due":
            message = envelope_blocks.envelope_due(cluster, now=now, ends_at=ends_at,
                                                   enforced=terminate_at is not None,
                                                   terminate_at=terminate_at, extend_hours=more)
        else:
            assert terminate_at is not None
            message = envelope_blocks.envelope_final_warning(cluster, now=now,
                                                             terminate_at=terminate_at,
                                                             extend_hours=more)
        async with self._db.transaction() as repos:
            waiting = await repos.extensions.pending(cluster_id=cluster.id)
        if waiting:  # an extension already asked for: say it waits, not only "extend"
            message = compose(message.text, [
                *message.pairs(), *(context(extension_blocks.pending_line(e)) for e in waiting)],
                key=f"envelope.{stage}")
        for person in recipients:
            await self.outbox.dm_once(
                f"envelope/{cluster.id}/{stage}/{ends_at.isoformat()}/{person}", person, message)

    async def envelope_extended(self, cluster: ClusterRecord, *, by: str, hours: int) -> None:
        message = envelope_blocks.envelope_extended(cluster, by=by, hours=hours)
        async with self._db.transaction() as repos:
            top = await repos.messages.get(PROGRESS, top_subject(cluster))
        if top is not None:
            await self.outbox.post_once(f"extended/{cluster.id}/{cluster.lifetime_hours}",
                                        top.channel_id, message, thread_ts=top.ts)
        await self.refresh_cluster(cluster.id)

    async def refresh_extension(self, extension_id: str) -> None:
        async with self._db.transaction() as repos:
            ext = await repos.extensions.get(extension_id)
        if ext is None:
            return
        async with self._db.transaction() as repos:  # the thread tells each step, once
            record = await repos.clusters.get(ext.cluster_id)
            top = await repos.messages.get(PROGRESS, top_subject(record))
        with self._people.at(record):  # its installation's approvals channel and approvers
            await self.outbox.upsert(EXTENSION, ext.id, self._people.policy.approvals_channel
                                     or "", extension_blocks.extension_card(ext))
            # Approvers' Homes list the extensions waiting for them (bot/services/home.py).
            await self._refresh_homes(await self._people.approvers())
        if top is not None:
            for key, words in extension_blocks.extension_steps(ext):
                await self.outbox.post_once(key, top.channel_id,
                                            story_blocks.story_post(words), thread_ts=top.ts)

    async def refresh_home(self, user_id: str) -> None:
        """Publish the person's App Home as it is now (calls while one is being published fold
        into one more: bot/slack/coalesce.py)."""
        await self._homes(user_id)

    async def _publish_home(self, user_id: str) -> None:
        facts = await self._home.facts(user_id)
        await self._client.views_publish(
            user_id=user_id, view=home_blocks.home_payload(facts, now=self._clock.now()))

    async def _refresh_homes(self, user_ids: Iterable[str | None]) -> bool:
        """The App Home of everyone a change concerns (best effort: a home is not a record);
        whether every one was published."""
        published = True
        for user_id in sorted({u for u in user_ids if u}):
            try:
                await self.refresh_home(user_id)
            except SlackApiError as exc:
                published = False
                log.warning("could not publish the home of %s: %s", user_id,
                            exc.response.get("error"))
        return published

    async def tell(self, user_id: str, text: str, *, key: str | None = None) -> None:
        """A DM, once per `key` across replicas; without a key, the same words to the same
        person are said once (pass a key for a message that may be repeated)."""
        key = key or sha256(text.encode()).hexdigest()[:24]
        await self.outbox.dm_once(f"tell/{user_id}/{key}", user_id, common_blocks.notice(text))


async def _card_key(repos: Repos, request: LaunchRequest, held: Sequence[str]) -> str:
    """The approval card to show `request` on: its current quote's — but a decided request that
    moved to a new quote keeping its decision (stock came back) edits the card it was decided
    on, the newest one posted (`held`: its quotes, newest first), rather than posting a second."""
    current = f"{request.id}/{request.quote_id}"
    if request.status is RequestStatus.PENDING \
            or await repos.messages.get(APPROVAL, current) is not None:
        return current
    for quote_id in held:
        if await repos.messages.get(APPROVAL, f"{request.id}/{quote_id}") is not None:
            return f"{request.id}/{quote_id}"
    return current
