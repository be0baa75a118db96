"""The nearest other accelerators for a shape's GPU memory, from a catalog (pure)."""

from bot.domain.models import ShapeSpec
from bot.reserve.schemas import Accelerator
from bot.services.alternatives import nearest, stocked_locations


def accel(id_, memory, cents, stock, *, cluster=True, max_gpus=8):
    return Accelerator.model_validate({
        "id": id_, "name": id_.upper(), "vendor": "x", "memoryGb": memory,
        "maxGpusPerNode": max_gpus, "clusterCapable": cluster,
        "cluster": {"perGpuHourlyCents": cents} if cluster else None,
        "locations": [{"id": loc, "availability": level} for loc, level in stock.items()]})


CATALOG = [
    accel("h100", 80, 390, {"us-tx": "none", "ca-mtl": "medium", "eu-ro": "low"}),
    accel("a100", 80, 230, {"us-tx": "high"}),
    accel("h200", 141, 429, {"us-ga": "low"}),
    accel("big", 192, 345, {"us-tx": "none"}),  # no stock anywhere: never offered
    accel("single", 80, 100, {"us-tx": "high"}, cluster=False),  # not a cluster accelerator
]


def test_nearest_fits_the_memory_closest_first_and_needs_stock():
    found = nearest(ShapeSpec(accelerator="h100", gpus_per_node=8, nodes=2), CATALOG)
    assert [(a.accelerator, a.gpus_per_node, a.nodes, a.memory_gb) for a in found] == [
        ("a100", 8, 2, 1280), ("h200", 5, 2, 1410)]
    assert found[0].gpu_hourly_cents == 230 * 16 and found[0].location == "us-tx"
    assert all(a.memory_gb >= 1280 for a in found)


def test_stock_elsewhere_is_best_first_and_leaves_the_quoted_place_out():
    assert stocked_locations(CATALOG[0], besides="ca-mtl") == (("eu-ro", "low"),)
    assert stocked_locations(CATALOG[0], besides=None) == (("ca-mtl", "medium"),
                                                          ("eu-ro", "low"))


def test_nothing_fits_beyond_the_self_serve_limits():
    huge = ShapeSpec(accelerator="big", gpus_per_node=8, nodes=8)  # 12,288 GB
    assert nearest(huge, CATALOG) == ()
    assert nearest(ShapeSpec(accelerator="unknown", gpus_per_node=1, nodes=2), CATALOG) == ()


def test_a_pinned_location_offers_only_shapes_with_stock_there():
    """A quote mounting a volume can only be placed where the volume lives (`at`)."""
    shape = ShapeSpec(accelerator="h100", gpus_per_node=8, nodes=2)
    assert nearest(shape, CATALOG, at="us-ga") == nearest(shape, CATALOG)[1:]
    assert [a.location for a in nearest(shape, CATALOG, at="us-ga")] == ["us-ga"]
    assert nearest(shape, CATALOG, at="eu-ro") == ()
