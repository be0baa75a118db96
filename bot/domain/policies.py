"""Rules that decide, as pure functions: self-serve shapes and who may do what.

Services call these; transports never decide. Each refusal raises a `DomainError` whose message
names the rule.
"""

from __future__ import annotations

from collections.abc import Collection

from bot.domain.errors import InvalidCommand, NotAllowed
from bot.domain.models import Actor, ClusterRecord, LaunchRequest

# The provider's self-serve limits [docs]: 2–8 nodes of 1–8 GPUs; larger through sales.
MIN_NODES, MAX_NODES = 2, 8
MIN_GPUS_PER_NODE, MAX_GPUS_PER_NODE = 1, 8
SALES_NOTE = "Larger clusters are arranged through AI Reserve sales."
# A planned run (`hours=`) longer than ten years is no plan; a spend policy may cap it lower.
MAX_PLANNED_HOURS = 87_600


def check_nodes(nodes: int, *, usage: str = "") -> None:
    if not MIN_NODES <= nodes <= MAX_NODES:
        raise InvalidCommand(
            f"Self-serve clusters are {MIN_NODES}–{MAX_NODES} nodes; you asked for {nodes}. "
            + (SALES_NOTE if nodes > MAX_NODES else "A single machine is not a cluster."),
            bad_part=f"nodes={nodes}", usage=usage,
        )


def check_gpus_per_node(gpus: int, *, accelerator_label: str, machine_max: int = MAX_GPUS_PER_NODE,
                        usage: str = "") -> None:
    ceiling = min(MAX_GPUS_PER_NODE, machine_max)
    if not MIN_GPUS_PER_NODE <= gpus <= ceiling:
        raise InvalidCommand(
            f"At most {ceiling} GPUs per node for {accelerator_label} "
            f"(and at least {MIN_GPUS_PER_NODE}); you asked for {gpus}.",
            bad_part=f"x{gpus}", usage=usage,
        )


def ensure_can_act_on_cluster(cluster: ClusterRecord, actor: Actor,
                              approvers: Collection[str]) -> None:
    """Terminate (and later recover/notify): the cluster's owner or an approver."""
    if actor.user_id != cluster.owner_id and actor.user_id not in approvers:
        raise NotAllowed(f"Only the owner (<@{cluster.owner_id}>) or an approver can do that "
                         f"to `{cluster.id}`.")


def ensure_can_retry(request: LaunchRequest, actor: Actor, approvers: Collection[str]) -> None:
    """A launch that failed for capacity or payment was approved at this price: the requester
    or an approver may try it again."""
    if actor.user_id != request.requester_id and actor.user_id not in approvers:
        raise NotAllowed("Only the requester or an approver can retry this launch.")
