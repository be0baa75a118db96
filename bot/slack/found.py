"""Telling the clusters found at AI Reserve that nobody here launched — after the sweep has
recorded them (bot/services/reconciling.py), through the outbox like every other notice.

A few found together get a card each in the approvals channel (Claim, Terminate), as one found
alone always has. More than `FOUND_TOGETHER` become one digest per channel — "N clusters
running that nobody here launched, $X/h", each with **Claim** — edited in place as they are
claimed or end; more found later join it (and its thread says so). Who has been told is kept
in the outbox: a card is its message, a digest member is the delivered key `found/<cluster>`;
the approvers' App Homes list the unclaimed ones too. A member's own messages (its reminders)
are the digest's: an hourly DM per unclaimed cluster per approver is N DMs, not one.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from bot.clock import Clock
from bot.domain.digest import STORM_THRESHOLD
from bot.domain.models import ClusterRecord
from bot.slack.blocks import found as found_blocks
from bot.slack.duty import PROGRESS, top_subject
from bot.slack.outbox import SlackOutbox
from storage.db import Database
from storage.outbox import FOUND

log = logging.getLogger(__name__)

# FOUND is also the messages kind of a channel's digest of found clusters, by channel.
FOUND_TOGETHER = STORM_THRESHOLD  # more than this found at once: one digest, not cards


def found_key(cluster_id: str) -> str:
    return f"{FOUND}/{cluster_id}"


class FoundClusters:
    def __init__(self, *, db: Database, outbox: SlackOutbox, clock: Clock,
                 card: Callable[[str], Awaitable[None]],
                 homes: Callable[[], Awaitable[None]]) -> None:
        self._db = db
        self._outbox = outbox
        self._clock = clock
        self._card = card  # posts or edits one found cluster's own card
        self._homes = homes  # the approvers' App Homes, published again

    async def tell(self, channel: str) -> None:
        """Tell what was found in `channel` and not told yet; show the digest as it stands."""
        async with self._db.transaction() as repos:
            unclaimed = await repos.clusters.unclaimed(channel)
            carded = await repos.messages.among(PROGRESS, [top_subject(c) for c in unclaimed])
            listed = await repos.outbox.delivered_among([found_key(c.id) for c in unclaimed])
            digest = await repos.messages.get(FOUND, channel)
        members = [c for c in unclaimed if found_key(c.id) in listed]
        new = [c for c in unclaimed if top_subject(c) not in carded
               and found_key(c.id) not in listed]
        if len(new) <= FOUND_TOGETHER:
            for record in new:  # a few: a card each, as one found alone has
                await self._card(record.id)
            new = []
        if not new and digest is None:
            return
        await self._outbox.upsert(FOUND, channel, channel, found_blocks.digest([*members, *new]))
        if new:
            async with self._db.transaction() as repos:
                await repos.outbox.told([found_key(c.id) for c in new], kind=FOUND,
                                        target=channel, now=self._clock.now())
            log.info("told %d clusters found at AI Reserve in one digest in %s", len(new),
                     channel)
            if digest is not None:  # it was posted earlier: its thread says more joined
                await self._more(channel, new)
            await self._homes()

    async def _more(self, channel: str, new: Iterable[ClusterRecord]) -> None:
        ids = sorted(c.id for c in new)
        async with self._db.transaction() as repos:
            ref = await repos.messages.get(FOUND, channel)
        if ref is None:
            return
        batch = hashlib.sha256(",".join(ids).encode()).hexdigest()[:16]
        await self._outbox.post_once(f"{FOUND}/{channel}/more/{batch}", ref.channel_id,
                                     found_blocks.more_found(len(ids)), thread_ts=ref.ts)

    async def listed(self, record: ClusterRecord) -> bool:
        """Whether `record` was told in its channel's digest (so the digest shows it)."""
        async with self._db.transaction() as repos:
            return bool(await repos.outbox.delivered_among([found_key(record.id)]))
