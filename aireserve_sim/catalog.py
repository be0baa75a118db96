"""The simulator's price catalog (contract §9): accelerators, locations, storage prices, rounding.

These are plausible defaults, not AI Reserve's real price list (contract §12, A11). Prices are
the same in every location; only availability differs (see `config.default_availability`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.reserve.schemas import (
    BillingIncrement,
    Breakdown,
    GpuLine,
    Rate,
    RootDiskLine,
    SharedVolumeLine,
)

HOURS_PER_MONTH = 730
"""Storage prices are per GB-month; 730 h/month converts them to an hourly rate (§2.2)."""

SHARED_VOLUME_CENTS_PER_GB_MONTH = 7
ROOT_DISK_CENTS_PER_GB_MONTH = 10

SELF_SERVE_MIN_NODES = 2
SELF_SERVE_MAX_NODES = 8
SELF_SERVE_MAX_GPUS_PER_NODE = 8
ROOT_DISK_MIN_GB, ROOT_DISK_MAX_GB, ROOT_DISK_DEFAULT_GB = 20, 2000, 100
VOLUME_MIN_GB, VOLUME_MAX_GB = 10, 4096
MOUNT_PATH = "/workspace"


@dataclass(frozen=True)
class AcceleratorSpec:
    """One catalog entry; `cluster_cents` is the per-GPU-hour cluster rate (None: not sold)."""

    id: str
    name: str
    vendor: str
    memory_gb: int
    max_gpus_per_node: int
    cluster_cents: int | None
    single_machine_cents: int | None

    @property
    def cluster_capable(self) -> bool:
        return self.cluster_cents is not None


@dataclass(frozen=True)
class LocationSpec:
    """A location id and its display name."""

    id: str
    name: str


ACCELERATORS: tuple[AcceleratorSpec, ...] = (
    AcceleratorSpec("h100-sxm-80gb", "NVIDIA H100 80GB SXM", "nvidia", 80, 8, 390, 349),
    AcceleratorSpec("h200-sxm-141gb", "NVIDIA H200 141GB SXM", "nvidia", 141, 8, 429, 459),
    AcceleratorSpec("b200-sxm-180gb", "NVIDIA B200 (180 GB usable)", "nvidia", 180, 8, 669, 679),
    AcceleratorSpec("a100-sxm-80gb", "NVIDIA A100 80GB SXM", "nvidia", 80, 8, 230, 179),
    AcceleratorSpec("l40s-48gb", "NVIDIA L40S 48GB (PCIe)", "nvidia", 48, 8, 150, None),
    AcceleratorSpec("mi300x-192gb", "AMD Instinct MI300X 192GB", "amd", 192, 8, 345, 249),
)

LOCATIONS: tuple[LocationSpec, ...] = (
    LocationSpec("us-tx", "Dallas, Texas, US"),
    LocationSpec("us-ga", "Atlanta, Georgia, US"),
    LocationSpec("eu-ro", "Bucharest, Romania, EU"),
    LocationSpec("ca-mtl", "Montreal, Quebec, CA"),
)


def round_half_up(numerator: int, denominator: int) -> int:
    """`numerator / denominator` rounded half-up, in exact integer arithmetic (both ≥ 0)."""
    if denominator <= 0 or numerator < 0:
        raise ValueError("round_half_up takes a non-negative numerator and a positive denominator")
    return (2 * numerator + denominator) // (2 * denominator)


def storage_hourly_cents(size_gb: int, cents_per_gb_month: int) -> int:
    """Hourly cents for `size_gb` of storage: size × price / 730, rounded half-up (§2.2)."""
    return round_half_up(size_gb * cents_per_gb_month, HOURS_PER_MONTH)


def volume_hourly_cents(size_gb: int) -> int:
    return storage_hourly_cents(size_gb, SHARED_VOLUME_CENTS_PER_GB_MONTH)


def root_disks_hourly_cents(count: int, size_gb_each: int) -> int:
    """All root disks priced as one component (rounded once, as the worked example does)."""
    return storage_hourly_cents(count * size_gb_each, ROOT_DISK_CENTS_PER_GB_MONTH)


def find_accelerator(
    accelerator_id: str, catalog: tuple[AcceleratorSpec, ...] = ACCELERATORS
) -> AcceleratorSpec | None:
    return next((a for a in catalog if a.id == accelerator_id), None)


def find_location(location_id: str) -> LocationSpec | None:
    return next((loc for loc in LOCATIONS if loc.id == location_id), None)


def price_cluster(
    accelerator: AcceleratorSpec,
    *,
    gpus_per_node: int,
    nodes: int,
    root_disk_gb: int,
    volume_size_gb: int | None,
    billing_increment: str,
) -> tuple[Rate, Breakdown]:
    """Whole-cluster hourly price: every GPU, every root disk, the shared volume (§2.2, §9).

    Each component is rounded on its own and the rate is their sum, so the breakdown always
    adds up exactly (invariant 1).
    """
    per_gpu = accelerator.cluster_cents or 0
    gpus = GpuLine(
        count=gpus_per_node * nodes,
        per_gpu_hourly_cents=per_gpu,
        hourly_cents=gpus_per_node * nodes * per_gpu,
    )
    disks = RootDiskLine(
        count=nodes,
        size_gb_each=root_disk_gb,
        cents_per_gb_month=ROOT_DISK_CENTS_PER_GB_MONTH,
        hourly_cents=root_disks_hourly_cents(nodes, root_disk_gb),
    )
    volume = None
    if volume_size_gb is not None:
        volume = SharedVolumeLine(
            size_gb=volume_size_gb,
            cents_per_gb_month=SHARED_VOLUME_CENTS_PER_GB_MONTH,
            hourly_cents=volume_hourly_cents(volume_size_gb),
        )
    breakdown = Breakdown(gpus=gpus, root_disks=disks, shared_volume=volume)
    rate = Rate(
        hourly_cents=breakdown.total_cents,
        per_gpu_hourly_cents=per_gpu,
        currency="USD",
        billing_increment=BillingIncrement(billing_increment),
    )
    return rate, breakdown
