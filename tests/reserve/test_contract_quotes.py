"""Contract suite — quoting: shapes, whole-cluster pricing, availability vs capacity.

The real client against the EmbeddedSimulator over HTTP (virtual clock). Names map to the
contract's §11 invariants (`inv<N>`) and the provider docs' rules (`docs`).
"""

from __future__ import annotations

import pytest

from bot.reserve import errors as e
from bot.reserve.schemas import Availability
from tests.reserve.conftest import H100, launch

RANK = {Availability.HIGH: 3, Availability.MEDIUM: 2, Availability.LOW: 1, Availability.NONE: 0}


async def test_docs_pricing_worked_example_is_6253(sim_client):
    quote = await sim_client.quote_cluster(H100, 8, 2, location="us-tx", root_disk_gb=100,
                                           storage_gb=1000)
    b = quote.breakdown
    assert (b.gpus.count, b.gpus.per_gpu_hourly_cents, b.gpus.hourly_cents) == (16, 390, 6240)
    assert (b.root_disks.count, b.root_disks.size_gb_each, b.root_disks.hourly_cents) == (2, 100, 3)
    assert b.shared_volume is not None
    assert (b.shared_volume.size_gb, b.shared_volume.hourly_cents) == (1000, 10)
    assert (b.interconnect.hourly_cents, b.interconnect.included) == (0, True)
    assert quote.rate.hourly_cents == 6253
    assert quote.rate.per_gpu_hourly_cents == 390
    assert (quote.rate.currency, quote.rate.billing_increment) == ("USD", "hour")
    assert quote.total_gpus == 16


@pytest.mark.parametrize(("accelerator", "gpus", "nodes", "root", "storage"), [
    (H100, 8, 2, 100, 1000), ("a100-sxm-80gb", 3, 7, 20, None), ("l40s-48gb", 1, 2, 2000, 10),
    ("h200-sxm-141gb", 5, 3, 333, 4096), ("a100-sxm-80gb", 8, 8, 777, 123),
])
async def test_inv1_breakdown_sums_to_the_rate(sim_client, accelerator, gpus, nodes, root,
                                               storage):
    quote = await sim_client.quote_cluster(accelerator, gpus, nodes, root_disk_gb=root,
                                           storage_gb=storage)
    b = quote.breakdown
    parts = [b.gpus.hourly_cents, b.root_disks.hourly_cents, b.interconnect.hourly_cents]
    parts.append(b.shared_volume.hourly_cents if b.shared_volume else 0)
    assert sum(parts) == quote.rate.hourly_cents
    assert b.gpus.count == gpus * nodes == quote.total_gpus
    assert b.root_disks.count == nodes  # the quote prices every node's root disk


async def test_docs_cluster_rate_differs_from_single_machine_rate(sim_client):
    catalog = {a.id: a for a in await sim_client.list_accelerators()}
    h100 = catalog[H100]
    assert h100.cluster is not None and h100.single_machine is not None
    assert (h100.cluster.per_gpu_hourly_cents, h100.single_machine.per_gpu_hourly_cents) == (
        390, 349)
    quote = await sim_client.quote_cluster(H100, 8, 2)
    assert quote.rate.per_gpu_hourly_cents == h100.cluster.per_gpu_hourly_cents


async def test_docs_self_serve_shapes_are_2_to_8_nodes_of_1_to_8_gpus(sim_client):
    for nodes in range(2, 9):
        for gpus in range(1, 9):
            quote = await sim_client.quote_cluster("a100-sxm-80gb", gpus, nodes)
            assert (quote.shape.nodes, quote.shape.gpus_per_node) == (nodes, gpus)
            assert quote.total_gpus == nodes * gpus
    full_width = [await sim_client.quote_cluster(H100, 8, n) for n in (2, 8)]
    assert [q.total_gpus for q in full_width] == [16, 64]


