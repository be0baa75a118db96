"""Engine records → the frozen wire models of bot/reserve/schemas.py (contract §2.4, §2.5)."""

from __future__ import annotations

from aireserve_sim.billing import BillingBook
from aireserve_sim.catalog import (
    MOUNT_PATH,
    SHARED_VOLUME_CENTS_PER_GB_MONTH,
    volume_hourly_cents,
)
from aireserve_sim.state import ClusterRecord, NodeRecord, VolumeRecord, World
from bot.reserve.schemas import (
    Cluster,
    ClusterStatus,
    ClusterVolume,
    Connections,
    Node,
    NodeConnection,
    NodeStatus,
    PrimaryConnection,
    Recovery,
    RecoveryState,
    Ssh,
    Volume,
    VolumeBilling,
    Workload,
)

# Connections are listed once the cluster was admitted and while it holds hardware.
_CONNECTED = (ClusterStatus.RUNNING, ClusterStatus.DEGRADED, ClusterStatus.TERMINATING)


def _ssh(node: NodeRecord) -> Ssh | None:
    if node.status is not NodeStatus.RUNNING:
        return None
    return Ssh(
        host=node.ssh_host,
        port=node.ssh_port,
        user="root",
        command=f"ssh -p {node.ssh_port} root@{node.ssh_host}",
    )


def _node(node: NodeRecord) -> Node:
    ssh = _ssh(node)
    return Node(
        rank=node.rank,
        role=node.role,
        status=node.status,
        gpus=node.gpus,
        interconnect_address=node.interconnect_address,
        ssh_host=ssh.host if ssh else None,
        ssh_port=ssh.port if ssh else None,
        last_error=node.last_error,
        last_recovered_at=node.last_recovered_at,
    )


def _connections(cluster: ClusterRecord) -> Connections | None:
    if cluster.status not in _CONNECTED:
        return None
    primary_ssh = _ssh(cluster.nodes[0])
    return Connections(
        primary=PrimaryConnection(rank=0, ssh=primary_ssh) if primary_ssh else None,
        nodes=[
            NodeConnection(rank=n.rank, ssh=_ssh(n), interconnect_address=n.interconnect_address)
            for n in cluster.nodes
        ],
    )


def _recovery(cluster: ClusterRecord, attempts_max: int) -> Recovery:
    r = cluster.recovery
    if r.in_progress:
        state = RecoveryState.IN_PROGRESS
    elif r.exhausted:
        state = RecoveryState.EXHAUSTED
    else:
        state = RecoveryState.IDLE
    return Recovery(
        auto=r.auto,
        state=state,
        episode=r.episode,
        episode_started_at=r.episode_started_at,
        attempts_used=r.attempts_used,
        attempts_max=attempts_max,
        last_attempt_at=r.last_attempt_at,
        last_error=r.last_error,
        skipped_nodes=sorted(r.skipped_nodes),
    )


def cluster(world: World, rec: ClusterRecord, billing: BillingBook) -> Cluster:
    volume = world.volumes.get(rec.volume_id or "")
    return Cluster(
        id=rec.id,
        name=rec.name,
        quote_id=rec.quote_id,
        status=rec.status,
        shape=rec.shape,
        total_gpus=rec.shape.total_gpus,
        orchestrator=rec.orchestrator,
        location=rec.location,
        created_at=rec.created_at,
        ready_at=rec.ready_at,
        terminated_at=rec.terminated_at,
        termination_reason=rec.termination_reason,
        last_error=rec.last_error,
        locked_rate=rec.locked_rate,
        billing=billing.cluster_view(rec),
        nodes=[_node(n) for n in rec.nodes],
        connections=_connections(rec),
        recovery=_recovery(rec, world.config.recovery_attempts_max),
        volume=(
            ClusterVolume(
                id=volume.id,
                size_gb=volume.size_gb,
                mount_path=MOUNT_PATH,
                created_with_cluster=rec.volume_created_with_cluster,
            )
            if volume
            else None
        ),
        workload=Workload(
            image=rec.image,
            docker_start_cmd=rec.docker_start_cmd,
            env_keys=rec.env_keys,
            ports=rec.ports,
            ssh_key_count=rec.ssh_key_count,
        ),
    )


def volume(rec: VolumeRecord) -> Volume:
    return Volume(
        id=rec.id,
        name=rec.name,
        size_gb=rec.size_gb,
        location=rec.location,
        status=rec.status,
        attached_cluster_id=rec.attached_cluster_id,
        mount_path=MOUNT_PATH,
        created_with_cluster_id=rec.created_with_cluster_id,
        billing=VolumeBilling(
            cents_per_gb_month=SHARED_VOLUME_CENTS_PER_GB_MONTH,
            hourly_cents=volume_hourly_cents(rec.size_gb),
            covered_by_cluster=rec.covered,
        ),
        created_at=rec.created_at,
        deleted_at=rec.deleted_at,
    )
