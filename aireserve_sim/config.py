"""Simulator knobs (contract §11), in snake_case.

`SimConfig()` and `SimConfig.fast()` are the test defaults (seconds-long boots, no rate
limits); `SimConfig.realistic()` is what `cluster-bot simulator` serves by default.
Knobs beyond the contract's table are marked *extra* below.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from aireserve_sim.catalog import ACCELERATORS, LOCATIONS
from bot.reserve.schemas import Availability

_H, _M, _L, _N = Availability.HIGH, Availability.MEDIUM, Availability.LOW, Availability.NONE

# Per accelerator, in catalog location order (us-tx, us-ga, eu-ro, ca-mtl). us-tx is well
# stocked for the common accelerators so a shape-only quote lands somewhere launchable; the
# rest varies so capacity failures and "no location → best availability" can be seen.
_DEFAULT_GRID: dict[str, tuple[Availability, Availability, Availability, Availability]] = {
    "h100-sxm-80gb": (_H, _M, _L, _M),
    "h200-sxm-141gb": (_H, _H, _L, _N),
    "b200-sxm-180gb": (_L, _M, _N, _N),
    "a100-sxm-80gb": (_H, _H, _M, _H),
    "l40s-48gb": (_M, _M, _H, _M),
    "mi300x-192gb": (_M, _L, _N, _L),
}


def default_availability() -> dict[tuple[str, str], Availability]:
    """The default stock signal per (accelerator id, location id)."""
    grid: dict[tuple[str, str], Availability] = {}
    for accelerator in ACCELERATORS:
        row = _DEFAULT_GRID.get(accelerator.id, (_M, _M, _M, _M))
        for location, level in zip(LOCATIONS, row, strict=True):
            grid[(accelerator.id, location.id)] = level
    return grid


class SimConfig(BaseModel):
    """Every knob of the simulator; frozen, so one engine never changes its rules mid-run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    quote_ttl_seconds: int = Field(default=900, ge=1)
    provision_seconds_per_node: int = Field(default=5, ge=0)
    health_pass_seconds: int = Field(default=60, ge=1)
    recovery_attempts_max: int = Field(default=3, ge=1)
    recovery_node_seconds: int = Field(default=3, ge=0)
    # extra: terminating -> terminated takes this long (the contract names no duration).
    terminate_seconds: int = Field(default=2, ge=0)
    # extra: deleting -> deleted takes this long (billing stops at once regardless).
    volume_delete_seconds: int = Field(default=2, ge=0)
    billing_increment: Literal["hour", "second"] = "hour"
    payment_grace_seconds: int = Field(default=3600, ge=0)
    initial_balance_cents: int = Field(default=10_000_000, ge=0)
    rate_limits: bool = False
    retention_days: int = Field(default=30, ge=0)
    availability: dict[tuple[str, str], Availability] = Field(
        default_factory=default_availability
    )

    @classmethod
    def fast(cls) -> SimConfig:
        """Test profile: nodes boot in seconds, rate limits off."""
        return cls()

    @classmethod
    def realistic(cls) -> SimConfig:
        """Demo profile: 7-minute node boots (inside the docs' 5–15 min), rate limits on."""
        return cls(
            provision_seconds_per_node=420,
            rate_limits=True,
            recovery_node_seconds=60,
            terminate_seconds=30,
            volume_delete_seconds=30,
        )
