"""What the bot says about money and decisions, over Slack: the quote card's verdict and stock,
the single-machine rate, auto-approval in words, unknown ids named, and the audit trail."""

from bot.domain.models import RequestStatus
from bot.reserve.schemas import Availability
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, bot
from tests.e2e.test_policy import policy


async def test_quote_card_shows_the_single_machine_rate_and_the_approval_it_needs(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.quote("quote h100x8 nodes=2")
        text = h.text_of(card)
        assert "$3.90/h per GPU (the provider's cluster rate) (a single machine: $3.49/h per GPU)" \
            in text
        assert "A request needs one approver (the spend policy)." in text
        cheap = h.text_of(await h.quote("quote l40sx1 nodes=2"))
        assert "A request would be auto-approved by the spend policy (under $10.00/h)." in cheap
        assert "single machine" not in cheap  # the catalog gives no single-machine L40S rate


async def test_no_availability_says_so_and_shows_where_the_shape_has_stock(tmp_path):
    async with bot(tmp_path) as h:
        for location, level in (("us-tx", Availability.NONE), ("us-ga", Availability.NONE),
                                ("eu-ro", Availability.LOW), ("ca-mtl", Availability.MEDIUM)):
            h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location=location,
                                      availability=level)
        await h.slash("quote h100x8 nodes=2 location=us-tx")
        card = h.last_ephemeral(ALICE, containing="No availability")
        text = h.text_of(card)
        assert "*No availability in us-tx* for this shape right now" in text
        assert "The same shape has stock in: ca-mtl (medium), eu-ro (low)" in text
        assert Action.QUOTE_REQUEST_LAUNCH not in text and Action.QUOTE_DISCARD in text


async def test_auto_approval_is_said_in_words_everywhere(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        await h.request(quote_text="quote l40sx1 nodes=2")  # $3.03/h
        request = (await h.requests_in_db())[-1]
        assert request.status is RequestStatus.LAUNCHED
        card = h.text_of(h.cards()[-1])
        assert "Auto-approved by the spend policy (under $10.00/h)" in card
        everything = "\n".join(h.text_of(m) for m in h.slack.all_messages())
        assert "an approver —" not in everything and "Approved by an approver" not in everything


async def test_unknown_ids_are_named(tmp_path):
    async with bot(tmp_path) as h:
        await h.slash("quote h100x8 nodes=2 volume=vol_nope")
        assert "I don't know a volume `vol_nope`" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        everything = "\n".join(h.text_of(m) for m in h.slack.ephemerals(ALICE))
        assert "that id" not in everything


async def test_quotes_refused_terminates_and_provider_terminations_are_audited(tmp_path):
    async with bot(tmp_path) as h:
        await h.quote("quote h100x8 nodes=2")
        await h.slash("terminate clu_nope")
        cluster_id = await h.running_cluster()
        await h.slash(f"terminate {cluster_id}", user="U0DAVE")  # neither owner nor approver
        async with h.rt.db.transaction() as repos:
            entries = await repos.audit.list(subject_id=None, limit=200)
        actions = [(e.action, e.outcome) for e in entries]
        assert ("quote", "ok") in actions
        refused = [e for e in entries if e.action == "terminate" and e.outcome == "refused"]
        assert {e.subject_id for e in refused} >= {"clu_nope", cluster_id}
        await h.slash(f"audit {cluster_id}", user=BOB)
        shown = h.text_of(h.slack.ephemerals(BOB)[-1])
        assert "<@U0DAVE>" in shown and "`<@" not in shown  # people are mentions, never code
        # A refusal that names a person shows the mention, not an escaped raw string.
        assert "Only the owner (<@U0ALICE>)" in shown and "&lt;@U0ALICE&gt;" not in shown


async def test_a_payment_grace_termination_is_audited_and_said_in_words(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.sim_admin("account", {"balanceCents": 0})
        for _ in range(6):  # the next hour goes unpaid; the grace (one hour) runs out
            await h.advance(20 * 60)
        record = await h.record(cluster_id)
        assert record.termination_reason == "payment_grace_expired"
        async with h.rt.db.transaction() as repos:
            entries = await repos.audit.list(subject_id=cluster_id, limit=50)
        ended = [e for e in entries if e.action == "terminated"]
        assert len(ended) == 1 and ended[0].actor_id is None
        assert "payment grace ended" in ended[0].detail
        everything = "\n".join(h.text_of(m) for m in h.slack.all_messages())
        assert "payment_grace_expired" not in everything
        assert "the payment grace ended on an unpaid hour" in everything


async def test_spend_counts_a_kept_volume_and_stops_it_once_deleting(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster("quote h100x8 nodes=2 storage=1000")
        await h.slash(f"terminate {cluster_id}")
        await h.click(h.last_ephemeral(ALICE, containing=Action.TERMINATE), Action.TERMINATE,
                      user=ALICE)
        await h.advance(3 * 3600)  # the volume pays its own hours once the cluster stopped
        await h.rt.services.volumes.sync()
        volume = (await h.record(cluster_id)).volume_id
        assert volume is not None
        report = await h.rt.services.clusters.spend(month=None)
        assert [v.id for v, _ in report.by_volume] == [volume]
        charged = [e for e in h.sim.engine.ledger() if e.resource_id == volume]
        assert report.volumes_cents == sum(e.cents for e in charged) > 0
        before = report.projected_cents
        assert before > 0
        h.sim.engine.delete_volume(volume)  # deleting: billing stops at once
        after = await h.rt.services.clusters.spend(month=None)
        assert after.projected_cents == 0 and after.volumes_cents == report.volumes_cents
