"""Pure domain tests (no I/O) and the factories they share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.domain.models import ClusterRecord, ClusterState, ShapeSpec

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def make_cluster(id: str = "cl-1", **changes: Any) -> ClusterRecord:
    """A running cluster of Alice's at $62.53/h, ready an hour before NOW with 2 accruals."""
    fields: dict[str, Any] = {
        "id": id,
        "request_id": f"r-{id}",
        "owner_id": "U0ALICE",
        "channel_id": "C0GPU",
        "name": None,
        "shape": ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2),
        "accelerator_name": "NVIDIA H100 80GB SXM",
        "location": "us-tx",
        "hourly_cents": 6253,
        "status": ClusterState.RUNNING,
        "created_at": NOW - 2 * HOUR,
        "ready_at": NOW - HOUR,
        "accrued_hours": 2,
        "accrued_cents": 2 * 6253,
        "updated_at": NOW,
    }
    fields.update(changes)
    return ClusterRecord(**fields)