@pytest.mark.parametrize("nodes", [1, 9, 0, 100])
async def test_inv3_nodes_out_of_range_is_invalid_shape(sim_client, nodes):
    with pytest.raises(e.InvalidShape) as caught:
        await sim_client.quote_cluster(H100, 8, nodes)
    err = caught.value
    assert (err.status, err.code, err.field) == (400, "invalid_shape", "shape.nodes")
    assert err.reason == "nodes_out_of_range"
    assert (err.minimum, err.maximum) == (2, 8)


async def test_docs_larger_clusters_are_arranged_through_sales(sim_client):
    with pytest.raises(e.InvalidShape) as caught:
        await sim_client.quote_cluster(H100, 8, 9)
    assert caught.value.sales_contact is True
    assert "sales" in caught.value.message.lower()


@pytest.mark.parametrize("gpus", [0, 9, -1])
async def test_inv3_gpus_per_node_out_of_range_is_invalid_shape(sim_client, gpus):
    with pytest.raises(e.InvalidShape) as caught:
        await sim_client.quote_cluster(H100, gpus, 2)
    assert caught.value.field == "shape.gpusPerNode"
    assert caught.value.reason in {"gpus_per_node_out_of_range", "exceeds_accelerator_max"}


async def test_inv3_gpus_per_node_cannot_exceed_the_accelerator_max(sim_client):
    # Every catalog entry offers 8 GPUs per machine, so the accelerator max and the
    # self-serve ceiling coincide: at the max is fine, one more is refused.
    for accelerator in await sim_client.list_accelerators():
        top = accelerator.max_gpus_per_node
        assert top == 8
        assert (await sim_client.quote_cluster(accelerator.id, top, 2)).shape.gpus_per_node == top
        with pytest.raises(e.InvalidShape) as caught:
            await sim_client.quote_cluster(accelerator.id, top + 1, 2)
        assert caught.value.field == "shape.gpusPerNode"


async def test_docs_unknown_accelerator_is_invalid_shape(sim_client):
    with pytest.raises(e.InvalidShape) as caught:
        await sim_client.quote_cluster("tpu-v9", 8, 2)
    assert caught.value.reason == "unknown_accelerator"


async def test_docs_availability_is_a_per_node_signal_and_a_quote_may_say_none(sim_client,
                                                                               admin):
    await admin.capacity(H100, "eu-ro", availability="none")
    quote = await sim_client.quote_cluster(H100, 8, 2, location="eu-ro")
    assert quote.availability is Availability.NONE  # issued anyway; launch decides


async def test_docs_capacity_is_confirmed_only_at_launch(sim_client, admin):
    await admin.capacity(H100, "us-tx", availability="high", placeableNodes=2)
    quote = await sim_client.quote_cluster(H100, 8, 4, location="us-tx")
    assert quote.availability is Availability.HIGH  # one node is easy to find...
    with pytest.raises(e.CapacityUnavailable) as caught:  # ...four together are not
        await sim_client.launch_cluster(quote.id, idempotency_key="cap-1")
    err = caught.value
    assert (err.accelerator, err.location, err.nodes_placeable) == (H100, "us-tx", 2)
    assert await sim_client.list_clusters() == []  # no cluster is created
    await admin.capacity(H100, "us-tx", placeableNodes=8)
    cluster = await sim_client.launch_cluster(quote.id, idempotency_key="cap-2")
    assert cluster.quote_id == quote.id  # the quote stayed usable


async def test_docs_no_location_picks_the_best_availability(sim_client):
    catalog = {a.id: a for a in await sim_client.list_accelerators()}
    for accelerator_id in ("h100-sxm-80gb", "l40s-48gb", "b200-sxm-180gb"):
        quote = await sim_client.quote_cluster(accelerator_id, 8, 2)
        levels = {loc.id: RANK[loc.availability] for loc in catalog[accelerator_id].locations}
        assert levels[quote.location] == max(levels.values())


async def test_docs_quote_is_stored_and_expires_after_fifteen_minutes(sim_client):
    quote, cluster = await launch(sim_client)
    assert (quote.expires_at - quote.created_at).total_seconds() == 900
    again = await sim_client.get_quote(quote.id)
    assert again.rate == quote.rate
    assert again.launched_cluster_id == cluster.id
