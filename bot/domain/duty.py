"""Who is on a degraded cluster, and when the bot escalates (pure: `now` is passed in).

A degraded episode bills the full locked rate until someone acts. The degraded notice offers
**Acknowledge** (someone is on it) and **Snooze 1 h** (not yet: ask again later). If nobody
acknowledges, recovers (by hand) or terminates within the policy's `escalate_after_minutes`,
the bot escalates once per episode to the policy's `escalate_to`; and once more when recovery
is exhausted (AI Reserve makes no more attempts: only a person can end the bill). A snooze
delays either until it ends; an acknowledgement holds for the whole episode. The state is one
row per (cluster, episode) — a new episode starts with nobody on it.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from bot.domain import recovery
from bot.domain.charges import charges_between
from bot.domain.models import ClusterRecord, ClusterState, Frozen

SNOOZE = timedelta(hours=1)
DEFAULT_ESCALATE_AFTER_MINUTES = 30
_INSTANT = timedelta(microseconds=1)


class Duty(Frozen):
    """Who is on one degraded episode of one cluster."""

    cluster_id: str
    episode: int
    acknowledged_by: str | None = None
    acknowledged_at: datetime | None = None
    snoozed_by: str | None = None
    snoozed_until: datetime | None = None
    snoozes: int = 0  # how many times it was snoozed (the Snooze button's version)
    escalated_at: datetime | None = None
    exhausted_escalated_at: datetime | None = None


class Escalation(enum.StrEnum):
    OVERDUE = "overdue"  # nobody acted within escalate_after_minutes
    EXHAUSTED = "exhausted"  # every recovery attempt is spent


def episode_of(c: ClusterRecord) -> int | None:
    """The degraded episode the cluster is in now, or None when it is not degraded."""
    if c.status is not ClusterState.DEGRADED or c.observed is None or not c.observed.episode:
        return None
    return c.observed.episode


def acted_by_hand(c: ClusterRecord, episode: int) -> bool:
    """Someone asked for a recovery attempt in this episode (the bot's own record of it)."""
    return any(m.split(":")[0] == str(episode) for m in c.manual_recoveries)


def escalation_due(c: ClusterRecord, duty: Duty | None, *, after: timedelta,
                   now: datetime) -> Escalation | None:
    """Which escalation is due for `c` now, if any (each at most once per episode).

    Exhausted recovery escalates at once (and counts as the first one if that had not gone
    yet); otherwise after `after` from the episode's start (AI Reserve's time) with nobody on
    it. Acknowledged: never. Snoozed: not before the snooze ends."""
    episode = episode_of(c)
    if episode is None or c.observed is None:
        return None
    if duty is not None and (duty.acknowledged_by is not None
                             or (duty.snoozed_until is not None and now < duty.snoozed_until)):
        return None
    if recovery.exhausted(c):
        return None if duty is not None and duty.exhausted_escalated_at else Escalation.EXHAUSTED
    if duty is not None and duty.escalated_at is not None:
        return None
    if acted_by_hand(c, episode):
        return None
    started = c.observed.episode_started_at
    if started is None or now < started + after:
        return None
    return Escalation.OVERDUE


def lost_cents(c: ClusterRecord, *, now: datetime) -> tuple[int, int]:
    """(cents, charges): what AI Reserve charged inside the current episode so far — the
    charges with an instant from the episode's start to `now` (bot/domain/charges.py), at the
    locked rate. A degraded cluster bills like a running one."""
    started = c.observed.episode_started_at if c.observed else None
    if started is None:
        return 0, 0
    charges = charges_between(c, started, now + _INSTANT)
    return charges * c.hourly_cents, charges
