"""Issue 16, build 6: alternatives keep what the request pinned. A quote that mounts a kept
volume offers only what can be placed where that volume lives, and **Quote this** carries the
whole plan — volume, root disk, orchestrator, hours — to the new quote (against the simulator,
which refuses a volume mounted outside its location on its own)."""

from __future__ import annotations

from typing import Any

from aireserve_sim.catalog import ACCELERATORS, LOCATIONS
from bot.reserve.schemas import Availability
from bot.slack.ids import Action, QuoteRef
from tests.e2e.harness import ALICE, bot
from tests.e2e.test_volumes import attached_volume, terminated


def discard_ref(h: Any, card: Any) -> str:
    """The quote a card shows (its Discard button's reference)."""
    for block in card.blocks:
        for element in block.get("elements", []):
            if element.get("action_id") == Action.QUOTE_DISCARD:
                return QuoteRef.unpack(element["value"]).quote_id
    raise AssertionError(f"no Discard on {h.text_of(card)}")


def stock(h: Any, **where: dict[str, Availability]) -> None:
    """Only the given (accelerator → location → availability) have stock."""
    for accelerator in ACCELERATORS:
        for location in LOCATIONS:
            level = where.get(accelerator.id.split("-")[0], {}).get(location.id)
            h.sim.engine.set_capacity(accelerator=accelerator.id, location=location.id,
                                      availability=level or Availability.NONE)


async def test_a_volume_pinned_quote_offers_only_its_place_and_quote_this_keeps_the_plan(
        tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, volume_id = await attached_volume(h)
        volume_place = h.sim.engine.get_volume(volume_id).location
        elsewhere = next(loc.id for loc in LOCATIONS if loc.id != volume_place)
        await terminated(h, cluster_id)
        # H100 is out where the volume lives; A100 has stock only elsewhere; MI300X both here
        # (medium) and elsewhere (high: the best-stocked place, were the volume not pinned).
        stock(h, h100={elsewhere: Availability.HIGH},
              a100={elsewhere: Availability.HIGH},
              mi300x={volume_place: Availability.MEDIUM, elsewhere: Availability.HIGH})
        await h.slash(f"quote h100x8 nodes=2 volume={volume_id} disk=200 orchestrator=slurm "
                      "hours=5")
        card = h.last_ephemeral(ALICE, containing="No availability")
        text = h.text_of(card)
        assert elsewhere not in text, text  # no place the volume can't be mounted
        assert "lives here, so a cluster that mounts it can only be placed here" in text
        assert "A100" not in text and "MI300X" in text
        assert f"in {volume_place}, where volume {volume_id} lives" in text
        assert text.count(Action.QUOTE_THIS) == 1

        await h.click(card, Action.QUOTE_THIS, user=ALICE)
        fresh = h.last_ephemeral(ALICE, containing="MI300X")
        async with h.rt.db.transaction() as repos:
            quote = await repos.quotes.get(discard_ref(h, fresh))
        assert quote is not None
        spec = quote.spec
        assert spec.shape.accelerator == "mi300x-192gb"
        assert (spec.volume_id, quote.location) == (volume_id, volume_place)
        assert (spec.root_disk_gb, spec.orchestrator, spec.planned_hours) == (200, "slurm", 5)
        assert spec.storage_gb is None
        assert f"mounts volume `{volume_id}`" in h.text_of(fresh)
        assert "No shared volume" not in h.text_of(fresh)


async def test_quote_this_keeps_a_new_volume_and_the_disk(tmp_path):
    async with bot(tmp_path) as h:
        stock(h, h100={"us-tx": Availability.HIGH}, a100={"ca-mtl": Availability.HIGH})
        card = await h.quote("quote h100x8 nodes=2 storage=500 disk=300 orchestrator=ray "
                             "hours=3")
        await h.click(card, Action.QUOTE_THIS, user=ALICE)
        fresh = h.last_ephemeral(ALICE, containing="A100")
        async with h.rt.db.transaction() as repos:
            quote = await repos.quotes.get(discard_ref(h, fresh))
        assert quote is not None and quote.location == "ca-mtl"  # no volume: anywhere stocked
        assert (quote.spec.storage_gb, quote.spec.root_disk_gb, quote.spec.orchestrator,
                quote.spec.planned_hours) == (500, 300, "ray", 3)


async def test_relaunch_on_a_volume_then_quote_this_keeps_the_volume(tmp_path):
    """The issue's path: the receipt's **Relaunch on this volume**, then **Quote this**."""
    async with bot(tmp_path) as h:
        cluster_id, volume_id = await attached_volume(h)
        volume_place = h.sim.engine.get_volume(volume_id).location
        elsewhere = next(loc.id for loc in LOCATIONS if loc.id != volume_place)
        await terminated(h, cluster_id)
        stock(h, h100={volume_place: Availability.LOW, elsewhere: Availability.HIGH},
              a100={volume_place: Availability.LOW, elsewhere: Availability.HIGH})
        [receipt] = await h.notices(cluster_id, "Receipt")
        await h.click(receipt, Action.RELAUNCH_ON_VOLUME, user=ALICE)
        card = h.last_ephemeral(ALICE, containing=Action.QUOTE_THIS)
        assert elsewhere not in h.text_of(card)
        await h.click(card, Action.QUOTE_THIS, user=ALICE)
        fresh = h.last_ephemeral(ALICE, containing="A100")
        async with h.rt.db.transaction() as repos:
            quote = await repos.quotes.get(discard_ref(h, fresh))
        assert quote is not None and quote.spec.shape.accelerator == "a100-sxm-80gb"
        assert (quote.spec.volume_id, quote.location) == (volume_id, volume_place)
        assert "no shared volume" not in h.text_of(fresh)
