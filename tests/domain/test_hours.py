"""The receipt's hours: one per charge mark, degraded and not-serving marked, uncharged kept."""

from datetime import timedelta

from bot.domain.hours import HourState, degraded_spans, hour_states
from bot.domain.models import Observation
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from tests.domain import HOUR, NOW, make_cluster


def notice(kind, at, key):
    return Notice(cluster_id="cl-1", key=key, kind=kind, facts=NoticeFacts(), created_at=at)


def test_degraded_spans_from_the_notices():
    ready = NOW - 10 * HOUR
    notices = [notice(NoticeKind.DEGRADED, ready + 2 * HOUR, "d1"),
               notice(NoticeKind.RECOVERY_STARTED, ready + 2.5 * HOUR, "r1"),
               notice(NoticeKind.RECOVERED, ready + 3.5 * HOUR, "ok1"),
               notice(NoticeKind.DEGRADED, ready + 8 * HOUR, "d2")]
    assert degraded_spans(notices, end=NOW) == [(ready + 2 * HOUR, ready + 3.5 * HOUR),
                                                (ready + 8 * HOUR, NOW)]
    assert degraded_spans([], end=NOW) == []


def test_each_mark_gets_its_state():
    ready = NOW - 10 * HOUR
    skipped = (ready + 5 * HOUR,)
    c = make_cluster(ready_at=ready, accrued_hours=9, accrued_cents=9 * 6253,
                     observed=Observation(status="running", skipped_marks=skipped))
    degraded = [(ready + 2 * HOUR, ready + 3.5 * HOUR)]
    not_serving = [(ready, ready + 30 * timedelta(minutes=1))]
    states = [state for _, state in hour_states(c, degraded=degraded, not_serving=not_serving)]
    assert states == [HourState.NOT_SERVING, HourState.BILLED, HourState.DEGRADED,
                      HourState.DEGRADED, HourState.BILLED, HourState.NOT_BILLED,
                      HourState.BILLED, HourState.BILLED, HourState.BILLED, HourState.BILLED]
    assert sum(s is not HourState.NOT_BILLED for s in states) == c.accrued_hours
    assert hour_states(make_cluster(ready_at=None, accrued_hours=0, accrued_cents=0)) == []
