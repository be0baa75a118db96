"""Hourly accrual reminders: one per hour AI Reserve accrues, none twice, one catch-up after
downtime, none once terminated. Untracked clusters are adopted; orphaned volumes reminded."""

from datetime import timedelta

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, START, bot, fake_slack


def reminders(h, user=ALICE):
    return [m for m in h.slack.dms(user) if Action.KEEP_RUNNING in h.text_of(m)]


async def until(h, when):
    h.clock.set(when)
    await h.rt.services.watching.sync_live()
    await h.rt.settle()


async def test_a_reminder_each_accrued_hour_and_none_after_terminate(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        rate = (await h.record(cluster_id)).hourly_cents
        await until(h, ready + timedelta(minutes=59))
        assert reminders(h) == []
        await until(h, ready + timedelta(hours=1))
        [first] = reminders(h)
        text = h.text_of(first)
        assert f"${2 * rate / 100:,.2f}" in text  # AI Reserve's accrued figure: two hours
        await until(h, ready + timedelta(hours=1, minutes=30))
        assert len(reminders(h)) == 1
        await h.click(first, Action.KEEP_RUNNING, user=ALICE)
        assert "reminders go on" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.click(first, Action.TERMINATE, user=ALICE)
        await until(h, ready + timedelta(hours=2))
        await until(h, ready + timedelta(hours=3))
        assert len(reminders(h)) == 1


async def test_downtime_gives_one_catch_up_reminder_per_cluster_then_hourly(tmp_path):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim) as first:
            a = await first.running_cluster()
            b = await first.running_cluster("quote h200x8 nodes=2")
            ready = sim.engine.get_cluster(a).ready_at
            await until(first, ready + timedelta(minutes=30))
        clock.set(ready + timedelta(hours=4, minutes=10))  # the bot was down
        async with bot(tmp_path, slack=slack, sim=sim) as second:
            await second.rt.services.watching.sync_live()
            await second.rt.settle()
            assert len(reminders(second)) == 2  # one per cluster, not one per missed hour
            for cluster_id in (a, b):
                assert (await second.record(cluster_id)).last_reminded_hours == 5
            await until(second, ready + timedelta(hours=4, minutes=50))
            assert len(reminders(second)) == 2
            await until(second, ready + timedelta(hours=5, minutes=1))
            assert len(reminders(second)) == 4


async def test_untracked_cluster_is_adopted_reported_and_reminded_to_approvers(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.adopted_cluster()
        card = await h.top(cluster_id)
        assert card.channel == APPROVALS
        assert "$" in h.text_of(card) and Action.CLAIM in h.text_of(card)
        await h.rt.services.reconciling.reconcile()  # adopted once, reported once
        assert len([m for m in h.slack.messages(APPROVALS) if cluster_id in h.text_of(m)]) == 1
        await h.advance(60)
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        await until(h, ready + timedelta(hours=1))
        assert len(reminders(h, BOB)) == 1 and len(reminders(h, CAROL)) == 1
        await h.click(card, Action.CLAIM, user=ALICE)  # not an approver: refused
        assert "Only an approver can claim" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert (await h.record(cluster_id)).owner_id is None
        await h.click(card, Action.CLAIM, user=BOB)
        assert (await h.record(cluster_id)).owner_id == BOB
        await until(h, ready + timedelta(hours=2))
        assert len(reminders(h, BOB)) == 2 and len(reminders(h, CAROL)) == 1


async def test_orphaned_volume_reminded_daily_and_delete_refused_while_attached(tmp_path):
    async with bot(tmp_path) as h:
        first = await h.running_cluster("quote h100x8 nodes=2 storage=1000")
        volume_id = h.sim.engine.get_cluster(first).volume.id
        await h.rt.services.volumes.remind_due()
        record = await _volume(h, volume_id)
        assert record.owner_id == ALICE and record.status == "attached"
        await h.click(await h.top(first), Action.TERMINATE, user=ALICE)
        await h.advance(60)
        await h.rt.services.volumes.remind_due()  # orphaned now: first reminder in a day
        assert volume_reminders(h) == []
        h.clock.advance(24 * 3600)
        await h.rt.services.volumes.remind_due()
        [reminder] = volume_reminders(h)
        assert "month" in h.text_of(reminder)
        h.clock.advance(3600)
        await h.rt.services.volumes.remind_due()
        assert len(volume_reminders(h)) == 1  # daily, not on every sweep
        await h.click(reminder, Action.KEEP_VOLUME, user=ALICE)
        h.clock.advance(24 * 3600)
        await h.rt.services.volumes.remind_due()
        assert len(volume_reminders(h)) == 1  # kept: snoozed for a week

        # The volume is mounted again; the old reminder's Delete is refused with the reason.
        second = await h.running_cluster(f"quote h100x8 nodes=2 volume={volume_id}")
        await h.click(reminder, Action.DELETE_VOLUME, user=ALICE)
        assert "attached" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert h.sim.engine.get_volume(volume_id).status.value == "attached"
        await h.click(await h.top(second), Action.TERMINATE, user=ALICE)
        await h.advance(60)
        await h.click(reminder, Action.DELETE_VOLUME, user=ALICE)
        assert h.sim.engine.get_volume(volume_id).status.value in ("deleting", "deleted")


def volume_reminders(h):
    return [m for m in h.slack.dms(ALICE) if Action.DELETE_VOLUME in h.text_of(m)]


async def _volume(h, volume_id):
    async with h.rt.db.transaction() as repos:
        return await repos.volumes.get(volume_id)
