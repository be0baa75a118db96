"""Request checks the engine runs before touching state (contract §2.2, §2.3, §7).

Every refusal is a typed 4xx error whose message names the bad part and the allowed range, and
whose `details` carries the contract's camelCase keys. Nothing here raises anything else, even
for absurd input (10**30 nodes, empty strings, control characters).
"""

from __future__ import annotations

import re
from typing import Any

from aireserve_sim.catalog import (
    SELF_SERVE_MAX_GPUS_PER_NODE,
    SELF_SERVE_MAX_NODES,
    SELF_SERVE_MIN_NODES,
    AcceleratorSpec,
    find_accelerator,
)
from bot.reserve.errors import InvalidRequest, InvalidShape, PriceChanged
from bot.reserve.schemas import LaunchRequest, Quote, ShapeRequest

RESERVED_ENV = frozenset({
    "NODE_RANK", "NUM_NODES", "GPUS_PER_NODE", "WORLD_SIZE", "NODE_ADDR", "PRIMARY_ADDR",
    "MASTER_ADDR", "PRIMARY_PORT", "MASTER_PORT",
})
NAME_MAX = 64
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_PORT = re.compile(r"([0-9]{1,5})/(http|tcp)")
_SSH_KEY = re.compile(
    r"(ssh-ed25519|ssh-rsa|ssh-dss|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com"
    r"|sk-ecdsa-sha2-nistp256@openssh\.com) AAAA[A-Za-z0-9+/]+={0,3}( [^\x00-\x1f\x7f]*)?"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _show(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_range(value: int, *, field: str, low: int, high: int, what: str) -> int:
    if not low <= value <= high:
        raise InvalidRequest(
            f"{field} must be between {low} and {high} {what}; got {_show(value)}.",
            details={"field": field, "reason": "out_of_range", "min": low, "max": high},
        )
    return value


def check_shape(shape: ShapeRequest, catalog: tuple[AcceleratorSpec, ...]) -> AcceleratorSpec:
    """Self-serve shapes: 2–8 nodes of 1–8 GPUs, within what the accelerator offers (§2.1)."""
    accelerator = find_accelerator(shape.accelerator, catalog)
    if accelerator is None:
        raise InvalidShape(
            f"Unknown accelerator {_show(shape.accelerator)}; see GET /v1/accelerators "
            f"({', '.join(a.id for a in catalog)}).",
            details={"field": "shape.accelerator", "reason": "unknown_accelerator"},
        )
    if not accelerator.cluster_capable:
        raise InvalidShape(
            f"{accelerator.name} is not offered as a cluster; pick a cluster-capable "
            "accelerator.",
            details={"field": "shape.accelerator", "reason": "not_cluster_capable"},
        )
    nodes = shape.nodes
    if not SELF_SERVE_MIN_NODES <= nodes <= SELF_SERVE_MAX_NODES:
        details: dict[str, Any] = {
            "field": "shape.nodes", "reason": "nodes_out_of_range",
            "min": SELF_SERVE_MIN_NODES, "max": SELF_SERVE_MAX_NODES,
        }
        message = (f"A self-serve cluster has {SELF_SERVE_MIN_NODES} to {SELF_SERVE_MAX_NODES} "
                   f"nodes; got {_show(nodes)}.")
        if nodes > SELF_SERVE_MAX_NODES:
            details["salesContact"] = True
            message += " Larger clusters are arranged through sales."
        raise InvalidShape(message, details=details)
    gpus, ceiling = shape.gpus_per_node, min(SELF_SERVE_MAX_GPUS_PER_NODE,
                                            accelerator.max_gpus_per_node)
    if gpus < 1:
        raise InvalidShape(
            f"gpusPerNode must be between 1 and {ceiling}; got {_show(gpus)}.",
            details={"field": "shape.gpusPerNode", "reason": "gpus_per_node_out_of_range",
                     "min": 1, "max": ceiling},
        )
    if gpus > accelerator.max_gpus_per_node:
        raise InvalidShape(
            f"gpusPerNode {_show(gpus)} is too many: at most {accelerator.max_gpus_per_node} "
            f"GPUs per node for {accelerator.name}.",
            details={"field": "shape.gpusPerNode", "reason": "exceeds_accelerator_max",
                     "min": 1, "max": accelerator.max_gpus_per_node},
        )
    if gpus > SELF_SERVE_MAX_GPUS_PER_NODE:
        raise InvalidShape(
            f"A self-serve node has at most {SELF_SERVE_MAX_GPUS_PER_NODE} GPUs; got {gpus}.",
            details={"field": "shape.gpusPerNode", "reason": "gpus_per_node_out_of_range",
                     "min": 1, "max": SELF_SERVE_MAX_GPUS_PER_NODE},
        )
    return accelerator


def check_name(name: str, *, field: str = "name") -> str:
    if not name.strip() or len(name) > NAME_MAX or _CONTROL.search(name):
        raise InvalidRequest(
            f"{field} must be 1 to {NAME_MAX} printable characters; got {_show(name)}.",
            details={"field": field, "reason": "invalid_name", "max": NAME_MAX},
        )
    return name


def check_workload(req: LaunchRequest) -> None:
    """Workload settings (§2.3): free of charge, but they must make sense."""
    if req.name is not None:
        check_name(req.name)
    if req.image is not None and (
        not req.image or len(req.image) > 512 or re.search(r"[\s\x00-\x1f\x7f]", req.image)
    ):
        raise InvalidRequest(
            f"image must be a container image reference without spaces; got {_show(req.image)}.",
            details={"field": "image", "reason": "invalid_image"},
        )
    if req.docker_start_cmd is not None:
        cmd = req.docker_start_cmd
        if not cmd or len(cmd) > 256 or any(len(a) > 8192 or "\x00" in a for a in cmd):
            raise InvalidRequest(
                "dockerStartCmd must be a non-empty array of at most 256 strings "
                "(no NUL characters).",
                details={"field": "dockerStartCmd", "reason": "invalid_command"},
            )
    for key in req.env or {}:
        _check_env_key(key)
    for i, port in enumerate(req.ports or []):
        _check_port(port, i)
    for i, key in enumerate(req.ssh_keys or []):
        if len(key) > 16384 or not _SSH_KEY.fullmatch(key.strip()):
            raise InvalidRequest(
                f"sshKeys[{i}] is not an OpenSSH public key (expected e.g. "
                "'ssh-ed25519 AAAA… user@host').",
                details={"field": f"sshKeys[{i}]", "reason": "invalid_ssh_key"},
            )


def _check_env_key(key: str) -> None:
    if not _ENV_NAME.fullmatch(key):
        raise InvalidRequest(
            f"env name {_show(key)} is not a shell identifier (letters, digits and _, not "
            "starting with a digit).",
            details={"field": "env", "reason": "invalid_env_name"},
        )
    if key in RESERVED_ENV:
        raise InvalidRequest(
            f"env {key} is set by the platform on every node and cannot be overridden "
            f"(reserved: {', '.join(sorted(RESERVED_ENV))}).",
            details={"field": f"env.{key}", "reason": "reserved_env"},
        )


def _check_port(port: str, index: int) -> None:
    match = _PORT.fullmatch(port)
    if match is None or not 1 <= int(match.group(1)) <= 65535:
        raise InvalidRequest(
            f"ports[{index}] must look like '<1-65535>/<http|tcp>' (e.g. '8000/http'); "
            f"got {_show(port)}.",
            details={"field": f"ports[{index}]", "reason": "invalid_port"},
        )


def check_repeats(quote: Quote, req: LaunchRequest) -> None:
    """Quote-bound fields may be repeated at launch, but only with the quoted value (§2.3)."""
    pairs: list[tuple[str, object, object]] = []
    if req.shape is not None:
        pairs += [
            ("shape.accelerator", quote.shape.accelerator, req.shape.accelerator),
            ("shape.gpusPerNode", quote.shape.gpus_per_node, req.shape.gpus_per_node),
            ("shape.nodes", quote.shape.nodes, req.shape.nodes),
        ]
    if req.orchestrator is not None:
        pairs.append(("orchestrator", quote.orchestrator, req.orchestrator))
    if req.location is not None:
        pairs.append(("location", quote.location, req.location))
    if req.root_disk_gb is not None:
        pairs.append(("rootDiskGb", quote.root_disk_gb, req.root_disk_gb))
    if req.storage is not None:
        if quote.storage is None:
            pairs.append(("storage", None, {"sizeGb": req.storage.size_gb}))
        else:
            pairs.append(("storage.sizeGb", quote.storage.size_gb, req.storage.size_gb))
    if req.volume_id is not None:
        pairs.append(("volumeId", quote.volume_id, req.volume_id))
    for field, quoted, requested in pairs:
        if quoted != requested:
            raise PriceChanged(
                f"Launch repeats {field}={_show(requested)} but the quote priced "
                f"{field}={_show(quoted)}; re-quote, or drop the field.",
                details={"field": field, "quoted": quoted, "requested": requested},
            )
