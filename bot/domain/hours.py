"""A cluster's hours, one per hourly charge mark (`ready_at + k·1 h`, contract §5.3), each with
what it was: billed, billed while degraded, billed while not serving (the readiness rule had
not matched yet), or passed uncharged because every node was down. The receipt's chart draws
them (bot/slack/charts.py)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime, timedelta

from bot.domain.models import ClusterRecord
from bot.domain.spend import charge_instants, uncharged_marks
from bot.domain.watch import Notice, NoticeKind

HOUR = timedelta(hours=1)
Span = tuple[datetime, datetime]  # [start, end)
# A degraded episode starts with its notice and ends with recovered / failed / the end.
_ENDS_DEGRADED = (NoticeKind.RECOVERED, NoticeKind.FAILED, NoticeKind.GRACE_TERMINATED,
                  NoticeKind.TERMINATED_OUTSIDE)


class HourState(enum.StrEnum):
    BILLED = "billed"
    DEGRADED = "billed while degraded"
    NOT_SERVING = "billed while not serving"
    NOT_BILLED = "not billed (every node down)"


def degraded_spans(notices: Sequence[Notice], *, end: datetime) -> list[Span]:
    """The degraded episodes the watcher announced, from its notices (in stored order): from
    the provider's episode start to its last node back, as the notices carry them (the poll
    that saw it for notices stored before they did)."""
    spans: list[Span] = []
    opened: datetime | None = None
    for notice in notices:
        if notice.kind is NoticeKind.DEGRADED and opened is None:
            opened = notice.facts.episode_started_at or notice.created_at
        elif notice.kind in _ENDS_DEGRADED and opened is not None:
            spans.append((notice.facts.episode_started_at or opened,
                          notice.facts.episode_ended_at or notice.created_at))
            opened = None
    if opened is not None:
        spans.append((opened, end))
    return spans


def hour_states(c: ClusterRecord, *, degraded: Sequence[Span] = (),
                not_serving: Sequence[Span] = ()) -> list[tuple[datetime, HourState]]:
    """Every hour mark the cluster passed, oldest first, with its state. An hour is degraded
    (or not serving) when any of it, [mark, mark + 1 h), overlaps such a span; degraded wins,
    since the provider's fault is the one to see first."""
    if c.ready_at is None:
        return []
    skipped = uncharged_marks(c)
    marks = [(at, False) for at in charge_instants(c, skipped)]
    marks += [(at, True) for at in skipped]
    out: list[tuple[datetime, HourState]] = []
    for at, uncharged in sorted(marks):
        if uncharged:
            state = HourState.NOT_BILLED
        elif _overlaps(at, degraded):
            state = HourState.DEGRADED
        elif _overlaps(at, not_serving):
            state = HourState.NOT_SERVING
        else:
            state = HourState.BILLED
        out.append((at, state))
    return out


def _overlaps(at: datetime, spans: Sequence[Span]) -> bool:
    return any(start < at + HOUR and at < end for start, end in spans)
