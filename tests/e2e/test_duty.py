"""Degraded clusters get an owner on duty (issue 19, item 3): the degraded notice carries
Acknowledge and Snooze 1 h; a degraded episode nobody acts on is escalated once to the policy's
target with what it has cost so far, and once more when recovery is exhausted; acknowledged
ones are not, snoozed ones only after the snooze; a restart in between escalates nothing
twice. Time moves only on the shared virtual clock."""

import copy
from datetime import timedelta

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, GENERAL, LEADS, START, bot, fake_slack

AFTER = 90  # minutes: the first hourly charge after readyAt falls inside the episode
POLICY = f"""\
approvers: {{users: [{BOB}, {CAROL}]}}
degraded:
  escalate_to: {LEADS}
  escalate_after_minutes: {AFTER}
"""
MENTION = f"<!subteam^{LEADS}>"


def escalations(h, kind=""):
    """Escalations posted in the cluster's channel (where the user group is mentioned)."""
    return [m for m in h.slack.messages(GENERAL)
            if not m.is_reply and MENTION in h.text_of(m) and kind in h.text_of(m)]


async def audit_rows(h, action):
    async with h.rt.db.transaction() as repos:
        return [e for e in await repos.audit.list(limit=500) if e.action == action]


async def minutes(h, n, step=10):
    for _ in range(n // step):
        await h.advance(step * 60)


async def test_unacknowledged_escalates_once_with_the_money_lost_and_again_when_exhausted(
        tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id, notice = await h.degraded_cluster(recoverable=False)
        buttons = [b.action_id for b in h.slack.find_buttons(notice)]
        assert Action.ACKNOWLEDGE in buttons and Action.SNOOZE in buttons
        record = await h.record(cluster_id)
        started = record.observed.episode_started_at

        await minutes(h, AFTER - 10)
        assert escalations(h) == []  # not yet: 80 of 90 minutes
        await minutes(h, 20)
        [sent] = escalations(h)
        text = h.text_of(sent)
        rate = record.hourly_cents
        # readyAt + 1 h fell inside the episode: one charge at the locked rate, AI Reserve's.
        assert h.clock.now() - started >= timedelta(minutes=AFTER)
        assert f"${rate / 100:,.2f}" in text and "1 hourly charge" in text
        assert f"within {AFTER} minutes" in text and f"<@{ALICE}>" in text
        assert "slack.com/archives/" in text  # a link to the cluster's thread
        assert await h.notices(cluster_id, "Escalated to")

        await minutes(h, 120)  # hours more, still nobody: no second escalation
        assert len(escalations(h)) == 1
        [row] = await audit_rows(h, "escalate")
        assert row.actor_id is None and row.amount_cents == rate and "overdue" in row.detail

        for _ in range(3):  # now someone tries, until AI Reserve gives up
            await h.slash(f"recover {cluster_id}", user=ALICE)
            await h.advance(30)
        assert h.sim.engine.get_cluster(cluster_id).recovery.state.value == "exhausted"
        await h.advance(30)
        assert len(escalations(h)) == 2
        assert "every recovery attempt is spent" in h.text_of(escalations(h)[-1])
        await minutes(h, 60)
        assert len(escalations(h)) == 2
        assert len(await audit_rows(h, "escalate")) == 2


async def test_acknowledged_is_not_escalated_and_the_notice_says_who(tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id, notice = await h.degraded_cluster()
        old_copy = copy.deepcopy(notice)  # as another person's screen still shows it
        await h.click(notice, Action.ACKNOWLEDGE, user=DAVE)  # on-call: neither owner nor approver
        assert "Acknowledged: you are on" in h.text_of(h.slack.ephemerals(DAVE)[-1])
        edited = h.slack.message(notice.channel, notice.ts)
        assert f"Acknowledged by <@{DAVE}>" in h.text_of(edited)
        assert Action.ACKNOWLEDGE not in [b.action_id for b in h.slack.find_buttons(edited)]
        assert await h.notices(cluster_id, "acknowledged the degraded episode")

        await h.click(old_copy, Action.ACKNOWLEDGE, user=CAROL)
        assert f"Already acknowledged by <@{DAVE}>" in h.text_of(h.slack.ephemerals(CAROL)[-1])

        await minutes(h, AFTER + 60)
        assert escalations(h) == []
        rows = await audit_rows(h, "acknowledge")
        assert [(r.actor_id, r.outcome) for r in rows] == [(CAROL, "refused"), (DAVE, "ok")]


async def test_snooze_delays_the_escalation_by_an_hour(tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id, notice = await h.degraded_cluster()
        await minutes(h, AFTER - 10)
        old_copy = copy.deepcopy(notice)
        await h.click(notice, Action.SNOOZE, user=DAVE)  # not the owner nor an approver
        assert "Only the owner" in h.text_of(h.slack.ephemerals(DAVE)[-1])
        await h.click(notice, Action.SNOOZE, user=ALICE)
        assert "Snoozed for an hour" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        edited = h.slack.message(notice.channel, notice.ts)
        assert f"Snoozed by <@{ALICE}>" in h.text_of(edited)
        assert await h.notices(cluster_id, "snoozed")
        await h.click(old_copy, Action.SNOOZE, user=BOB)  # the same showing: once
        assert f"Already snoozed by <@{ALICE}>" in h.text_of(h.slack.ephemerals(BOB)[-1])

        await minutes(h, 50)  # past escalate_after, inside the snooze
        assert escalations(h) == []
        await minutes(h, 20)  # the snooze is over
        assert len(escalations(h)) == 1


async def test_recovered_in_time_is_not_escalated(tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id, notice = await h.degraded_cluster()
        await h.click(notice, Action.RECOVER, user=ALICE)
        await minutes(h, 30, step=5)
        assert (await h.record(cluster_id)).status.value == "running"
        await minutes(h, AFTER + 30)
        assert escalations(h) == []
        # The notice's Acknowledge, pressed after the episode ended: nothing to be on.
        await h.click(notice, Action.ACKNOWLEDGE, user=BOB)
        assert "earlier degraded episode" in h.text_of(h.slack.ephemerals(BOB)[-1])
        async with h.rt.db.transaction() as repos:
            assert await repos.duties.get(cluster_id, 1) is None  # nothing was recorded


async def test_a_second_episode_escalates_again_once(tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id, notice = await h.degraded_cluster()
        await minutes(h, AFTER + 10)
        assert len(escalations(h)) == 1
        await h.click(notice, Action.RECOVER, user=ALICE)
        await minutes(h, 30, step=5)
        assert (await h.record(cluster_id)).status.value == "running"
        await h.fail_node(cluster_id)  # episode 2: nobody on it either
        await minutes(h, AFTER + 60)
        assert len(escalations(h)) == 2
        async with h.rt.db.transaction() as repos:
            assert (await repos.duties.get(cluster_id, 2)).escalated_at is not None


async def test_a_restart_between_escalations_does_not_escalate_twice(tmp_path):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, policy=POLICY) as first:
            cluster_id, _ = await first.degraded_cluster()
            await minutes(first, AFTER + 10)
            assert len(escalations(first)) == 1
        async with bot(tmp_path, slack=slack, sim=sim, policy=POLICY) as second:
            await minutes(second, 60)
            assert len(escalations(second)) == 1
            assert (await second.record(cluster_id)).status.value == "degraded"
            assert len(await audit_rows(second, "escalate")) == 1


async def test_without_a_target_nobody_is_escalated(tmp_path):
    async with bot(tmp_path) as h:
        await h.degraded_cluster()
        await minutes(h, 180)
        assert [m for m in h.slack.all_messages() if "Escalated" in h.text_of(m)] == []
