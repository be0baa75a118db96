"""Withdraw: the requester takes back a pending request — by the Withdraw button on their
request's message, by `/cluster withdraw <request>`, or by pressing Reject on their own card.
Anyone else, or a request already decided, is refused privately with who can do what."""

import asyncio
import copy
import json

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, CAROL, GENERAL, bot


def has(message, action_id):
    return action_id in json.dumps(message.blocks)


async def only_request(h):
    [request] = await h.requests_in_db()
    return request


async def audit_of(h, request_id):
    async with h.rt.db.transaction() as repos:
        return list(reversed(await repos.audit.list(subject_id=request_id)))


async def test_withdraw_button_on_the_requesters_message(tmp_path):
    async with bot(tmp_path) as h:
        card = copy.deepcopy(await h.request())
        progress = h.progress(GENERAL)[-1]
        assert has(progress, Action.WITHDRAW) and not has(card, Action.WITHDRAW)
        await h.click(progress, Action.WITHDRAW, user=ALICE)
        request = await only_request(h)
        assert request.status is RequestStatus.WITHDRAWN and request.decided_by == ALICE
        assert "Withdrawn" in h.text_of(h.last_ephemeral(ALICE, containing="Withdrawn"))
        shown = h.cards()[-1]
        assert "Withdrawn by <@U0ALICE>" in h.text_of(shown) and not has(shown, Action.APPROVE)
        assert "Withdrawn by <@U0ALICE>" in h.text_of(h.progress(GENERAL)[-1])
        assert not has(h.progress(GENERAL)[-1], Action.WITHDRAW)
        [row] = [e for e in await audit_of(h, request.id) if e.action == "withdraw"]
        assert (row.actor_id, row.outcome, row.amount_cents) == (ALICE, "ok",
                                                                 request.hourly_cents)
        # The old card's Approve can no longer launch anything.
        await h.click(card, Action.APPROVE, user=BOB)
        assert "Already withdrawn by <@U0ALICE>" in h.text_of(
            h.last_ephemeral(BOB, containing="withdrawn"))
        assert h.sim.engine.list_clusters() == []
        async with h.rt.db.transaction() as repos:
            assert await repos.requests.list_pending() == []  # off every approver's Home


async def test_reject_pressed_by_the_requester_withdraws(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request(user=BOB)  # Bob approves, but this one is his own
        await h.click(card, Action.REJECT, user=BOB)
        assert not any("own launch request" in h.text_of(m) for m in h.slack.ephemerals(BOB))
        request = await only_request(h)
        assert request.status is RequestStatus.WITHDRAWN and request.decided_by == BOB
        assert "Withdrawn by <@U0BOB>" in h.text_of(h.cards()[-1])
        actions = [(e.action, e.outcome) for e in await audit_of(h, request.id)]
        assert actions == [("request", "ok"), ("withdraw", "ok")]  # not also a "reject"


async def test_slash_withdraw_and_its_bad_input(tmp_path):
    async with bot(tmp_path) as h:
        await h.request()
        request = await only_request(h)
        await h.slash("withdraw lr_nope")
        assert "I don't know a launch request `lr_nope`" in h.text_of(
            h.last_ephemeral(ALICE, containing="lr_nope"))
        await h.slash("withdraw")
        assert "needs the id of your launch request" in h.text_of(
            h.last_ephemeral(ALICE, containing="needs the id"))
        await h.slash(f"withdraw {request.id}", user=CAROL)  # an approver, not the requester
        said = h.text_of(h.last_ephemeral(CAROL, containing="Only the requester"))
        assert "<@U0ALICE>" in said and "an approver can reject it" in said
        assert (await only_request(h)).status is RequestStatus.PENDING
        await h.slash(f"withdraw {request.id}")
        assert (await only_request(h)).status is RequestStatus.WITHDRAWN
        await h.slash(f"withdraw {request.id}")  # again: nothing more happens
        assert "Already withdrawn" in h.text_of(
            h.last_ephemeral(ALICE, containing="Already withdrawn"))
        withdraws = [e for e in await audit_of(h, request.id) if e.action == "withdraw"]
        assert [(e.actor_id, e.outcome) for e in withdraws] == [
            (CAROL, "refused"), (ALICE, "ok"), (ALICE, "refused")]


async def test_an_approved_and_launched_request_cannot_be_withdrawn(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request()
        await h.click(card, Action.APPROVE, user=BOB)
        request = await only_request(h)
        assert request.status is RequestStatus.LAUNCHED
        await h.slash(f"withdraw {request.id}")
        said = h.text_of(h.last_ephemeral(ALICE, containing="can no longer be withdrawn"))
        assert "Already approved by <@U0BOB>" in said
        assert f"/cluster terminate {request.cluster_id}" in said
        assert (await only_request(h)).status is RequestStatus.LAUNCHED
        assert len(h.sim.engine.list_clusters()) == 1


async def test_withdraw_and_approve_at_the_same_instant_decide_once(tmp_path, database_url):
    # Each request gets Bob's Approve and Alice's Withdraw at once, several times over: the
    # compare-and-set on `pending` lets exactly one of them decide, and a withdrawn request
    # never launches (on PostgreSQL the presses really run at once).
    async with bot(tmp_path, database_url=database_url) as h:
        cards = [copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=2"))
                 for _ in range(4)]
        progress = {m.ts: m for m in h.progress(GENERAL)}.values()
        withdraws = [m for m in progress if has(m, Action.WITHDRAW)]
        assert len(withdraws) == 4
        await asyncio.gather(*(
            [h.requests.click(card, Action.APPROVE, user_id=BOB) for card in cards] * 2
            + [h.requests.click(m, Action.WITHDRAW, user_id=ALICE) for m in withdraws] * 2))
        await h.rt.settle()
        requests = await h.requests_in_db()
        launched = [r for r in requests if r.status is RequestStatus.LAUNCHED]
        withdrawn = [r for r in requests if r.status is RequestStatus.WITHDRAWN]
        assert len(launched) + len(withdrawn) == 4
        assert len(h.sim.engine.list_clusters()) == len(launched)
        for r in requests:
            decided = [e for e in await audit_of(h, r.id)
                       if e.action in ("approve", "withdraw") and e.outcome == "ok"]
            assert [e.action for e in decided] == (
                ["approve"] if r.status is RequestStatus.LAUNCHED else ["withdraw"])
