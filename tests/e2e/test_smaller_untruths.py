"""Issue 16, build 11, over Slack against the simulator: Keep running after the end, a reject
reason with `<`, `#approvals` typed in `/cluster notify`, and the unpaid amount when AI Reserve
ends a cluster for payment."""

from __future__ import annotations

from datetime import timedelta

import yaml

from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, GENERAL, bot


async def test_keep_running_after_the_cluster_ended_says_it_changed_nothing(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        reminder = await h.first_reminder(cluster_id)
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        await h.advance(60)
        assert (await h.record(cluster_id)).status.value == "terminated"
        await h.click(reminder, Action.KEEP_RUNNING, user=ALICE)
        said = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "keeps running" not in said and "reminders go on" not in said, said
        assert f"`{cluster_id}` is terminated already" in said and "changed nothing" in said


async def test_a_reject_reason_with_angle_brackets_reads_as_typed_in_the_thread(tmp_path):
    async with bot(tmp_path) as h:
        await h.reject_with_reason(await h.request(), "use < 4 nodes & retry")
        top = h.progress(GENERAL)[0]
        posted = [h.text_of(m) for m in h.slack.thread(GENERAL, top.ts)[1:]
                  if "Rejected by" in h.text_of(m)]
        assert posted, "no rejection in the thread"
        for text in (*posted, h.text_of(h.cards()[-1])):
            # Escaped once for mrkdwn (Slack shows `<` and `&`), never twice (`&lt;` shown).
            assert "use &lt; 4 nodes &amp; retry" in text, text
            assert "&amp;lt;" not in text and "&amp;amp;" not in text, text


async def test_notify_takes_a_channel_typed_by_name(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.slash(f"notify {cluster_id} #approvals")
        said = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert f"<#{APPROVALS}> will get `{cluster_id}`'s notices" in said, said
        assert APPROVALS in (await h.record(cluster_id)).notify_channels
        await h.slash(f"notify {cluster_id} #nowhere")
        said = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "can't find a public channel `#nowhere`" in said, said


async def test_a_cluster_ended_for_payment_says_what_was_unpaid(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, ready = await h.unpaid_running_cluster()
        for offset in (timedelta(hours=1, seconds=5), timedelta(hours=2, seconds=5),
                       timedelta(hours=2, minutes=2)):
            h.clock.set(ready + offset)
            await h.rt.services.watching.sync_live()
            await h.rt.settle()
        wire = h.sim.engine.get_cluster(cluster_id)
        assert wire.termination_reason == "payment_grace_expired"
        unpaid = wire.billing.unpaid_cents
        assert unpaid > 0
        amount = f"${unpaid / 100:,.2f}"
        [ended] = await h.notices(cluster_id, "*AI Reserve terminated*")
        assert f"*{amount} of it unpaid*" in h.text_of(ended)
        [receipt] = await h.notices(cluster_id, "Receipt")
        assert f"*{amount} of it is unpaid*" in h.text_of(receipt)


async def test_too_many_hours_names_the_limit_it_passes(tmp_path):
    async with bot(tmp_path) as h:  # no policy limit: ten years is the most a plan covers
        await h.slash("quote h100x8 nodes=2 hours=100000")
        said = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "not a number" not in said, said
        assert "`hours=100000` is more than a plan can cover: at most 87,600 hours" in said
    limited = yaml.safe_dump({"approvals_channel": APPROVALS, "approvers": {"users": [BOB]},
                              "limits": {"max_lifetime_hours": 72}})
    (tmp_path / "limited").mkdir()
    async with bot(tmp_path / "limited", policy=limited) as h:  # the policy's limit, lower
        await h.slash("quote h100x8 nodes=2 hours=100000")
        said = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "not a number" not in said, said
        assert "beyond the spend policy's lifetime of 72 hours" in said
        assert "plan at most `hours=72`" in said
