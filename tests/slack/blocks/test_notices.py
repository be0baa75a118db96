import json
import re
from datetime import timedelta
from typing import Any

import pytest

from bot.domain.models import ClusterRecord, ClusterState, NodeState, Observation
from bot.domain.watch import NoticeKind
from bot.slack.blocks.message import Message
from bot.slack.blocks.notices import logs_message, reminder_dm, thread_notice, untracked_cluster
from bot.slack.ids import Action, unpack_any
from tests.slack.blocks import *

# RECEIPT is rendered by blocks/audit.py (it needs the request and its approvers).
THREAD_KINDS = [k for k in NoticeKind if k not in (NoticeKind.REMINDER, NoticeKind.RECEIPT,
                                                 NoticeKind.PAST_DUE, NoticeKind.GRACE_ENDING,
                                                 NoticeKind.NOT_SERVING, NoticeKind.IDLE,
                                                 NoticeKind.UNREADABLE)]
PER_HOUR = "$62.53 per hour"


def _cluster_for(kind: NoticeKind, **changes: Any) -> ClusterRecord:
    status = {
        NoticeKind.DEGRADED: ClusterState.DEGRADED,
        NoticeKind.RECOVERY_STARTED: ClusterState.DEGRADED,
        NoticeKind.NODE_RECOVERED: ClusterState.DEGRADED,
        NoticeKind.NODE_SKIPPED: ClusterState.DEGRADED,
        NoticeKind.EXHAUSTED: ClusterState.DEGRADED,
        NoticeKind.FAILED: ClusterState.FAILED,
        NoticeKind.GRACE_TERMINATED: ClusterState.TERMINATED,
        NoticeKind.TERMINATED_OUTSIDE: ClusterState.TERMINATED,
    }.get(kind, ClusterState.RUNNING)
    return make_cluster(status=status, **changes)


FULL_FACTS: dict[str, Any] = {
    "episode": 1, "down_ranks": (1, 3), "rank": 1, "attempt": 2, "attempts_max": 3,
    "manual": True, "degraded_seconds": 600, "degraded_cost_cents": 6253,
    "accrued_cents": 5 * 6253, "termination_reason": "payment_grace_expired", "hour": 5,
    "running_seconds": 5 * 3600,
}


def _checked(msg: Message) -> Message:
    check_message(msg)
    assert "ssh" not in all_text(msg).lower()
    assert_confirms_state(msg, PER_HOUR)
    for b in buttons(msg):
        assert unpack_any(b["value"]).cluster_id == "clu_9xQe1"
    return msg


def _notice(kind: NoticeKind, cluster: ClusterRecord | None = None, **facts: Any) -> Message:
    return _checked(thread_notice(make_notice(kind, **facts), cluster or _cluster_for(kind),
                                  now=NOW))


@pytest.mark.parametrize("kind", THREAD_KINDS)
@pytest.mark.parametrize("facts", [{}, FULL_FACTS], ids=["bare", "full"])
def test_every_thread_notice_validates(kind, facts):
    msg = _notice(kind, **facts)
    assert "clu_9xQe1" in msg.text
    assert ("Owner: <@U0ALICE>" in all_text(msg)) == kind.broadcast


@pytest.mark.parametrize("kind", THREAD_KINDS)
def test_every_thread_notice_with_extreme_input(kind):
    cluster = _cluster_for(kind, **EXTREME_CLUSTER)
    facts = {**FULL_FACTS, "down_ranks": tuple(range(100)), "termination_reason": HOSTILE * 20}
    msg = thread_notice(make_notice(kind, **facts), cluster, now=NOW)
    check_message(msg)
    assert_escaped(msg)
    assert_confirms_state(msg, PER_HOUR)
    for b in buttons(msg):
        assert unpack_any(b["value"]).cluster_id == EXTREME_CLUSTER["id"]


def test_reminder_is_not_a_thread_notice():
    with pytest.raises(ValueError, match="reminder_dm"):
        thread_notice(make_notice(NoticeKind.REMINDER), make_cluster(), now=NOW)


