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


def test_degraded_spans_are_the_providers_episode_not_the_polls():
    """Degraded 12:55–13:02 at AI Reserve, seen by polls at 13:01 and 13:09: hour 12:00–13:00
    was degraded for five minutes (the poll times would say it never was), and hour
    13:00–14:00 for two."""
    from bot.domain.models import ClusterState, NodeState
    from bot.domain.watch import notices_between
    ready = NOW - 10 * HOUR  # marks on the hour
    started, back = ready + 3 * HOUR - 5 * timedelta(minutes=1), ready + 3 * HOUR + 2 * \
        timedelta(minutes=1)
    running = Observation(status=ClusterState.RUNNING)
    down = Observation(status=ClusterState.DEGRADED, episode=1, episode_started_at=started,
                       nodes=(NodeState(rank=0, status="stopped"),))
    up = Observation(status=ClusterState.RUNNING, episode=1, episode_started_at=started,
                     nodes=(NodeState(rank=0, status="running", last_recovered_at=back),))
    polled = [*notices_between(running, down, cluster_id="cl-1", now=back - timedelta(
                  minutes=1), terminated_by_bot=False, manual_attempts=frozenset()),
              *notices_between(down, up, cluster_id="cl-1", now=back + 7 * timedelta(
                  minutes=1), terminated_by_bot=False, manual_attempts=frozenset())]
    assert degraded_spans(polled, end=NOW) == [(started, back)]
    c = make_cluster(ready_at=ready, accrued_hours=5, accrued_cents=5 * 6253)
    states = [s for _, s in hour_states(c, degraded=degraded_spans(polled, end=NOW))]
    assert states[2:4] == [HourState.DEGRADED, HourState.DEGRADED]
