"""Storms become digests (Alertmanager's grouping: one message per group, edited in place).

When more than `STORM_THRESHOLD` clusters of one channel degrade within one poll (their
degraded notices wait to be delivered together), the channel gets one digest message instead
of a broadcast per cluster; each cluster's thread still gets its own line. While a channel's
digest is open every cluster of that channel that degrades joins it (Alertmanager's
group_interval); it closes once none of its clusters is degraded any more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bot.domain.models import ClusterRecord, ClusterState

# More than this many clusters degraded in one channel within one poll is a storm.
STORM_THRESHOLD = 5


def storms(channels: Iterable[str], *, threshold: int = STORM_THRESHOLD) -> set[str]:
    """The channels (one entry per degraded cluster) that have more than `threshold`."""
    counts: dict[str, int] = {}
    for channel in channels:
        counts[channel] = counts.get(channel, 0) + 1
    return {channel for channel, n in counts.items() if n > threshold}


def still_degraded(members: Sequence[ClusterRecord]) -> list[ClusterRecord]:
    return [c for c in members if c.status is ClusterState.DEGRADED]


def burn_cents(members: Sequence[ClusterRecord]) -> int:
    """$/h of the whole storm still billing degraded (each cluster's locked rate)."""
    return sum(c.hourly_cents for c in still_degraded(members))
