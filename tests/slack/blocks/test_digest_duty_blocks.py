"""The storm digest and the duty messages fit Block Kit (validated by slack_sdk's models and
Slack's limits) at any size of storm and with hostile input, and say the figures exactly."""

from datetime import timedelta

from bot.domain.duty import Duty, Escalation
from bot.domain.models import ClusterState, MessageRef, Observation
from bot.domain.watch import NoticeKind
from bot.slack.blocks import digest as digest_blocks
from bot.slack.blocks import duty as duty_blocks
from bot.slack.blocks.notices import thread_notice
from bot.slack.ids import Action, unpack_any
from tests.slack.blocks import *

DEGRADED = Observation(status=ClusterState.DEGRADED, episode=2, attempts_max=3,
                       episode_started_at=NOW - timedelta(minutes=40))


def storm(n, **changes):
    fields = {"status": ClusterState.DEGRADED, "observed": DEGRADED, **changes}
    return [make_cluster(id=f"clu_{i:04d}", **fields) for i in range(n)]


def tops(members):
    return {c.id: MessageRef(channel_id="C0GPU", ts=f"1700000000.{i:06d}")
            for i, c in enumerate(members)}


def test_the_digest_says_the_count_the_place_and_the_burn():
    members = storm(37, hourly_cents=12_500)
    msg = digest_blocks.digest("C0GPU-1", members, tops(members))
    check_message(msg)
    assert msg.text == "37 clusters degraded in us-tx — $4,625.00/h billing degraded"
    assert [b["action_id"] for b in buttons(msg)] == [Action.RECOVER_ALL_MINE]
    ref = unpack_any(buttons(msg)[0]["value"])
    assert (ref.digest_id, ref.degraded) == ("C0GPU-1", 37)
    text = all_text(msg)
    assert text.count("https://slack.com/archives/C0GPU/p1700000000") == 37


def test_a_storm_of_250_fits_one_message_and_counts_the_rest():
    members = storm(250)
    msg = digest_blocks.digest("C0GPU-1", members, tops(members))
    text = checked_text(msg)
    shown = text.count("https://slack.com/archives/")
    assert 40 <= shown < 250 and f"…and {250 - shown} more" in text


def test_hostile_input_is_escaped_in_the_digest():
    members = [make_cluster(**{**EXTREME_CLUSTER, "id": f"{EXTREME_CLUSTER['id'][:-3]}{i:03d}"},
                            status=ClusterState.DEGRADED, observed=DEGRADED) for i in range(40)]
    msg = digest_blocks.digest("C0GPU-1", members, tops(members))
    check_message(msg)
    assert_escaped(msg)


def test_a_storm_that_ended_has_no_button():
    members = [*storm(3, status=ClusterState.RUNNING),
               make_cluster(id="clu_end", status=ClusterState.TERMINATED)]
    msg = digest_blocks.digest("C0GPU-1", members, tops(members))
    check_message(msg)
    assert msg.text.startswith("Storm over: all 4 clusters in us-tx")
    assert buttons(msg) == []


def test_the_acknowledged_notice_says_who_and_drops_the_duty_buttons():
    c = make_cluster(status=ClusterState.DEGRADED, observed=DEGRADED)
    base = thread_notice(make_notice(NoticeKind.DEGRADED, episode=2, down_ranks=(1,)), c,
                         now=NOW)
    assert [b["action_id"] for b in buttons(base)][-2:] == [Action.ACKNOWLEDGE, Action.SNOOZE]
    duty = Duty(cluster_id=c.id, episode=2, acknowledged_by="U0DAVE", acknowledged_at=NOW)
    msg = duty_blocks.degraded_notice(base, c, duty, now=NOW)
    check_message(msg)
    assert "Acknowledged by <@U0DAVE>" in all_text(msg)
    assert Action.ACKNOWLEDGE not in [b["action_id"] for b in buttons(msg)]
    assert Action.TERMINATE in [b["action_id"] for b in buttons(msg)]
    snoozed = Duty(cluster_id=c.id, episode=2, snoozed_by="U0ALICE", snoozes=1,
                   snoozed_until=NOW + timedelta(hours=1))
    msg = duty_blocks.degraded_notice(base, c, snoozed, now=NOW)
    check_message(msg)
    assert "Snoozed by <@U0ALICE>" in all_text(msg)
    assert unpack_any(buttons(msg)[-1]["value"]).snoozes == 1  # the next snooze's version


def test_the_escalation_mentions_the_group_and_says_the_money():
    c = make_cluster(status=ClusterState.DEGRADED, observed=DEGRADED)
    msg = duty_blocks.escalation(c, Escalation.OVERDUE, target="S0ONCALL", lost_cents=12_506,
                                 charges=2, after_minutes=30,
                                 thread="https://slack.com/archives/C0GPU/p1", now=NOW)
    text = checked_text(msg)
    assert "<!subteam^S0ONCALL>" in text and "*$125.06* so far" in text
    assert "2 hourly charges at $62.53/h" in text and "within 30 minutes" in text
    channel = duty_blocks.escalation(make_cluster(**EXTREME_CLUSTER), Escalation.EXHAUSTED,
                                     target="C0ONCALL", lost_cents=0, charges=0,
                                     after_minutes=30, thread=None, now=NOW)
    check_message(channel)
    assert_escaped(channel)
    assert "<#C0ONCALL>" in all_text(channel)


def test_the_owner_dm_lists_their_clusters_and_their_burn():
    theirs = storm(3, hourly_cents=10_000)
    msg = digest_blocks.owner_dm(theirs, MessageRef(channel_id="C0GPU", ts="1700000000.000001"))
    check_message(msg)
    assert msg.text == "3 clusters of yours degraded in a storm — $300.00/h"
    assert "https://slack.com/archives/C0GPU/p1700000000000001" in all_text(msg)
    hostile = [make_cluster(**EXTREME_CLUSTER, status=ClusterState.DEGRADED)] * 30
    check_message(digest_blocks.owner_dm(hostile, None))
    assert_escaped(digest_blocks.owner_dm(hostile, None))


def test_digest_rows_and_the_owner_dm_name_each_cluster_not_only_its_id():
    """Issue 27.12: the rows listed bare ids; people know their clusters by name (or shape)."""
    members = [make_cluster(id="clu_0001", name="llama-ft", status=ClusterState.DEGRADED,
                            observed=DEGRADED),
               make_cluster(id="clu_0002", name=None, status=ClusterState.DEGRADED,
                            observed=DEGRADED)]
    for msg in (digest_blocks.digest("C0GPU-1", members, tops(members)),
                digest_blocks.owner_dm(members, None)):
        text = checked_text(msg)
        assert "`clu_0001` *llama-ft*" in text, text
        assert "`clu_0002` 2 × 8 NVIDIA H100 80GB SXM" in text, text
