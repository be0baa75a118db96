"""The Slack side of `DutyNotifier`: the degraded notice edited to show who is on it, the
thread lines, and the escalation posted where its target sees it — every post keyed in the
outbox (durable: a refused one is retried), so each is said once across replicas."""

from __future__ import annotations

import logging

from bot.domain.duty import Duty, Escalation
from bot.domain.models import ClusterRecord, MessageRef
from bot.domain.watch import NoticeKind
from bot.slack.blocks import duty as duty_blocks
from bot.slack.blocks import notices as notice_blocks
from bot.slack.blocks.story import story_post
from bot.slack.refusals import POST_ERRORS, reason
from bot.slack.senders import OutboxSender

log = logging.getLogger(__name__)

NOTICE = "notice"  # messages kind: a thread notice the bot edits later (the degraded one)
PROGRESS = "progress"  # the cluster's top message (bot/slack/notifier.py)


def notice_subject(cluster_id: str, key: str) -> str:
    return f"{cluster_id}/{key}"


def top_subject(record: ClusterRecord) -> str:
    return record.request_id or f"cluster:{record.id}"


class DutyNotices(OutboxSender):
    async def _top(self, record: ClusterRecord) -> MessageRef | None:
        async with self._db.transaction() as repos:
            return await repos.messages.get(PROGRESS, top_subject(record))

    async def duty_changed(self, record: ClusterRecord, duty: Duty, *, event: str) -> None:
        key = f"degraded:{duty.episode}"
        async with self._db.transaction() as repos:
            ref = await repos.messages.get(NOTICE, notice_subject(record.id, key))
            notice = next((n for n in await repos.notices.for_cluster(record.id)
                           if n.key == key and n.kind is NoticeKind.DEGRADED), None)
        now = self._clock.now()
        if ref is not None and notice is not None:
            base = notice_blocks.thread_notice(notice, record, now=now)
            try:
                await self._outbox.upsert(NOTICE, notice_subject(record.id, key),
                                          ref.channel_id, duty_blocks.degraded_notice(
                                              base, record, duty, now=now), create=False)
            except POST_ERRORS as exc:  # the thread line below still says it
                log.warning("could not edit the degraded notice of %s: %s", record.id,
                            reason(exc))
        line = (duty_blocks.acknowledged_line(record, duty) if event == "acknowledged"
                else duty_blocks.snoozed_line(record, duty))
        top = await self._top(record)
        if top is not None:
            await self._outbox.post_once(
                f"duty/{record.id}/{duty.episode}/{event}/{duty.snoozes}", top.channel_id,
                story_post(line), thread_ts=top.ts)

    async def escalate(self, record: ClusterRecord, duty: Duty, kind: Escalation, *,
                       target: str, lost_cents: int, charges: int, after_minutes: int) -> None:
        top = await self._top(record)
        thread = duty_blocks.permalink(top.channel_id, top.ts) if top else None
        message = duty_blocks.escalation(record, kind, target=target, lost_cents=lost_cents,
                                         charges=charges, after_minutes=after_minutes,
                                         thread=thread, now=self._clock.now())
        key = f"escalation/{record.id}/{duty.episode}/{kind.value}"
        if target.startswith("S"):  # a user group is mentioned where the cluster lives …
            async with self._db.transaction() as repos:
                storm = await repos.digests.digest_of(record.id) is not None
            if storm and top is not None:  # … in its thread while a storm's digest is open
                await self._outbox.post_once(key, top.channel_id, message, thread_ts=top.ts)
                return
            await self._outbox.post_once(key, top.channel_id if top else record.channel_id,
                                         message)
        else:  # a channel is posted to
            await self._outbox.post_once(key, target, message)
        if top is not None:
            await self._outbox.post_once(
                f"{key}/thread", top.channel_id, story_post(duty_blocks.escalated_line(
                    record, kind, target=target, lost_cents=lost_cents)), thread_ts=top.ts)
