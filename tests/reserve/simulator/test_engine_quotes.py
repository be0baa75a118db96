"""Engine: the §9 catalog, quote pricing (invariant 1) and quote validation (invariant 3)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from aireserve_sim.catalog import (
    ACCELERATORS,
    HOURS_PER_MONTH,
    AcceleratorSpec,
    round_half_up,
    volume_hourly_cents,
)
from aireserve_sim.config import SimConfig
from aireserve_sim.engine import SimulatorEngine
from bot.reserve import errors as e
from bot.reserve.schemas import Availability, QuoteRequest, ShapeRequest, StorageRequest
from tests.reserve.simulator.test_engine_support import H100, START, make, quote, quote_req

# --- catalog ------------------------------------------------------------------------------


def test_catalog_lists_the_six_accelerators_of_section_9():
    engine, _ = make()
    got = {a.id: a for a in engine.list_accelerators()}
    assert [a.id for a in engine.list_accelerators()] == [
        "h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb", "a100-sxm-80gb", "l40s-48gb",
        "mi300x-192gb",
    ]
    expected = {  # id: (name, memoryGb, cluster ¢/GPU-h, single-machine ¢/GPU-h)
        "h100-sxm-80gb": ("NVIDIA H100 80GB SXM", 80, 390, 349),
        "h200-sxm-141gb": ("NVIDIA H200 141GB SXM", 141, 429, 459),
        "b200-sxm-180gb": ("NVIDIA B200 (180 GB usable)", 180, 669, 679),
        "a100-sxm-80gb": ("NVIDIA A100 80GB SXM", 80, 230, 179),
        "l40s-48gb": ("NVIDIA L40S 48GB (PCIe)", 48, 150, None),
        "mi300x-192gb": ("AMD Instinct MI300X 192GB", 192, 345, 249),
    }
    for accel_id, (name, memory, cluster_cents, single) in expected.items():
        a = got[accel_id]
        assert (a.name, a.memory_gb, a.max_gpus_per_node, a.cluster_capable) == (
            name, memory, 8, True)
        assert a.cluster is not None and a.cluster.per_gpu_hourly_cents == cluster_cents
        assert (a.single_machine.per_gpu_hourly_cents if a.single_machine else None) == single
        assert [loc.id for loc in a.locations] == ["us-tx", "us-ga", "eu-ro", "ca-mtl"]
    assert got["mi300x-192gb"].vendor == "amd" and got["h100-sxm-80gb"].vendor == "nvidia"


def test_locations_and_the_location_filter():
    engine, _ = make()
    assert [(x.id, bool(x.name)) for x in engine.list_locations()] == [
        ("us-tx", True), ("us-ga", True), ("eu-ro", True), ("ca-mtl", True)]
    for accelerator in engine.list_accelerators("eu-ro"):
        assert [loc.id for loc in accelerator.locations] == ["eu-ro"]
    with pytest.raises(e.InvalidRequest) as caught:
        engine.list_accelerators("mars-1")
    assert caught.value.field == "location"


def test_availability_comes_from_config_and_set_capacity():
    grid = dict(SimConfig().availability)
    grid[(H100, "ca-mtl")] = Availability.NONE
    engine = SimulatorEngine(SimConfig(availability=grid), make()[1])
    h100 = engine.list_accelerators("ca-mtl")[0]
    assert h100.locations[0].availability is Availability.NONE
    engine.set_capacity(accelerator=H100, location="ca-mtl", availability=Availability.HIGH)
    assert engine.list_accelerators("ca-mtl")[0].locations[0].availability is Availability.HIGH
    engine.set_capacity(accelerator=H100, location="ca-mtl")  # neither: back to config
    assert engine.list_accelerators("ca-mtl")[0].locations[0].availability is Availability.NONE


def test_round_half_up_and_storage_prices():
    assert HOURS_PER_MONTH == 730
    assert [round_half_up(n, 2) for n in (0, 1, 2, 3, 5)] == [0, 1, 1, 2, 3]
    assert round_half_up(2000, 730) == 3  # 2.74
    assert volume_hourly_cents(1000) == 10  # 9.59
    assert volume_hourly_cents(10) == 0  # 0.096
    assert volume_hourly_cents(4096) == 39  # 39.27
    with pytest.raises(ValueError):
        round_half_up(1, 0)


# --- pricing ------------------------------------------------------------------------------


def test_worked_example_2x8_h100_100gb_root_1000gb_volume_is_6253():
    engine, _ = make()
    q = quote(engine, storage_gb=1000, root_disk_gb=100)
    b = q.breakdown
    assert (b.gpus.count, b.gpus.per_gpu_hourly_cents, b.gpus.hourly_cents) == (16, 390, 6240)
    assert (b.root_disks.count, b.root_disks.size_gb_each, b.root_disks.cents_per_gb_month,
            b.root_disks.hourly_cents) == (2, 100, 10, 3)
    assert b.shared_volume is not None
    assert (b.shared_volume.size_gb, b.shared_volume.cents_per_gb_month,
            b.shared_volume.hourly_cents) == (1000, 7, 10)
    assert (b.interconnect.hourly_cents, b.interconnect.included) == (0, True)
    assert q.rate.hourly_cents == 6253
    assert (q.rate.per_gpu_hourly_cents, q.rate.currency, q.rate.billing_increment) == (
        390, "USD", "hour")
    assert q.total_gpus == 16


def test_deepseek_class_h200_gpus_alone_cost_6864():
    engine, _ = make()
    q = quote(engine, accelerator="h200-sxm-141gb")
    assert q.breakdown.gpus.hourly_cents == 6864
    assert q.breakdown.shared_volume is None


@pytest.mark.parametrize(("accelerator", "gpus", "nodes", "root", "storage"), [
    (H100, 8, 2, 100, 1000), ("h200-sxm-141gb", 8, 8, 2000, 4096), ("a100-sxm-80gb", 1, 2, 20, 10),
    ("l40s-48gb", 3, 5, 777, None), ("mi300x-192gb", 7, 3, 123, 555),
    ("b200-sxm-180gb", 4, 4, 250, 333),
])
def test_inv1_breakdown_sums_to_the_rate(accelerator, gpus, nodes, root, storage):
    engine, _ = make()
    q = quote(engine, accelerator=accelerator, gpus=gpus, nodes=nodes, root_disk_gb=root,
              storage_gb=storage)
    b = q.breakdown
    parts = [b.gpus.hourly_cents, b.root_disks.hourly_cents, b.interconnect.hourly_cents]
    parts.append(b.shared_volume.hourly_cents if b.shared_volume else 0)
    assert sum(parts) == q.rate.hourly_cents
    assert b.root_disks.hourly_cents == round_half_up(nodes * root * 10, 730)
    assert q.rate.billing_increment == "hour"


def test_second_mode_quotes_say_so():
    engine, _ = make(billing_increment="second")
    assert quote(engine).rate.billing_increment == "second"


def test_quote_defaults_expiry_and_stored_copy():
    engine, _ = make(quote_ttl_seconds=900)
    q = quote(engine)
    assert q.id.startswith("qte_") and len(q.id) > 4
    assert (q.root_disk_gb, q.orchestrator, q.storage, q.volume_id) == (100, "none", None, None)
    assert q.created_at == START and q.expires_at == START + timedelta(minutes=15)
    assert q.launched_cluster_id is None
    assert engine.get_quote(q.id) == q
    with pytest.raises(e.NotFound) as caught:
        engine.get_quote("qte_nope")
    assert caught.value.resource == "quote"


def test_ids_are_deterministic_for_a_seed():
    first = [quote(make()[0]).id for _ in range(2)]
    assert first[0] == first[1]  # same seed, same first id
    engine, _ = make()
    ids = {quote(engine).id for _ in range(50)}
    assert len(ids) == 50


# --- location choice ----------------------------------------------------------------------


def test_no_location_picks_the_best_availability_for_one_node():
    engine, _ = make()
    for loc in ("us-tx", "us-ga", "eu-ro", "ca-mtl"):
        engine.set_capacity(accelerator=H100, location=loc, availability=Availability.LOW)
    engine.set_capacity(accelerator=H100, location="eu-ro", availability=Availability.MEDIUM)
    assert quote(engine).location == "eu-ro"
    engine.set_capacity(accelerator=H100, location="ca-mtl", availability=Availability.HIGH)
    assert quote(engine).location == "ca-mtl"


def test_no_location_ties_go_to_catalog_order():
    engine, _ = make()
    for loc in ("us-tx", "us-ga", "eu-ro", "ca-mtl"):
        engine.set_capacity(accelerator=H100, location=loc, availability=Availability.MEDIUM)
    assert quote(engine).location == "us-tx"
    engine.set_capacity(accelerator=H100, location="us-tx", availability=Availability.LOW)
    assert quote(engine).location == "us-ga"


def test_quotes_may_be_issued_with_availability_none():
    engine, _ = make()
    engine.set_capacity(accelerator=H100, location="eu-ro", availability=Availability.NONE)
    q = quote(engine, location="eu-ro")
    assert q.availability is Availability.NONE and q.location == "eu-ro"


# --- validation matrix (invariant 3) --------------------------------------------------------


@pytest.mark.parametrize(("nodes", "sales"), [(1, False), (0, False), (-5, False), (9, True),
                                              (10**30, True)])
def test_inv3_nodes_out_of_range(nodes, sales):
    engine, _ = make()
    with pytest.raises(e.InvalidShape) as caught:
        quote(engine, nodes=nodes)
    err = caught.value
    assert (err.status, err.code, err.field, err.reason) == (
        400, "invalid_shape", "shape.nodes", "nodes_out_of_range")
    assert (err.minimum, err.maximum, err.sales_contact) == (2, 8, sales)
    assert "2 to 8 nodes" in err.message
    assert ("sales" in err.message) is sales


@pytest.mark.parametrize("gpus", [0, -1])
def test_inv3_gpus_per_node_below_one(gpus):
    engine, _ = make()
    with pytest.raises(e.InvalidShape) as caught:
        quote(engine, gpus=gpus)
    assert (caught.value.field, caught.value.reason) == (
        "shape.gpusPerNode", "gpus_per_node_out_of_range")
    assert (caught.value.minimum, caught.value.maximum) == (1, 8)


@pytest.mark.parametrize("gpus", [9, 10**30])
def test_inv3_gpus_per_node_above_the_accelerator_max_names_it(gpus):
    engine, _ = make()
    with pytest.raises(e.InvalidShape) as caught:
        quote(engine, gpus=gpus)
    err = caught.value
    assert (err.field, err.reason, err.maximum) == ("shape.gpusPerNode",
                                                    "exceeds_accelerator_max", 8)
    assert "at most 8 GPUs per node for NVIDIA H100 80GB SXM" in err.message


def _custom_catalog() -> tuple[AcceleratorSpec, ...]:
    return (*ACCELERATORS,
            AcceleratorSpec("x4-small", "Example X4", "nvidia", 24, 4, 99, None),
            AcceleratorSpec("solo-1", "Single-machine only", "nvidia", 24, 8, None, 50))


def test_inv3_a_smaller_accelerator_max_is_enforced():
    engine = SimulatorEngine(SimConfig(), make()[1], catalog=_custom_catalog())
    with pytest.raises(e.InvalidShape) as caught:
        engine.quote(quote_req(accelerator="x4-small", gpus=5))
    assert (caught.value.reason, caught.value.maximum) == ("exceeds_accelerator_max", 4)
    assert "at most 4 GPUs per node for Example X4" in caught.value.message
    assert engine.quote(quote_req(accelerator="x4-small", gpus=4)).rate.hourly_cents > 0


def test_inv3_unknown_and_non_cluster_accelerators():
    engine = SimulatorEngine(SimConfig(), make()[1], catalog=_custom_catalog())
    for bad in ("", "tpu-v5", "H100-SXM-80GB", "x" * 10_000):
        with pytest.raises(e.InvalidShape) as caught:
            engine.quote(quote_req(accelerator=bad))
        assert (caught.value.field, caught.value.reason) == ("shape.accelerator",
                                                             "unknown_accelerator")
        assert len(caught.value.message) < 400
    with pytest.raises(e.InvalidShape) as caught:
        engine.quote(quote_req(accelerator="solo-1"))
    assert caught.value.reason == "not_cluster_capable"
    solo = next(a for a in engine.list_accelerators() if a.id == "solo-1")
    assert (solo.cluster_capable, solo.cluster) == (False, None)


@pytest.mark.parametrize(("option", "field", "says", "size"), [
    *[("root_disk_gb", "rootDiskGb", "20 and 2000", n) for n in (19, 2001, 0, -1, 10**30)],
    *[("storage_gb", "storage.sizeGb", "", n) for n in (9, 4097, 0, -10, 10**30)],
])
def test_sizes_out_of_range(option, field, says, size):
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        quote(engine, **{option: size})
    assert (caught.value.field, caught.value.reason) == (field, "out_of_range")
    assert says in caught.value.message


def test_root_disk_edges_are_accepted():
    engine, _ = make()
    assert quote(engine, root_disk_gb=20).root_disk_gb == 20
    assert quote(engine, root_disk_gb=2000).root_disk_gb == 2000


def test_storage_and_volume_id_together_is_400():
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        engine.quote(QuoteRequest(shape=ShapeRequest(accelerator=H100, gpus_per_node=8, nodes=2),
                                  storage=StorageRequest(size_gb=100), volume_id="vol_x"))
    assert caught.value.status == 400 and caught.value.field == "volumeId"


@pytest.mark.parametrize("location", ["", "mars-1", "US-TX", " us-tx"])
def test_unknown_location_is_400(location):
    engine, _ = make()
    with pytest.raises(e.InvalidRequest) as caught:
        quote(engine, location=location)
    assert (caught.value.field, caught.value.reason) == ("location", "unknown_location")


@pytest.mark.parametrize("volume_id", ["", "vol_missing", "x" * 5000])
def test_unknown_volume_id_is_404(volume_id):
    engine, _ = make()
    with pytest.raises(e.NotFound) as caught:
        quote(engine, volume_id=volume_id)
    assert caught.value.resource == "volume"


def test_orchestrators_are_recorded():
    engine, _ = make()
    assert quote(engine, orchestrator="slurm").orchestrator == "slurm"
    assert quote(engine, orchestrator="ray").orchestrator == "ray"
