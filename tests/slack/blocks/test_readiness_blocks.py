from bot.domain.models import ClusterState
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from bot.slack.blocks.readiness import not_serving_dm, serving_notice
from bot.slack.ids import Action, ReadinessRef
from tests.slack.blocks import (
    EXTREME_CLUSTER,
    HOSTILE,
    NOW,
    all_text,
    assert_escaped,
    buttons,
    check_message,
    make_cluster,
)


def _asked(**facts):
    base = {"waited_seconds": 2700, "waiting_charges": 1, "waiting_cents": 6253,
            "log_lines": ("loading shards 42%", "RuntimeError: CUDA out of memory"),
            "prompt": 2}
    return Notice(cluster_id="clu_9xQe1", key="not_serving:2", kind=NoticeKind.NOT_SERVING,
                  facts=NoticeFacts(**(base | facts)), created_at=NOW)


def test_not_serving_dm_shows_lines_money_and_both_buttons_bound_to_the_prompt():
    msg = not_serving_dm(_asked(), make_cluster())
    check_message(msg)
    text = all_text(msg)
    assert "45 min" in text and "*$62.53* (1 hourly charge of $62.53/h" in text
    assert "CUDA out of memory" in text
    [terminate, keep] = buttons(msg)
    assert terminate["action_id"] == Action.TERMINATE
    assert keep["action_id"] == Action.KEEP_WAITING
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
    n = Notice(cluster_id="clu_9xQe1", key="serving", kind=NoticeKind.SERVING, created_at=NOW,
               facts=NoticeFacts(waited_seconds=3 * 3600 + 300, waiting_charges=4,
                                 waiting_cents=4 * 6253))
    text = all_text(serving_notice(n, make_cluster()))
    assert "is serving" in text and "3 h 5 min" in text
    assert "*$250.12* (4 hourly charges of $62.53/h, the first at ready)" in text
