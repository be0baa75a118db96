"""Issue 27.9 and 27.10, over Slack against the simulator: a quote offers only what the spend
policy would let this person request — alternatives and **Quote this** keep to its accelerators
and node limit — and someone who may not request is not offered the form at all."""

from __future__ import annotations

from bot.slack.ids import Action, AlternativeRef, unpack_any
from tests.e2e.harness import ALICE, DAVE, bot
from tests.e2e.test_policy import policy
from tests.e2e.test_spenders import guest
from tests.e2e.test_spenders import policy as spender_policy

LIMITS = {"accelerators": ["a100", "h100", "l40s"], "max_nodes": 4}


def offered(h, card) -> list[AlternativeRef]:
    return [unpack_any(e["value"]) for b in card.blocks for e in
            [*(b.get("elements") or []), *([b["accessory"]] if b.get("accessory") else [])]
            if isinstance(e, dict) and e.get("action_id") == Action.QUOTE_THIS]


async def test_alternatives_keep_to_the_policys_accelerators_and_node_limit(tmp_path):
    async with bot(tmp_path) as h:  # no policy limits: MI300X and H200 fit 2,560 GB too
        card = await h.quote("quote h100x8 nodes=4")
        assert {r.accelerator.split("-")[0] for r in offered(h, card)} & {"mi300x", "h200"}
    (tmp_path / "limited").mkdir()
    async with bot(tmp_path / "limited", policy=policy(limits=LIMITS)) as h:
        card = await h.quote("quote h100x8 nodes=4")
        refs = offered(h, card)
        assert refs, h.text_of(card)  # A100: 4 × 8 holds the same memory
        for ref in refs:
            assert ref.accelerator.split("-")[0] in LIMITS["accelerators"], ref
            assert ref.nodes <= 4, ref
        text = h.text_of(card)
        assert "MI300X" not in text and "H200" not in text, text


async def test_someone_who_may_not_request_is_refused_before_the_form(tmp_path):
    """Issue 27.10: a guest saw Request launch ("A request needs one approver"), filled in the
    form, and was refused by DM afterwards."""
    async with bot(tmp_path, policy=spender_policy()) as h:
        h.slack.users[DAVE] = guest(DAVE, ultra=True)
        await h.slash("quote h100x8 nodes=2", user=DAVE)
        card = h.last_ephemeral(DAVE, containing=Action.QUOTE_DISCARD)
        text = h.text_of(card)
        assert Action.QUOTE_REQUEST_LAUNCH not in text
        assert Action.QUOTE_WAIT_FOR_STOCK not in text
        assert "A request needs one approver" not in text
        assert "would refuse" in text and "allow_guests" in text, text
        # A card from before (he was a full member then) is refused at the press: no form.
        old = await h.quote("quote h100x8 nodes=2", user=ALICE)
        opened = len(h.slack.calls_to("views.open"))
        await h.click(old, Action.QUOTE_REQUEST_LAUNCH, user=DAVE)
        assert len(h.slack.calls_to("views.open")) == opened
        said = h.text_of(h.last_ephemeral(DAVE, containing="allow_guests"))
        assert "Guest" in said
        assert await h.requests_in_db() == []


async def test_a_form_slack_would_not_open_in_time_says_so_and_asks_again(tmp_path, caplog):
    """A busy bot past Slack's 3 s for a trigger_id (the loaded run of test_kill's PostgreSQL
    case waited for a modal that never came): the person is told what happened and to press
    again — not "something went wrong on our side" with a reference — and no error is logged.
    The press after works."""
    async with bot(tmp_path) as h:
        card = await h.quote("quote h100x8 nodes=2")
        h.slack.fail_next("views.open", error="expired_trigger_id")
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        assert h.slack.last_view(ALICE) is None
        said = h.text_of(h.last_ephemeral(ALICE, containing="3 seconds"))
        assert "press the button again" in said and "reference" not in said, said
        assert not [r for r in caplog.records if r.levelname == "ERROR"]
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        assert h.slack.last_view(ALICE) is not None