def test_degraded_names_the_down_nodes_and_the_rate_and_offers_three_ways_out_and_duty():
    msg = _notice(NoticeKind.DEGRADED, down_ranks=(1, 3), auto_recovery=False, episode=1)
    text = all_text(msg)
    assert "`clu_9xQe1` *dsv3-serve* *is degraded: nodes rank 1 and 3 down.*" in text
    assert "The whole cluster keeps billing at its locked *$62.53/h*" in text
    assert "until someone acts" in text
    assert "Automatic recovery is off" in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.RECOVER, Action.AUTORECOVER_ON,
                                                     Action.TERMINATE, Action.ACKNOWLEDGE,
                                                     Action.SNOOZE]
    ack = unpack_any(button(msg, Action.ACKNOWLEDGE)["value"])
    assert (ack.cluster_id, ack.episode, ack.snoozes) == ("clu_9xQe1", 1, 0)
    recover = button(msg, Action.RECOVER)
    assert "one attempt" in recover["text"]["text"]
    assert button(msg, Action.TERMINATE)["confirm"]["style"] == "danger"


def test_degraded_with_auto_recovery_on_has_no_auto_recovery_button():
    observed = Observation(status=ClusterState.DEGRADED, attempts_max=3, auto_recovery=True)
    cluster = _cluster_for(NoticeKind.DEGRADED, observed=observed, auto_recovery=True)
    msg = _notice(NoticeKind.DEGRADED, cluster, down_ranks=(1,), auto_recovery=True)
    text = all_text(msg)
    assert "node rank 1 down" in text
    assert "Automatic recovery is on" in text and "up to 3 attempts" in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.RECOVER, Action.TERMINATE,
                                                     Action.ACKNOWLEDGE, Action.SNOOZE]
    assert "3 attempts" in button(msg, Action.RECOVER)["confirm"]["text"]["text"]


def test_degraded_of_an_ended_cluster_has_no_buttons():
    cluster = make_cluster(status=ClusterState.TERMINATED, terminated_at=NOW)
    assert buttons(_notice(NoticeKind.DEGRADED, cluster, down_ranks=(0,))) == []


def test_degraded_of_an_unclaimed_cluster_says_so():
    cluster = _cluster_for(NoticeKind.DEGRADED, owner_id=None, adopted=True)
    assert "Owner: unclaimed" in all_text(_notice(NoticeKind.DEGRADED, cluster))


@pytest.mark.parametrize(("manual", "expected"), [
    (True, "manual: someone asked for it"),
    (False, "automatic: AI Reserve's health pass started it"),
])
def test_recovery_started_says_which_attempt_and_who(manual, expected):
    msg = _notice(NoticeKind.RECOVERY_STARTED, attempt=2, attempts_max=3, manual=manual)
    text = all_text(msg)
    assert "Recovery attempt 2 of 3 started" in text and expected in text
    assert buttons(msg) == []


def test_node_recovered_and_skipped():
    back = all_text(_notice(NoticeKind.NODE_RECOVERED, rank=1))
    assert "*Node rank 1 is back* in `clu_9xQe1` *dsv3-serve*" in back
    assert "same interconnect address" in back
    skipped = all_text(_notice(NoticeKind.NODE_SKIPPED, rank=3, attempt=1))
    assert "AI Reserve couldn't bring node rank 3" in skipped
    assert "The attempt goes on with the remaining nodes" in skipped


@pytest.mark.parametrize(("facts", "expected", "absent"), [
    ({"degraded_seconds": 600, "degraded_cost_cents": 6253, "degraded_charges": 1},
     "It was degraded for 10 min, which cost *$62.53*: AI Reserve made 1 hourly charge of "
     "$62.53/h inside it", ""),
    ({"degraded_seconds": 7500, "degraded_cost_cents": 3 * 6253, "degraded_charges": 3},
     "It was degraded for 2 h 5 min, which cost *$187.59*: AI Reserve made 3 hourly charges",
     ""),
    # A minute's episode between two hour marks: no charge fell inside it, and the notice says
    # the hour it was in was already paid in full, not "which cost $0.00".
    ({"degraded_seconds": 60, "degraded_cost_cents": 0, "degraded_charges": 0},
     "It was degraded for 1 min. No hourly charge fell inside it: the hour it was in had "
     "already been charged in full", "$0.00"),
    ({"degraded_seconds": 600}, "It was degraded for 10 min; degraded time bills the full", "cost"),
    ({}, "*is running again.* It was degraded;", "for "),
])
def test_recovered_says_what_the_episode_cost(facts, expected, absent):
    text = all_text(_notice(NoticeKind.RECOVERED, **facts))
    assert "running again" in text and expected in text
    if absent:
        assert absent not in text


