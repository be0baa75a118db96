"""Volumes as first-class: `/cluster volumes`, Grow (only detached, never shrinks), Delete
from the list, and Relaunch on this volume from a terminated cluster's receipt — against the
simulator, which enforces AI Reserve's rules on its own."""

from bot.slack.blocks.volumes import FIELD_SIZE
from bot.slack.ids import Action, GrowRef
from tests.e2e.harness import ALICE, BOB, DAVE, bot
from tests.e2e.test_buttons import audit, counted, deliver, told


async def attached_volume(h):
    cluster_id = await h.running_cluster("quote h100x8 nodes=2 storage=1000")
    return cluster_id, h.sim.engine.get_cluster(cluster_id).volume.id


async def terminated(h, cluster_id):
    await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
    await h.advance(60)
    assert (await h.record(cluster_id)).status.value == "terminated"


async def orphan_listed(h, containing):
    """A volume left by its terminated cluster, and `/cluster volumes` showing it."""
    cluster_id, volume_id = await attached_volume(h)
    await terminated(h, cluster_id)
    await h.slash("volumes")
    return volume_id, h.last_ephemeral(ALICE, containing=containing)


async def test_list_shows_holder_cost_and_age_and_hides_grow_while_attached(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, volume_id = await attached_volume(h)
        h.clock.advance(2 * 3600)
        await h.slash("volumes")
        listed = h.last_ephemeral(ALICE, containing="Shared volumes")
        text = h.text_of(listed)
        assert volume_id in text and "1,000 GB" in text and cluster_id in text
        assert "/month" in text and "old" in text
        assert Action.GROW_VOLUME not in text and Action.DELETE_VOLUME not in text
        assert "Grow and Delete wait until cluster" in text

        await terminated(h, cluster_id)
        await h.slash("volumes")
        listed = h.last_ephemeral(ALICE, containing="orphaned")
        assert Action.GROW_VOLUME in h.text_of(listed)
        assert Action.DELETE_VOLUME in h.text_of(listed)


async def test_grow_refused_while_attached_allowed_detached(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, volume_id = await attached_volume(h)
        await h.slash(f"volume grow {volume_id} 2000")
        assert told(h, ALICE, f"attached to cluster `{cluster_id}`")
        assert h.sim.engine.get_volume(volume_id).size_gb == 1000

        await terminated(h, cluster_id)
        await h.slash(f"volume grow {volume_id} 2000")
        assert told(h, ALICE, "is 2,000 GB now")
        assert h.sim.engine.get_volume(volume_id).size_gb == 2000
        async with h.rt.db.transaction() as repos:
            stored = await repos.volumes.get(volume_id)
        assert stored.size_gb == 2000
        assert stored.hourly_cents == h.sim.engine.get_volume(volume_id).billing.hourly_cents
        assert len(await audit(h, "grow_volume")) == 1
        assert len(await audit(h, "grow_volume", "refused")) == 1


async def test_shrink_same_size_unknown_id_and_stranger_change_nothing(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, volume_id = await attached_volume(h)
        await terminated(h, cluster_id)
        calls = counted(h, "resize_volume")
        await h.slash(f"volume grow {volume_id} 500")
        assert told(h, ALICE, "500 GB would shrink it")
        await h.slash(f"volume grow {volume_id} 1000")
        assert told(h, ALICE, "is already 1,000 GB")
        await h.slash("volume grow vol_nope 2000")
        assert told(h, ALICE, "vol_nope")
        await h.slash(f"volume grow {volume_id} 2000", user=DAVE)
        assert told(h, DAVE, "Only the volume's owner or an approver")
        await h.slash(f"volume grow {volume_id} lots")
        assert told(h, ALICE, "whole number of GB")
        await h.slash("volume shrink vol_x 1")
        assert told(h, ALICE, "`/cluster volume` does `grow`")
        assert calls == [] and h.sim.engine.get_volume(volume_id).size_gb == 1000


async def test_grow_button_asks_the_size_and_grows_once(tmp_path):
    async with bot(tmp_path) as h:
        volume_id, listed = await orphan_listed(h, Action.GROW_VOLUME)
        await h.click(listed, Action.GROW_VOLUME, user=ALICE)
        modal = h.slack.last_view(ALICE)
        assert GrowRef.unpack(modal["private_metadata"]).size_gb == 1000

        reply = await h.submit(modal, values={FIELD_SIZE: {FIELD_SIZE: "800"}})
        assert "volumes only grow" in reply.body  # shown under the field
        assert h.sim.engine.get_volume(volume_id).size_gb == 1000

        await h.submit(modal, values={FIELD_SIZE: {FIELD_SIZE: "1500"}})
        assert h.sim.engine.get_volume(volume_id).size_gb == 1500
        assert told(h, ALICE, "is 1,500 GB now")
        # The same form submitted again (a stale copy) grows nothing more.
        await h.submit(modal, user=BOB, values={FIELD_SIZE: {FIELD_SIZE: "3000"}})
        assert told(h, BOB, f"Already grown by <@{ALICE}>")
        assert h.sim.engine.get_volume(volume_id).size_gb == 1500
        # The old list's button now shows a size that is no longer true.
        await h.click(listed, Action.GROW_VOLUME, user=ALICE)
        assert told(h, ALICE, "is 1,500 GB now, not the 1,000 GB")


async def test_stale_grow_button_on_an_attached_volume_says_why(tmp_path):
    async with bot(tmp_path) as h:
        volume_id, listed = await orphan_listed(h, Action.GROW_VOLUME)
        await h.running_cluster(f"quote h100x8 nodes=2 volume={volume_id}")
        await h.slash("volumes")  # the list is read fresh: the volume is held again
        views = len(h.slack.calls_to("views.open"))
        await h.click(listed, Action.GROW_VOLUME, user=ALICE)
        assert told(h, ALICE, "AI Reserve grows a volume only while no cluster holds it")
        assert len(h.slack.calls_to("views.open")) == views


async def test_delete_from_the_list(tmp_path):
    async with bot(tmp_path) as h:
        volume_id, listed = await orphan_listed(h, Action.DELETE_VOLUME)
        await h.click(listed, Action.DELETE_VOLUME, user=ALICE)
        assert h.sim.engine.get_volume(volume_id).status.value in ("deleting", "deleted")
        await h.slash("volumes")
        assert volume_id not in h.text_of(h.last_ephemeral(ALICE, containing="volume"))


async def test_relaunch_quotes_the_same_shape_on_the_volume(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, volume_id = await attached_volume(h)
        record = await h.record(cluster_id)
        await terminated(h, cluster_id)
        [receipt] = await h.notices(cluster_id, "Receipt")
        assert Action.RELAUNCH_ON_VOLUME in h.text_of(receipt)
        quotes = counted(h, "quote_cluster")
        await deliver(h, receipt, Action.RELAUNCH_ON_VOLUME, user=BOB)
        assert len(quotes) == 1
        card = h.last_ephemeral(BOB, containing=Action.QUOTE_REQUEST_LAUNCH)
        assert volume_id in h.text_of(card)
        # The card's Request launch asks for exactly that shape on that volume.
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=BOB)
        modal = h.slack.last_view(BOB)
        await h.submit(modal, user=BOB)
        request = (await h.requests_in_db())[-1]
        async with h.rt.db.transaction() as repos:
            quote = await repos.quotes.get(request.quote_id)
        assert quote.spec.shape == record.shape
        assert quote.spec.volume_id == volume_id and quote.location == record.location
        assert quote.requested_by == BOB
        await h.click(receipt, Action.RELAUNCH_ON_VOLUME, user=ALICE)
        assert told(h, ALICE, f"Already quoted by <@{BOB}>")
        assert f"volume={volume_id}" in h.text_of(h.slack.ephemerals(ALICE)[-1])
