"""Issue 27.1, over Slack against the simulator: a request that waited for stock, approved by a
person, launched from a fresh quote when capacity returned — its receipt, its approval card and
its cluster message name that person, never "auto-approved by the spend policy"."""

from __future__ import annotations

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, bot
from tests.e2e.test_policy import policy
from tests.e2e.test_stock import no_stock, stock_back, sweep, wait_request

AUTO = "auto-approved by the spend policy"


async def test_a_stock_wait_approved_by_a_person_is_receipted_as_theirs(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:  # auto-approves under $10.00/h only
        no_stock(h)
        await wait_request(h)  # Bob approves
        [waiting] = await h.requests_in_db()
        assert waiting.status is RequestStatus.WAITING and waiting.hourly_cents > 1000
        stock_back(h)
        await sweep(h, 300)
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED
        assert request.quote_id != waiting.quote_id  # launched from the fresh quote
        cluster_id = request.cluster_id
        assert cluster_id is not None
        await h.advance(60)
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        await h.advance(60)
        [receipt] = await h.notices(cluster_id, "Receipt")
        said = h.text_of(receipt)
        assert AUTO not in said.lower(), said
        assert f"*Approved by*\\n<@{BOB}>" in said, said
        card = h.text_of(h.cards()[-1])
        assert AUTO not in card.lower() and f"Approved by <@{BOB}>" in card
        thread = "".join(h.text_of(m) for m in await h.notices(cluster_id))
        assert "Approved by the spend policy" not in thread


async def test_when_stock_returns_the_first_card_is_edited_not_a_second_posted(tmp_path):
    """Issue 27.12: the approval card of a stock wait says it launched, on the one card."""
    async with bot(tmp_path, policy=policy()) as h:
        no_stock(h)
        await wait_request(h)
        assert len(h.cards()) == 1
        stock_back(h)
        await sweep(h, 300)
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED
        [card] = h.cards()
        assert f"launched as `{request.cluster_id}`" in h.text_of(card), h.text_of(card)
