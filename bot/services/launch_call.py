"""One launch call to AI Reserve, as the saga (launching.py) makes it: its arguments from the
stored intent's body (the same on every replay), and what a refusal says to a person."""

from __future__ import annotations

from typing import Any

from bot.domain import stock
from bot.domain.launch import LaunchBody
from bot.reserve import errors as api
from bot.reserve.schemas import Shape
from bot.services.quoting import orchestrator_wire
from storage.sealing import unseal_env


def call_kwargs(body: LaunchBody) -> dict[str, Any]:
    """`launch_cluster`'s keyword arguments from the stored body (the same on every replay)."""
    s = body.shape
    return {
        "name": body.name, "image": body.image,
        "docker_start_cmd": list(body.docker_start_cmd) if body.docker_start_cmd else None,
        # The one place a sealed value is opened: the call to the provider (storage/sealing).
        "env": unseal_env(dict(body.env)) if body.env else None,
        "ports": list(body.ports) if body.ports else None,
        "ssh_keys": list(body.ssh_keys) if body.ssh_keys else None,
        "auto_recovery": body.auto_recovery,
        "shape": Shape(accelerator=s.accelerator, gpus_per_node=s.gpus_per_node, nodes=s.nodes),
        "location": body.location, "root_disk_gb": body.root_disk_gb,
        "storage_gb": body.storage_gb, "volume_id": body.volume_id,
        "orchestrator": orchestrator_wire(body.orchestrator or "none"),
    }


def refusal(exc: api.CapacityUnavailable | api.PaymentRequired) -> str:
    """What a launch AI Reserve refused for want of capacity or credit says to a person."""
    if isinstance(exc, api.CapacityUnavailable):
        placeable, where = exc.nodes_placeable, exc.location or "that location"
        return (f"AI Reserve {stock.NO_CAPACITY} in {where}"
                + (f" (only {placeable} fit right now)." if placeable is not None else ".")
                + " Nothing was launched or billed.")
    return f"AI Reserve needs the account topped up first ({exc.message})."