def test_exhausted_still_bills_and_offers_terminate():
    msg = _notice(NoticeKind.EXHAUSTED, attempts_max=3, down_ranks=(1,))
    text = all_text(msg)
    assert "*All 3 recovery attempts are spent.* Node rank 1 is still down." in text
    assert "still bills the full *$62.53/h*" in text and "Terminate is the way out" in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.TERMINATE]


def _exhausted_cluster(**changes: Any) -> ClusterRecord:
    observed = Observation(status=ClusterState.DEGRADED, episode=1, attempts_used=3,
                           attempts_max=3, recovery_state="exhausted", skipped=(1,),
                           nodes=(NodeState(rank=0, status="running"),
                                  NodeState(rank=1, status="unhealthy")))
    return _cluster_for(NoticeKind.DEGRADED, observed=observed,
                        last_error="recovery_exhausted", **changes)


def test_degraded_seen_only_once_exhausted_offers_terminate_only():
    """A bot that was away for the whole episode sees degraded and exhausted at once: the
    degraded notice must not offer Recover or auto-recovery that AI Reserve would refuse."""
    msg = _notice(NoticeKind.DEGRADED, _exhausted_cluster(), down_ranks=(1,),
                  auto_recovery=False)
    text = all_text(msg)
    assert "Every recovery attempt of this episode is spent (3 of 3)" in text
    assert "Terminate is the way out" in text
    assert "Automatic recovery is off" not in text and "/cluster recover" not in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.TERMINATE]


def test_reminder_of_an_exhausted_cluster_says_terminate_is_the_way_out():
    msg = reminder_dm(make_notice(NoticeKind.REMINDER, hour=4, accrued_cents=4 * 6253),
                      _exhausted_cluster(), now=NOW)
    text = all_text(msg)
    assert "Every recovery attempt of this episode is spent (3 of 3)" in text
    assert "Terminate is the way out" in text


def test_failed_was_never_billed():
    cluster = _cluster_for(NoticeKind.FAILED, last_error="placement_failed")
    text = all_text(_notice(NoticeKind.FAILED, cluster))
    assert "failed while provisioning" in text and "never billed" in text
    assert "Why: placement failed" in text and "placement_failed" not in text


def test_grace_terminated_keeps_the_volume():
    msg = _notice(NoticeKind.GRACE_TERMINATED, accrued_cents=6253,
                  termination_reason="payment_grace_expired")
    text = all_text(msg)
    assert "*AI Reserve terminated* `clu_9xQe1`" in text and "payment grace ran out" in text
    assert "The shared volume `vol_3kP0` was kept and bills on its own until someone deletes" \
        in text
    assert buttons(msg) == []
    no_volume = _cluster_for(NoticeKind.GRACE_TERMINATED, volume_id=None)
    assert "volume" not in all_text(_notice(NoticeKind.GRACE_TERMINATED, no_volume))


def test_terminated_outside():
    text = all_text(_notice(NoticeKind.TERMINATED_OUTSIDE, termination_reason="user_request"))
    assert "*was terminated outside the bot* (at AI Reserve directly)" in text
    assert "Why: AI Reserve ended it: user request" in text and "user_request" not in text


# --- reminder DM ---------------------------------------------------------------------------------


def _reminder(cluster: ClusterRecord | None = None, **facts: Any) -> Message:
    facts = {"hour": 3, "running_seconds": 2 * 3600 + 600, "accrued_cents": 3 * 6253, **facts}
    return _checked(reminder_dm(make_notice(NoticeKind.REMINDER, **facts),
                                cluster or make_cluster(), now=NOW))


def test_reminder_states_runtime_accrual_and_rate():
    msg = _reminder()
    text = all_text(msg)
    assert ("`clu_9xQe1` *dsv3-serve* has run 2 h 10 min since <!date^" in text)
    assert "accrued *$187.59* so far (AI Reserve's figure) at *$62.53/h*" in text
    assert "about $1,500.72 per day. It bills until someone terminates it." in text
    assert "approvers" not in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.TERMINATE, Action.KEEP_RUNNING]
    assert button(msg, Action.TERMINATE)["style"] == "danger"
    assert "reminders go on" in text


def test_reminder_without_running_seconds_uses_ready_at():
    assert "has run 2 h 10 min" in all_text(_reminder(running_seconds=None))


def test_reminder_for_an_unclaimed_degraded_cluster():
    cluster = make_cluster(owner_id=None, adopted=True, status=ClusterState.DEGRADED)
    text = all_text(_reminder(cluster))
    assert "goes to the approvers" in text and "degraded" in text


