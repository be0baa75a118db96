"""Payment trouble is said before it kills: past due → the owner and the approvals channel are
told once, with the deadline and the amount → reminded before the grace period ends → AI Reserve
terminates it and the grace termination notice follows, all on the simulator's virtual clock."""

from __future__ import annotations

from datetime import timedelta

from tests.e2e.harness import ALICE, APPROVALS, bot


async def test_past_due_notices_then_the_reminder_then_the_grace_termination(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, ready = await h.unpaid_running_cluster()  # $62.43/h

        async def at(offset):
            h.clock.set(ready + offset)
            await h.rt.services.watching.sync_live()
            await h.rt.settle()

        def said(where, text):
            return [m for m in where if text in h.text_of(m)]

        await at(timedelta(minutes=30))
        assert not said(h.slack.dms(ALICE), "unpaid")  # the first hour was paid
        await at(timedelta(hours=1, seconds=5))  # the second hour can't be charged
        billing = h.sim.engine.get_cluster(cluster_id).billing
        assert billing.payment_status.value == "past_due" and billing.grace_ends_at is not None
        grace_end = billing.grace_ends_at
        for where in (h.slack.dms(ALICE), h.slack.messages(APPROVALS)):
            [notice] = said(where, "could not charge the account")
            text = h.text_of(notice)
            assert "*$62.43 unpaid*" in text and f"<!date^{int(grace_end.timestamp())}^" in text
            assert "(in 1 h)" in text or "(in 59 min" in text
        await at(timedelta(hours=1, minutes=20))  # said once: nothing new
        assert len(said(h.slack.dms(ALICE), "unpaid")) == 1
        await at(grace_end - ready - timedelta(minutes=14))
        for where in (h.slack.dms(ALICE), h.slack.messages(APPROVALS)):
            [reminder] = said(where, "unless the account is topped up: *")
            assert "in *14 min*" in h.text_of(reminder)
        await at(grace_end - ready - timedelta(minutes=5))
        assert len(said(h.slack.dms(ALICE), "unpaid")) == 2  # one notice, one reminder
        await at(grace_end - ready + timedelta(seconds=5))
        wire = h.sim.engine.get_cluster(cluster_id)
        assert wire.termination_reason == "payment_grace_expired"
        assert await h.notices(cluster_id, "payment grace ran out")
        assert len(said(h.slack.dms(ALICE), "unpaid")) == 2  # no more payment notices


async def test_a_topped_up_account_is_not_reminded(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, ready = await h.unpaid_running_cluster()
        h.clock.set(ready + timedelta(hours=1, seconds=5))
        await h.rt.services.watching.sync_live()
        await h.rt.settle()
        grace_end = h.sim.engine.get_cluster(cluster_id).billing.grace_ends_at
        assert grace_end is not None
        await h.sim_admin("account", {"balanceCents": 10_000_000})
        h.clock.set(grace_end - timedelta(minutes=10))
        await h.rt.services.watching.sync_live()
        await h.rt.settle()
        assert h.sim.engine.get_cluster(cluster_id).billing.payment_status.value == "current"
        assert not [m for m in h.slack.dms(ALICE) if "topped up: *" in h.text_of(m)]
