"""Issue 27.9 and 27.10, over Slack against the simulator: a quote offers only what the spend
policy would let this person request — alternatives and **Quote this** keep to its accelerators
and node limit — and someone who may not request is not offered the form at all."""

from __future__ import annotations

from bot.slack.ids import Action, AlternativeRef, unpack_any
from tests.e2e.harness import bot
from tests.e2e.test_policy import policy

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
