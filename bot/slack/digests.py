"""Storms become digests, on Slack's side: before a delivery pass, channels with more than
`STORM_THRESHOLD` degraded notices waiting open (or join) their one digest; while a cluster is
in an open digest its broadcast notices stay in its thread (the digest speaks for the channel);
after the pass each open digest is rendered and — only if that changed — edited in place,
and closed once none of its clusters is degraded.

The digest lives in the database (storage/digests.py): one open digest per channel however
many replicas open it, and the rendering each edit showed, claimed by compare-and-set before
Slack is called — so of three replicas one posts it (through the outbox's `upsert`, which
claims the first post) and one edits it per change.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from bot.domain.digest import still_degraded, storms
from bot.domain.models import ClusterRecord, MessageRef
from bot.domain.watch import Notice, NoticeKind
from bot.slack.blocks import digest as digest_blocks
from bot.slack.duty import NOTICE, PROGRESS, notice_subject, top_subject
from bot.slack.refusals import POST_ERRORS, reason
from bot.slack.senders import OutboxSender

log = logging.getLogger(__name__)

DIGEST = "digest"  # messages kind: a storm's digest, by digest id
_PENDING_SEEN = 1000  # degraded notices looked at per pass (a storm of 250 fits)


class StormDigests(OutboxSender):
    async def gather(self) -> bool:
        """Open a digest where a storm starts; put each waiting degraded notice's cluster in
        its channel's open digest. True when some went into a digest (to show it now)."""
        now = self._clock.now()
        joined = False
        async with self._db.transaction() as repos:
            waiting = [n for n in await repos.notices.pending(limit=_PENDING_SEEN)
                       if n.kind is NoticeKind.DEGRADED]
            if not waiting:
                return False
            channels: dict[str, list[str]] = {}
            for notice in waiting:
                record = await repos.clusters.get(notice.cluster_id)
                if record is not None:
                    channels.setdefault(record.channel_id, []).append(record.id)
            # A storm's size is every cluster degraded in the channel now, not only those whose
            # notice still waits: notices go out while the sweep is still storing the rest, so
            # "waiting now" alone may never pass the threshold.
            storming = storms(c.channel_id for c in await repos.clusters.list_degraded())
            for channel, ids in channels.items():
                digest = await repos.digests.open_in(channel)
                if digest is None and channel in storming:
                    digest = await repos.digests.open(channel, now=now)
                    log.info("storm in %s: %d clusters degraded at once; one digest",
                             channel, len(ids))
                if digest is not None:
                    await repos.digests.join(digest.id, ids, now=now)
                    joined = True
        return joined

    async def thread_post(self, notice: Notice, record: ClusterRecord, top: MessageRef,
                          kwargs: dict[str, Any], *, broadcast: bool) -> None:
        """A notice's line in the cluster's thread, `broadcast` to the channel too (a kind
        that is, when no digest speaks for it: read with the notice's claim); the degraded
        one's coordinates kept (Acknowledge edits it)."""
        posted = await self._client.chat_postMessage(channel=top.channel_id, thread_ts=top.ts,
                                                     reply_broadcast=broadcast, **kwargs)
        if notice.kind is NoticeKind.DEGRADED:
            async with self._db.transaction() as repos:
                await repos.messages.put(NOTICE, notice_subject(record.id, notice.key),
                                         MessageRef(channel_id=str(posted["channel"]),
                                                    ts=str(posted["ts"])),
                                         now=self._clock.now())

    async def refresh(self) -> None:
        """Render every open digest; edit the ones whose rendering changed; close the ones
        with no degraded cluster left (after their last edit)."""
        async with self._db.transaction() as repos:
            open_now = await repos.digests.list_open()
        for digest in open_now:
            # Its clusters read, rendered, what it shows claimed and what the edit reads
            # first (bot/slack/outbox.py `seen`): one transaction.
            async with self._db.transaction() as repos:
                members = [c for c in [await repos.clusters.get(i)
                                       for i in await repos.digests.members(digest.id)] if c]
                if not members:
                    continue
                tops = {c.id: ref for c in members
                        if (ref := await repos.messages.get(PROGRESS, top_subject(c)))}
                message = digest_blocks.digest(digest.id, members, tops)
                shown = hashlib.sha256(json.dumps(message.as_kwargs(), sort_keys=True)
                                       .encode()).hexdigest()[:24]
                over = not still_degraded(members)
                if not await repos.digests.shown(digest.id, shown,
                                                 close_at=self._clock.now() if over else None):
                    continue  # shows this already (edited here or by another replica)
                seen = await self._outbox.seen(repos, DIGEST, digest.id, digest.channel_id)
            try:
                await self._outbox.upsert(DIGEST, digest.id, digest.channel_id, message,
                                          seen=seen)
            except POST_ERRORS as exc:
                log.warning("could not post the storm digest in %s: %s", digest.channel_id,
                            reason(exc))
                async with self._db.transaction() as repos:
                    await repos.digests.unshown(digest.id)
                continue
            await self._tell_owners(digest.id, members)

    async def _tell_owners(self, digest_id: str, members: list[ClusterRecord]) -> None:
        """Each owner of a degraded cluster in the storm, once per digest (a durable DM keyed
        by the digest and the person): their clusters, their burn, the way to the digest."""
        async with self._db.transaction() as repos:
            ref = await repos.messages.get(DIGEST, digest_id)
        owners = sorted({c.owner_id for c in still_degraded(members) if c.owner_id})
        for owner in owners:
            theirs = [c for c in still_degraded(members) if c.owner_id == owner]
            await self._outbox.dm_once(f"digest/{digest_id}/owner/{owner}", owner,
                                       digest_blocks.owner_dm(theirs, ref))