def test_reminder_of_an_ended_cluster_has_no_buttons():
    msg = _reminder(make_cluster(status=ClusterState.TERMINATED, terminated_at=NOW))
    assert buttons(msg) == []


def test_reminder_with_extreme_input():
    cluster = make_cluster(**EXTREME_CLUSTER, owner_id=None)
    msg = reminder_dm(make_notice(NoticeKind.REMINDER, hour=10**6, running_seconds=10**9,
                                  accrued_cents=10**12), cluster, now=NOW)
    check_message(msg)
    assert_escaped(msg)
    assert_confirms_state(msg, PER_HOUR)


# --- untracked (adopted) cluster -----------------------------------------------------------------


def test_untracked_unclaimed_offers_claim_and_terminate():
    msg = _checked(untracked_cluster(make_cluster(owner_id=None, adopted=True, request_id=None),
                                     now=NOW))
    text = all_text(msg)
    assert "not launched through the bot" in text
    assert "watched and reminded to the approvers until someone claims it" in text
    assert "Running since" in text and "*$62.53/h* for the whole cluster" in text
    assert "Accrued so far: $187.59 over 3 billed hours" in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.CLAIM, Action.TERMINATE]


def test_untracked_once_claimed():
    msg = _checked(untracked_cluster(make_cluster(owner_id="U0BOB", adopted=True), now=NOW))
    assert "Claimed by <@U0BOB>" in all_text(msg)
    assert [b["action_id"] for b in buttons(msg)] == [Action.TERMINATE]


def test_untracked_once_terminated_has_no_buttons():
    cluster = make_cluster(owner_id=None, adopted=True, status=ClusterState.TERMINATED,
                           terminated_at=NOW)
    assert buttons(_checked(untracked_cluster(cluster, now=NOW))) == []


def test_untracked_with_extreme_input():
    msg = untracked_cluster(make_cluster(**EXTREME_CLUSTER, owner_id=None, adopted=True),
                            now=NOW)
    check_message(msg)
    assert_escaped(msg)
    assert_confirms_state(msg, PER_HOUR)


# --- logs ----------------------------------------------------------------------------------------


def _lines(n: int, text: str = "line") -> list[tuple[Any, str, str]]:
    return [(NOW + timedelta(seconds=i), "stdout", f"{text} {i}") for i in range(n)]


def _code(msg: Message) -> str:
    return "\n".join(d["text"]["text"] for d in block_dicts(msg)
                     if d["type"] == "section" and d["text"]["text"].startswith("```"))


def test_logs_show_the_lines_newest_last():
    msg = logs_message("clu_9xQe1", 0, _lines(3))
    check_message(msg)
    code = _code(msg)
    assert code == ("```21:31:00 stdout line 0\n21:31:01 stdout line 1\n"
                    "21:31:02 stdout line 2```")
    text = all_text(msg)
    assert "Last 3 lines of node 0" in text and "Node 0 is the primary" in text


def test_logs_empty():
    msg = logs_message("clu_9xQe1", 2, [])
    check_message(msg)
    assert "No log lines from node 2" in all_text(msg)


def test_logs_of_5000_huge_hostile_lines_keep_the_newest_and_fit():
    lines = [(NOW + timedelta(seconds=i), "stderr", f"{i:05d} {HOSTILE} ```" + "é" * 2000)
             for i in range(5000)]
    msg = logs_message("clu_" + "x" * 251, 1, lines)
    blocks = check_message(msg)
    assert_escaped(msg)
    assert len(blocks) <= 50
    code = _code(msg)
    assert "04999 &lt;!channel&gt;" in code
    assert "00000 " not in code
    shown = re.findall(r"\b(\d{5}) &lt;!channel&gt;", code)
    assert shown == sorted(shown) and shown[-1] == "04999"
    # The line's own ``` never closes our code block early.
    for d in block_dicts(msg):
        if d["type"] == "section" and d["text"]["text"].startswith("```"):
            assert d["text"]["text"].count("```") == 2
    assert re.search(rf"\({5000 - len(shown)} earlier not shown\)", all_text(msg))
    assert len(json.dumps(msg.as_kwargs())) < 13_000


def test_logs_flatten_control_characters_and_keep_non_ascii():
    msg = logs_message("clu_9xQe1", 0, [(NOW, "sys\ntem", "a\rb\x00c ünïcödé ✓ <@U0EVIL>")])
    check_message(msg)
    assert_escaped(msg)
    assert "a b c ünïcödé ✓ &lt;@U0EVIL&gt;" in _code(msg)
