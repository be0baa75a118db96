"""Budgets hold at every decision: judged when a launch is requested and again, under a lock per
budget, in the transaction that approves it — counting every request already approved or
launching — so approvals at the same instant can never commit more than the budget."""

import asyncio
import copy

import pytest

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, bot
from tests.e2e.test_policy import policy

# h100x8 nodes=2 is $62.43/h; from START (30 Nov 10:00) 14 accruals remain in the month, so each
# request holds $874.02 of the month: $3,000 fits three (2,622.06), not four (3,496.08).
SHAPE = "quote h100x8 nodes=2"
EACH = "$874.02"


@pytest.mark.slow  # a longer scenario: scheduled early (tests/conftest.py)
async def test_twenty_approvals_at_once_against_a_budget_that_fits_three(tmp_path, database_url):
    async with bot(tmp_path, policy=policy(budgets={"users": {ALICE: 3000}}),
                   database_url=database_url) as h:
        cards = [copy.deepcopy(await h.request(quote_text=SHAPE)) for _ in range(20)]
        assert all(r.status is RequestStatus.PENDING for r in await h.requests_in_db())
        replies = await asyncio.gather(*(h.requests.click(card, Action.APPROVE, user_id=BOB)
                                          for card in cards))
        await h.rt.settle()
        assert all(r.status == 200 for r in replies)
        requests = await h.requests_in_db()
        launched = [r for r in requests if r.status is RequestStatus.LAUNCHED]
        refused = [r for r in requests if r.status is RequestStatus.FAILED]
        assert (len(launched), len(refused)) == (3, 17)
        assert len(h.sim.engine.list_clusters()) == 3
        held = {r.id for r in launched}
        for r in refused:
            assert r.last_error is not None
            # The numbers: the total, the budget, what the others hold, and which they are.
            assert "of your $3,000.00 budget" in r.last_error, r.last_error
            assert f"{EACH} for this one" in r.last_error, r.last_error
            assert any(f"`{other}` {EACH}" in r.last_error for other in held) or \
                "spent or still to run on clusters" in r.last_error, r.last_error
        told = [m for m in h.slack.ephemerals(BOB) if "Not approved" in h.text_of(m)]
        assert len(told) == 17
        assert len([m for m in h.slack.dms(ALICE) if "was not launched" in h.text_of(m)]) == 17
        async with h.rt.db.transaction() as repos:
            audit = await repos.audit.list(limit=500)
        assert len([e for e in audit if e.action == "budget" and e.outcome == "refused"]) == 17


async def test_the_second_big_request_is_refused_at_approval_naming_the_first(tmp_path):
    # The case: each fits alone when requested; two approved would not.
    async with bot(tmp_path, policy=policy(budgets={"users": {ALICE: 1500}})) as h:
        first = copy.deepcopy(await h.request(quote_text=SHAPE))
        second = copy.deepcopy(await h.request(quote_text=SHAPE))
        await h.click(first, Action.APPROVE, user=BOB)
        first_id = (await h.requests_in_db())[0].id
        await h.click(second, Action.APPROVE, user=CAROL)
        [refusal] = [m for m in h.slack.ephemerals(CAROL) if "Not approved" in h.text_of(m)]
        text = h.text_of(refusal)
        assert "$1,748.04 of your $1,500.00 budget" in text
        # The first one launched already: it counts as its cluster's spend.
        assert "($874.02 spent or still to run on clusters; $874.02 for this one)" in text
        assert first_id
        assert len(h.sim.engine.list_clusters()) == 1
        # A third request is now refused when it is made: the first one is counted.
        card = await h.quote(SHAPE)
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        await h.submit(h.slack.last_view(ALICE))
        assert any("of your $1,500.00 budget" in h.text_of(m) for m in h.slack.dms(ALICE))


async def test_a_team_budget_is_shared_by_its_members_approvals(tmp_path, database_url):
    team = {"research": {"members": [ALICE, DAVE], "monthly": 1500}}
    async with bot(tmp_path, policy=policy(budgets={"teams": team}),
                   database_url=database_url) as h:
        cards = [copy.deepcopy(await h.request(user=who, quote_text=SHAPE))
                 for who in (ALICE, DAVE, ALICE, DAVE)]
        await asyncio.gather(*(h.requests.click(card, Action.APPROVE, user_id=BOB)
                               for card in cards))
        await h.rt.settle()
        statuses = [r.status for r in await h.requests_in_db()]
        assert statuses.count(RequestStatus.LAUNCHED) == 1
        assert statuses.count(RequestStatus.FAILED) == 3
        failed = [r for r in await h.requests_in_db() if r.status is RequestStatus.FAILED]
        assert all("Team research: $1,748.04 of $1,500.00" in (r.last_error or "")
                   for r in failed)
