from datetime import timedelta

from bot.domain.models import ClusterState
from bot.domain.readiness import ReadinessState, ReadinessWatch, ServedSpan
from bot.domain.watch import NoticeKind
from bot.slack.blocks.format import when
from bot.slack.blocks.readiness import not_serving_dm, serving_line, serving_notice
from bot.slack.ids import Action, ReadinessRef
from tests.slack.blocks import *


def _asked(**facts):
    base = {"waited_seconds": 2700, "waiting_charges": 1, "waiting_cents": 6253,
            "log_lines": ("loading shards 42%", "RuntimeError: CUDA out of memory"),
            "prompt": 2}
    return make_notice(NoticeKind.NOT_SERVING, "not_serving:2", **(base | facts))


def test_not_serving_dm_shows_lines_money_and_both_buttons_bound_to_the_prompt():
    msg = not_serving_dm(_asked(), make_cluster())
    text = checked_text(msg)
    assert "45 min" in text and "*$62.53* (1 hourly charge of $62.53/h" in text
    assert "CUDA out of memory" in text
    keep = keep_beside_terminate(msg, Action.KEEP_WAITING)
    assert ReadinessRef.unpack(keep["value"]) == ReadinessRef(cluster_id="clu_9xQe1", prompt=2)


def test_not_serving_dm_with_hostile_lines_stays_escaped_and_small():
    lines = tuple(HOSTILE + "```" for _ in range(200))
    msg = not_serving_dm(_asked(log_lines=lines), make_cluster(**EXTREME_CLUSTER))
    check_message(msg)
    assert_escaped(msg)


def test_an_ended_cluster_gets_no_buttons():
    msg = not_serving_dm(_asked(), make_cluster(status=ClusterState.TERMINATED))
    assert buttons(msg) == []


def test_serving_says_how_long_and_what_it_billed():
    n = make_notice(NoticeKind.SERVING, "serving", waited_seconds=3 * 3600 + 300,
                    waiting_charges=4, waiting_cents=4 * 6253)
    text = all_text(serving_notice(n, make_cluster()))
    assert "is serving" in text and "3 h 5 min" in text
    assert "*$250.12* (4 hourly charges of $62.53/h, the first at ready)" in text


def _watch(state, **changes):
    return ReadinessWatch(cluster_id="clu_9xQe1", pattern="Application startup complete",
                          limit_minutes=45, state=ReadinessState(state), updated_at=NOW,
                          **changes)


# make_cluster(): ready 2 h 10 min before NOW, 3 charges (at ready, +1 h, +2 h).
LOST = NOW - timedelta(hours=1, minutes=30)
SERVED = (ServedSpan(began=NOW - timedelta(hours=2), ended=LOST),)


def test_a_lost_node_ends_serving_with_since_when_and_the_outage_cost():
    c = make_cluster(status=ClusterState.DEGRADED)
    line = serving_line(c, _watch("stopped", serving_at=NOW - timedelta(hours=2),
                                  served=SERVED))
    assert line is not None and "Serving since" not in line
    assert f"*Stopped serving since {when(LOST)}*: a node was lost" in line
    # The marks at ready + 1 h and + 2 h fell inside the outage: 2 × the locked rate.
    assert "The outage has cost *$125.06* so far (2 hourly charges of $62.53/h)" in line


def test_after_the_restart_it_waits_for_the_line_again():
    back = NOW - timedelta(minutes=20)
    line = serving_line(make_cluster(), _watch("watching", serving_at=NOW - timedelta(hours=2),
                                               served=SERVED, rearmed_at=back))
    assert line is not None and "Serving since" not in line
    assert f"*Not serving since {when(LOST)}*" in line
    assert f"log after the restart at {when(back)}" in line and "*$125.06* so far" in line


def test_serving_again_says_what_the_outage_cost():
    again = NOW - timedelta(minutes=5)
    line = serving_line(make_cluster(), _watch("serving", serving_at=again, served=SERVED))
    assert line is not None and f"*Serving since {when(again)}*" in line
    assert f"again: it stopped at {when(LOST)}" in line
    assert "the outage lasted 1 h 25 min and cost $125.06" in line


def test_serving_again_notice():
    back = NOW - timedelta(minutes=20)
    n = make_notice(NoticeKind.SERVING, "serving:2", waited_seconds=900, waiting_charges=2,
                    waiting_cents=2 * 6253, stopped_at=LOST, restarted_at=back)
    msg = serving_notice(n, make_cluster())
    text = checked_text(msg)
    assert "*is serving again*" in text and "15 min after the restart" in text
    assert "the outage lasted 1 h 25 min and billed *$125.06* (2 hourly charges of " \
        "$62.53/h)" in text


def test_not_serving_again_dm_counts_from_the_restart():
    msg = not_serving_dm(_asked(stopped_at=LOST, restarted_at=NOW - timedelta(minutes=45)),
                         make_cluster())
    text = all_text(msg)
    assert "has run again for 45 min since the restart" in text
    assert f"Not serving since {when(LOST)} has billed *$62.53*" in text
