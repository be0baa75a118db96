"""Reading a provider cluster into the bot's terms (pure: wire model in, domain model out)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.domain.connection import ConnectionDetails, NodeConnection
from bot.domain.models import (
    ClusterRecord,
    ClusterState,
    NodeState,
    NodeSummary,
    Observation,
    ShapeSpec,
)
from bot.reserve.schemas import BillingIncrement, Cluster, ClusterStatus, NodeStatus


def state_of(status: ClusterStatus) -> ClusterState | None:
    try:
        return ClusterState(status.value)
    except ValueError:
        return None  # an enum value added after us: keep the last known state


def observe(cluster: Cluster, *, previous: ClusterState | None = None) -> Observation:
    r = cluster.recovery
    return Observation(
        status=state_of(cluster.status) or previous or ClusterState.PROVISIONING,
        episode=r.episode, episode_started_at=r.episode_started_at,
        attempts_used=r.attempts_used, attempts_max=r.attempts_max,
        recovery_state=r.state.value, auto_recovery=r.auto, skipped=tuple(r.skipped_nodes),
        nodes=tuple(NodeState(rank=n.rank, status=n.status.value,
                              last_recovered_at=n.last_recovered_at) for n in cluster.nodes),
        accrued_cents=cluster.billing.accrued_cents,
        accrued_hours=cluster.billing.accrued_hours,
        termination_reason=cluster.termination_reason,
        payment_status=cluster.billing.payment_status.value,
        grace_ends_at=cluster.billing.grace_ends_at,
        unpaid_cents=cluster.billing.unpaid_cents,
        skipped_charges=skipped_charges(cluster),
        next_accrual_at=cluster.billing.next_accrual_at,
    )


def skipped_charges(cluster: Cluster) -> int | None:
    """Hour marks AI Reserve passed without a charge (no node running at that instant): the
    marks it has processed (`nextAccrualAt` is the next one) less the hours it charged."""
    bill = cluster.billing
    if (cluster.ready_at is None or bill.next_accrual_at is None
            or cluster.locked_rate.billing_increment is not BillingIncrement.HOUR):
        return None
    marks = round((bill.next_accrual_at - cluster.ready_at).total_seconds() / 3600)
    return max(0, marks - bill.accrued_hours)


def observed_fields(cluster: Cluster) -> dict[str, Any]:
    """The record fields that follow the provider's cluster."""
    return {
        "nodes_ready": sum(1 for n in cluster.nodes if n.status is NodeStatus.RUNNING),
        "ready_at": cluster.ready_at,
        "terminated_at": cluster.terminated_at,
        "termination_reason": cluster.termination_reason,
        "accrued_cents": cluster.billing.accrued_cents,
        "accrued_hours": cluster.billing.accrued_hours,
        "last_error": cluster.last_error,
        "hourly_cents": cluster.locked_rate.hourly_cents,
        "name": cluster.name,
        "auto_recovery": cluster.recovery.auto,
    }


def record_from_wire(cluster: Cluster, *, owner_id: str | None, channel_id: str,
                     request_id: str | None, accelerator_name: str, now: datetime,
                     adopted: bool = False) -> ClusterRecord:
    return ClusterRecord(
        id=cluster.id, request_id=request_id, owner_id=owner_id, channel_id=channel_id,
        shape=ShapeSpec(accelerator=cluster.shape.accelerator,
                        gpus_per_node=cluster.shape.gpus_per_node, nodes=cluster.shape.nodes),
        accelerator_name=accelerator_name, location=cluster.location,
        status=state_of(cluster.status) or ClusterState.PROVISIONING,
        created_at=cluster.created_at,
        volume_id=cluster.volume.id if cluster.volume else None,
        volume_created_with_cluster=bool(cluster.volume and cluster.volume.created_with_cluster),
        updated_at=now, adopted=adopted, **observed_fields(cluster),
    )


def connection_details(cluster: Cluster) -> ConnectionDetails | None:
    conn = cluster.connections
    if conn is None or conn.primary is None:
        return None
    roles = {n.rank: n.role for n in cluster.nodes}
    return ConnectionDetails(
        cluster_id=cluster.id, primary_ssh_command=conn.primary.ssh.command,
        nodes=tuple(NodeConnection(rank=n.rank, ssh_command=n.ssh.command if n.ssh else None,
                                   interconnect_address=n.interconnect_address,
                                   role=roles.get(n.rank))
                    for n in conn.nodes),
        volume_mount=cluster.volume.mount_path if cluster.volume else None,
        ports=tuple(cluster.workload.ports) if cluster.workload else (),
        primary_host=conn.primary.ssh.host, primary_port=conn.primary.ssh.port,
        primary_user=conn.primary.ssh.user,
    )


def node_summaries(cluster: Cluster) -> list[NodeSummary]:
    return [NodeSummary(rank=n.rank, role=n.role, status=n.status.value, gpus=n.gpus,
                        interconnect_address=n.interconnect_address, last_error=n.last_error)
            for n in cluster.nodes]
