"""The idle DM, the warning and the cluster message's line (bot/slack/blocks/idle.py)."""

from datetime import timedelta

from bot.domain.idle import IdleState
from bot.domain.models import ClusterState, IdleRule
from bot.domain.readiness import ReadinessState, ReadinessWatch
from bot.domain.watch import NoticeKind
from bot.slack.blocks.idle import idle_dm, idle_warning
from bot.slack.blocks.readiness import serving_line
from bot.slack.ids import Action, IdleRef
from tests.slack.blocks import *


def _idle(kind=NoticeKind.IDLE, **facts):
    base = {"waited_seconds": 4200, "waiting_charges": 1, "waiting_cents": 6253,
            "log_lines": ("step 5000/5000 loss=0.91", "Training completed"), "prompt": 2,
            "idle_since": NOW - timedelta(minutes=70), "idle_reason": "done",
            "idle_line": "Training completed", "keep_hours": 3,
            "terminate_at": NOW + timedelta(minutes=30)}
    return make_notice(kind, "idle:2", **(base | facts))


def test_idle_dm_shows_lines_money_and_both_buttons_bound_to_the_episode():
    msg = idle_dm(_idle(), make_cluster())
    text = checked_text(msg)
    assert "looks idle since" in text and "Training completed" in text
    assert "*$62.53* (1 hourly charge of $62.53/h)" in text
    assert "each further hour costs *$62.53*" in text
    assert "terminates it at" in text
    keep = keep_beside_terminate(msg, Action.KEEP_IDLE)
    assert keep["text"]["text"] == "Keep for 3 h"
    assert IdleRef.unpack(keep["value"]) == IdleRef(cluster_id="clu_9xQe1", episode=2, hours=3)


def test_idle_dm_with_hostile_lines_stays_escaped_and_small():
    lines = tuple(HOSTILE + "```" for _ in range(200))
    msg = idle_dm(_idle(log_lines=lines, idle_line=HOSTILE), make_cluster(**EXTREME_CLUSTER))
    check_message(msg)
    assert_escaped(msg)


def test_an_ended_cluster_gets_no_buttons_and_the_warning_keeps():
    assert buttons(idle_dm(_idle(), make_cluster(status=ClusterState.TERMINATED))) == []
    warning = idle_warning(_idle(NoticeKind.IDLE_WARNING), make_cluster())
    check_message(warning)
    assert "will be terminated at" in all_text(warning)
    [keep] = buttons(warning)
    assert keep["action_id"] == Action.KEEP_IDLE


def test_the_cluster_message_says_idle_since():
    c = make_cluster()
    w = ReadinessWatch(cluster_id=c.id, pattern=None, limit_minutes=45,
                       state=ReadinessState.NONE, idle=IdleRule(quiet_minutes=30),
                       idle_state=IdleState.ACTIVE, updated_at=NOW)
    assert serving_line(c, w) is None  # active, not idle: nothing to say
    idle = w.model_copy(update={"idle_state": IdleState.IDLE,
                                "idle_since": NOW - timedelta(minutes=40),
                                "idle_terminate_at": NOW + timedelta(minutes=20)})
    line = serving_line(c, idle)
    assert line is not None and "Idle since" in line and "unless kept" in line
    kept = idle.model_copy(update={"idle_state": IdleState.ACTIVE,
                                   "kept_until": NOW + timedelta(hours=2)})
    assert "kept until" in (serving_line(c, kept) or "")
