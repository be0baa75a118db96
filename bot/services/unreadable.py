"""A cluster AI Reserve lists but the bot can't read: one bad item, never a blind sweep.

The listing skips an item that does not parse (bot/reserve/retry.py logs its id and the field);
the sweep goes on with the others and this module keeps the skipped cluster's record as it was —
its last known figures, never a made-up $0 — counting the sweeps in a row that could not read it
(the episode, in its stored observation). At UNREADABLE_SWEEPS the owner and the approvals
channel hear it once per episode: the bot is blind to a cluster that may still be billing. When a
poll reads it again the count starts over (the observation is replaced) and its thread is told.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import datetime

from bot.domain.models import Observation
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from bot.reserve.port import SkippedItem
from storage.repositories import Repos

log = logging.getLogger(__name__)

UNREADABLE_SWEEPS = 3
"""Sweeps in a row (one a minute by default) a listed cluster must fail to parse before people
are told: one bad answer is noise; three minutes blind to something that bills is not."""


async def note_unreadable(repos: Repos, *, skipped: Mapping[str, SkippedItem],
                          tracked: Collection[str], now: datetime) -> list[Notice]:
    """Count one more unreadable sweep for each tracked cluster in `skipped`; queue the
    UNREADABLE notice for those that reach UNREADABLE_SWEEPS (its key names the episode, so it
    is queued once). Returns the notices queued now."""
    queued: list[Notice] = []
    for cluster_id in sorted(set(skipped) & set(tracked)):
        record = await repos.clusters.get(cluster_id)
        if record is None or record.observed is None or not record.status.is_live:
            continue  # nothing known to keep, or it no longer bills: nobody to warn
        seen = record.observed
        streak = seen.model_copy(update={"unreadable_sweeps": seen.unreadable_sweeps + 1,
                                         "unreadable_since": seen.unreadable_since or now})
        await repos.clusters.update(cluster_id, now=now, observed=streak)
        if streak.unreadable_sweeps < UNREADABLE_SWEEPS:
            continue
        assert streak.unreadable_since is not None  # set just above
        notice = Notice(
            cluster_id=cluster_id, key=f"unreadable:{streak.unreadable_since.isoformat()}",
            kind=NoticeKind.UNREADABLE, created_at=now,
            facts=NoticeFacts(accrued_cents=seen.accrued_cents, episode=seen.episode,
                              unreadable_field=skipped[cluster_id].field,
                              unreadable_since=streak.unreadable_since))
        added = await repos.notices.add_new([notice])
        if added:
            log.warning("cluster %s unreadable for %d sweeps (field %s): telling its owner and "
                        "the approvals channel", cluster_id, streak.unreadable_sweeps,
                        skipped[cluster_id].field)
        queued += added
    return queued


def readable_again(before: Observation | None, after: Observation, *, cluster_id: str,
                   now: datetime) -> list[Notice]:
    """The line for the cluster's thread when a poll reads it after people were told it
    couldn't be read (an episode too short to be told ends quietly)."""
    if (before is None or before.unreadable_since is None or after.unreadable_since is not None
            or before.unreadable_sweeps < UNREADABLE_SWEEPS):
        return []
    since = before.unreadable_since
    return [Notice(cluster_id=cluster_id, key=f"readable:{since.isoformat()}",
                   kind=NoticeKind.READABLE_AGAIN, created_at=now,
                   facts=NoticeFacts(accrued_cents=after.accrued_cents, episode=after.episode,
                                     unreadable_since=since))]
