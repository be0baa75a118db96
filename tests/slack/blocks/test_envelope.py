from datetime import timedelta
from typing import Any

import pytest

from bot.domain.models import ClusterRecord, ClusterState
from bot.slack.blocks.envelope import (
    envelope_due,
    envelope_extended,
    envelope_final_warning,
    envelope_warning,
)
from bot.slack.blocks.message import Message
from bot.slack.ids import Action, ClusterRef, EnvelopeRef, unpack_any
from tests.slack.blocks import *

# 72 approved hours, ready 57 h 36 min ago: 80 % used, 14 h 24 min left.
READY = NOW - timedelta(hours=57, minutes=36)
ENDS = READY + timedelta(hours=72)


def _cluster(**changes: Any) -> ClusterRecord:
    fields: dict[str, Any] = {"lifetime_hours": 72, "ready_at": READY, "accrued_cents": 58 * 6253,
              "accrued_hours": 58}
    fields.update(changes)
    return make_cluster(**fields)


def _clean(msg: Message) -> str:
    """The message's text, checked, and no secret in it."""
    text = checked_text(msg)
    assert SECRET not in text and SSH_KEY not in text and "ssh " not in text
    return text


def test_warning_at_80_percent():
    msg = envelope_warning(_cluster(), now=NOW, ends_at=ENDS)
    text = _clean(msg)
    assert "`clu_9xQe1` *dsv3-serve* has used *80 %* of its approved 72 hours" in text
    assert "it reaches the end of its envelope at *<!date^" in text
    assert "in 14 h 24 min" in text
    assert "(≈ $3,626.74 so far / $4,502.16 envelope at $62.53/h)" in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.TERMINATE]  # no Extend for owners
    assert EXTEND_ASKERS in text
    assert_confirms_state(msg, "$62.53 per hour")
    assert msg.text.startswith("Cluster clu_9xQe1 has used 80 % of its approved 72 hours")


def test_warning_percent_follows_the_clock_and_is_capped():
    late = envelope_warning(_cluster(), now=ENDS - timedelta(hours=7, minutes=12), ends_at=ENDS)
    assert "has used *90 %*" in all_text(late)
    over = envelope_warning(_cluster(), now=ENDS + timedelta(hours=1), ends_at=ENDS)
    assert "has used *100 %*" in all_text(over)


def test_warning_without_a_recorded_lifetime_reads_it_off_the_end():
    msg = envelope_warning(_cluster(lifetime_hours=None), now=NOW, ends_at=ENDS)
    assert "of its approved 72 hours" in all_text(msg)


@pytest.mark.parametrize("enforced", [True, False])
def test_due_offers_extend_and_terminate(enforced):
    # The prompt comes before AI Reserve charges hour 73 (at ENDS), not after it.
    terminate_at = ENDS - timedelta(minutes=4) if enforced else None
    msg = envelope_due(_cluster(), now=ENDS - timedelta(hours=2), ends_at=ENDS,
                       enforced=enforced, terminate_at=terminate_at)
    text = _clean(msg)
    assert "*has used its approved 72 hours*: AI Reserve charges hour 73 at <!date^" in text
    assert "(in 2 h)" in text
    assert "If nobody acts, it keeps billing *$62.53/h* ($1,500.72 per day)" in text
    assert "Owner: <@U0ALICE>" in text
    extend = button(msg, Action.EXTEND)
    assert EnvelopeRef.unpack(extend["value"]) == EnvelopeRef(cluster_id="clu_9xQe1",
                                                              hours=72, add=72)
    assert extend["text"]["text"] == "Extend +72 h"
    assert extend["confirm"]["title"]["text"] == "Extend by 72 hours?"
    said = extend["confirm"]["text"]["text"]
    assert said.startswith("+72 hours ≈ $4,502.16")
    assert "becomes 144 h ≈ $9,004.32" in said  # the dollars added and the new total
    assert ClusterRef.unpack(button(msg, Action.TERMINATE)["value"]).cluster_id == "clu_9xQe1"
    assert_confirms_state(msg, "$62.53 per hour")
    assert EXTEND_ASKERS in text
    if enforced:
        assert "Unless its envelope is extended, it will be terminated at <!date^" in text
        assert "(in 1 h 56 min)" in text
    else:
        assert "not terminated automatically" in text and "Unless" not in text


def test_due_extend_hours_can_be_chosen():
    msg = envelope_due(_cluster(), now=ENDS, ends_at=ENDS, enforced=False, terminate_at=None,
                       extend_hours=24)
    extend = button(msg, Action.EXTEND)
    assert extend["text"]["text"].startswith("Extend +24 h")
    assert "+24 hours ≈ $1,500.72" in extend["confirm"]["text"]["text"]


