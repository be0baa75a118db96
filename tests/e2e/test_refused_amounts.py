"""Issue 27.7, over Slack against the simulator: a refused spend is audited with the money it
refused — a guest's launch request (the quote's rate), an extension (rate × hours), a terminate
by someone who may not (the rate it bills on) — and a refused quote's subject is what was asked
for, not a channel."""

from __future__ import annotations

from bot.slack.ids import Action
from tests.e2e.harness import ALICE, DAVE, GENERAL, bot
from tests.e2e.test_extensions import ask, audit_of, planned
from tests.e2e.test_spenders import guest, policy, press_request


async def test_a_guests_refused_request_names_the_rate_it_asked_for(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.quote("quote h100x8 nodes=2", user=DAVE)  # a full member then
        h.slack.users[DAVE] = guest(DAVE, ultra=True)
        await h.advance(6 * 60)  # what Slack said of him expires: a guest now
        assert await press_request(h, card, DAVE) == "press"
        [refused] = await audit_of(h, "request", "refused")
        async with h.rt.db.transaction() as repos:
            quote = await repos.quotes.get(refused.subject_id)
        assert quote is not None and refused.amount_cents == quote.hourly_cents


async def test_a_refused_extension_and_terminate_have_their_amounts(tmp_path):
    async with bot(tmp_path, policy=policy(requesters={"users": [ALICE]})) as h:
        cluster_id = await planned(h)
        rate = (await h.record(cluster_id)).hourly_cents
        people = h.rt.services.people
        people.policies = people.policies.model_copy(update={"default": people.policy.model_copy(
            update={"requester_ids": frozenset({DAVE})})})
        await ask(h, cluster_id, 3)
        [extend] = await audit_of(h, "extend", "refused")
        assert extend.amount_cents == rate * 3
        await h.slash(f"terminate {cluster_id}", user=DAVE)  # neither owner nor approver
        [terminate] = await audit_of(h, "terminate", "refused")
        assert terminate.actor_id == DAVE and terminate.amount_cents == rate


async def test_a_refused_quote_is_about_the_shape_asked_for_not_a_channel(tmp_path):
    async with bot(tmp_path) as h:
        await h.slash("quote h100x8 nodes=2 hours=100000")
        [refused] = await audit_of(h, "quote", "refused")
        assert refused.subject_id != GENERAL
        assert refused.subject_id == "h100x8 nodes=2"
        card = await h.quote("quote h100x8 nodes=2")
        assert Action.QUOTE_REQUEST_LAUNCH in h.text_of(card)
        [ok] = await audit_of(h, "quote", "ok")
        assert ok.subject_id.startswith("q")  # a priced quote is about its own id
