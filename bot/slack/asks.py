"""The owner's questions about a cluster, by DM: not serving after the readiness limit
(bot/slack/blocks/readiness.py) and idle (bot/slack/blocks/idle.py). Each goes to the owner —
the approvers while nobody owns it — and only while there is still something to decide; the
notifier delivers them once each (keyed under the notice), as its other notices."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from bot.domain.idle import IdleState
from bot.domain.models import ClusterRecord, ClusterState
from bot.domain.readiness import ReadinessState
from bot.domain.watch import Notice, NoticeKind
from bot.services.people import People
from bot.slack.blocks import idle as idle_blocks
from bot.slack.blocks import readiness as readiness_blocks
from bot.slack.outbox import SlackOutbox
from storage.db import Database

Post = tuple[str, str, Callable[[], Awaitable[object]]]
KINDS = (NoticeKind.NOT_SERVING, NoticeKind.IDLE)
_BILLING = (ClusterState.RUNNING, ClusterState.DEGRADED)


async def owner_asks(notice: Notice, record: ClusterRecord, *, prefix: str, db: Database,
                     people: People, outbox: SlackOutbox) -> Sequence[Post]:
    """The DMs of one NOT_SERVING or IDLE notice (none: nothing left to decide)."""
    async with db.transaction() as repos:
        check = await repos.readiness.get(record.id)
    if record.status not in _BILLING or check is None:
        return []  # terminated since it was queued
    if notice.kind is NoticeKind.NOT_SERVING:
        if check.state is not ReadinessState.WATCHING:
            return []  # serving since it was queued
        message = readiness_blocks.not_serving_dm(notice, record)
    else:
        if check.idle_state is not IdleState.IDLE or check.idle_episode != notice.facts.prompt:
            return []  # kept or terminated since it was queued
        message = idle_blocks.idle_dm(notice, record)
    kwargs = message.as_kwargs()
    owners = [record.owner_id] if record.owner_id else sorted(await people.approvers())
    return [(f"{prefix}/dm/{person}", person, partial(outbox.dm, person, kwargs))
            for person in owners]