@pytest.mark.parametrize("status", [ClusterState.TERMINATING, ClusterState.TERMINATED])
def test_due_and_final_without_buttons_once_it_stops(status):
    c = _cluster(status=status)
    due = envelope_due(c, now=ENDS, ends_at=ENDS, enforced=True, terminate_at=ENDS)
    final = envelope_final_warning(c, now=ENDS, terminate_at=ENDS + timedelta(hours=1))
    for msg in (due, final):
        _clean(msg)
        assert buttons(msg) == []
        assert f"It is {status.value} now." in all_text(msg)


def test_final_warning_one_hour_before():
    msg = envelope_final_warning(_cluster(), now=ENDS + timedelta(hours=1),
                                 terminate_at=ENDS + timedelta(hours=2))
    text = _clean(msg)
    assert "*terminates in 1 h* (at <!date^" in text
    assert "before AI Reserve charges hour 73: its approved 72 hours are all paid for" in text
    assert {b["action_id"] for b in buttons(msg)} == {Action.EXTEND, Action.TERMINATE}
    assert_confirms_state(msg, "$62.53 per hour")
    assert msg.text == "Cluster clu_9xQe1 terminates in 1 h unless its envelope is extended"


# What the envelope's messages said before there was one rule: each contradicted another.
CONTRADICTIONS = ("Only an approver can extend", "an owner cannot extend", "its owner can move",
                  "needs an approver (not the owner)", "Only an approver can extend it")
EXTEND_ASKERS = "its owner or an approver"


@pytest.mark.parametrize("planned", [True, False])
def test_every_envelope_message_states_the_one_extend_rule(planned):
    c = _cluster(auto_terminate=planned)
    messages = [envelope_warning(c, now=NOW, ends_at=ENDS),
                envelope_due(c, now=ENDS, ends_at=ENDS, enforced=planned,
                             terminate_at=ENDS if planned else None),
                envelope_final_warning(c, now=ENDS, terminate_at=ENDS + timedelta(hours=1))]
    for msg in messages:
        text = all_text(msg)
        assert EXTEND_ASKERS in text, text
        assert not [bad for bad in CONTRADICTIONS if bad in text], text


def test_extended_thread_note():
    msg = envelope_extended(_cluster(lifetime_hours=96, extended_by="U0BOB"), by="U0BOB",
                            hours=24)
    text = _clean(msg)
    assert "<@U0BOB> extended the envelope of `clu_9xQe1` *dsv3-serve* by *24 hours*" in text
    assert "(≈ $1,500.72 at $62.53/h). It may now run 96 hours in all." in text
    assert buttons(msg) == []


def test_extreme_and_hostile_clusters_stay_within_limits():
    c = _cluster(**EXTREME_CLUSTER, owner_id=None, hourly_cents=99_999_999,
                 accrued_cents=10**12, lifetime_hours=10**6)
    ends = NOW + timedelta(hours=1)
    for msg in (envelope_warning(c, now=NOW, ends_at=ends),
                envelope_due(c, now=NOW, ends_at=ends, enforced=True, terminate_at=ends),
                envelope_final_warning(c, now=NOW, terminate_at=ends),
                envelope_extended(c, by="U0BOB", hours=10**6)):
        _clean(msg)
        assert_escaped(msg)
        for b in buttons(msg):
            assert unpack_any(b["value"]).cluster_id == c.id
        assert_confirms_state(msg, "$999,999.99 per hour")
    assert "Owner: unclaimed" in all_text(envelope_due(c, now=NOW, ends_at=ends, enforced=False,
                                                       terminate_at=None))


def test_final_warning_does_not_call_uncharged_hours_paid():
    """Four of the five approved marks passed with every node down: one was charged, so they
    are not "all paid for"."""
    from bot.domain.models import Observation
    ready = NOW - timedelta(hours=4, minutes=30)
    marks = tuple(ready + timedelta(hours=k) for k in range(1, 5))
    c = _cluster(lifetime_hours=5, ready_at=ready, accrued_hours=1, accrued_cents=6253,
                 status=ClusterState.DEGRADED,
                 observed=Observation(status=ClusterState.DEGRADED, skipped_marks=marks))
    text = all_text(envelope_final_warning(c, now=NOW,
                                           terminate_at=ready + timedelta(hours=5)))
    assert "all paid for" not in text
    assert "its approved 5 hours have passed, 1 of them charged" in text
