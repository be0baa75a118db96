"""Where else a shape can run, from the catalog (`GET /v1/accelerators`): pure.

`stocked_locations` lists the locations other than the quoted one that list stock for the
accelerator, best first. `nearest` finds, for every other cluster-capable accelerator with stock
somewhere, the self-serve shape (2–8 nodes of 1–8 GPUs) that holds at least the same GPU memory
(per GPU × GPUs per node × nodes) with the least to spare, then the cheapest; the closest fits
first. A quote that mounts an existing volume is pinned to where that volume lives (`at`), so
only shapes with stock there are offered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.domain.models import Alternative, ShapeSpec
from bot.domain.policies import MAX_GPUS_PER_NODE, MAX_NODES, MIN_NODES
from bot.reserve.schemas import Accelerator

STOCKED = ("high", "medium", "low")
SHOWN = 3


def stocked_locations(entry: Accelerator, *, besides: str | None) -> tuple[tuple[str, str], ...]:
    """(location, availability) with stock, best-stocked first, `besides` left out."""
    ranked = sorted((loc for loc in entry.locations if loc.id != besides
                     and loc.availability.value in STOCKED),
                    key=lambda loc: (STOCKED.index(loc.availability.value), loc.id))
    return tuple((loc.id, loc.availability.value) for loc in ranked)


def nearest(shape: ShapeSpec, catalog: Sequence[Accelerator], *, at: str | None = None,
            shown: int = SHOWN,
            allowed: Callable[[str, int], bool] = lambda _a, _n: True,
            ) -> tuple[Alternative, ...]:
    """Up to `shown` other accelerators' shapes that fit `shape`'s GPU memory; with `at`, only
    those with stock in that location (where a mounted volume pins the cluster); only shapes
    `allowed(accelerator id, nodes)` — the spend policy's accelerators and node limit: a quote
    never offers what a request from it would be refused."""
    entry = next((a for a in catalog if a.id == shape.accelerator), None)
    if entry is None:
        return ()
    needed = entry.memory_gb * shape.total_gpus
    found: list[Alternative] = []
    for other in catalog:
        if other.id == entry.id or not other.cluster_capable or other.cluster is None \
                or other.memory_gb <= 0:
            continue
        stock = [(loc, level) for loc, level in stocked_locations(other, besides=None)
                 if at is None or loc == at]
        if not stock:
            continue
        fits = [(g * n * other.memory_gb, g * n, n, g)
                for g in range(1, min(other.max_gpus_per_node, MAX_GPUS_PER_NODE) + 1)
                for n in range(MIN_NODES, MAX_NODES + 1)
                if g * n * other.memory_gb >= needed and allowed(other.id, n)]
        if not fits:
            continue
        memory, gpus, nodes, per_node = min(fits)
        found.append(Alternative(
            accelerator=other.id, name=other.name, gpus_per_node=per_node, nodes=nodes,
            memory_gb=memory, gpu_hourly_cents=other.cluster.per_gpu_hourly_cents * gpus,
            location=stock[0][0], availability=stock[0][1]))
    found.sort(key=lambda a: (a.memory_gb, a.gpu_hourly_cents, a.accelerator))
    return tuple(found[:shown])
