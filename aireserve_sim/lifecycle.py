"""The cluster state machine (§4.1): provisioning → running | failed; terminating → terminated.

Recovery (degraded ⇄ running) lives in recovery.py; money in billing.py. Every transition here
runs at `world.now`, i.e. at the exact simulated instant it happened.
"""

from __future__ import annotations

from aireserve_sim import logs
from aireserve_sim.billing import BillingBook
from aireserve_sim.state import ClusterRecord, NodeRecord, VolumeRecord, World
from bot.reserve.schemas import ClusterStatus, NodeStatus, VolumeStatus, format_timestamp

_ROLES = {
    "none": ("primary", "worker"),
    "slurm": ("slurm_controller", "slurm_compute"),
    "ray": ("ray_head", "ray_worker"),
}
SSH_PORT_BASE = 22001


class Lifecycle:
    """Provisioning, readiness, pre-admission failure and termination of clusters."""

    def __init__(self, world: World, billing: BillingBook) -> None:
        self._w = world
        self._billing = billing

    def build_nodes(self, *, cluster_index: int, nodes: int, gpus: int, orchestrator: str
                    ) -> list[NodeRecord]:
        """Nodes with their interconnect address (kept forever) and their future SSH endpoint."""
        primary_role, worker_role = _ROLES.get(orchestrator, _ROLES["none"])
        built = []
        for rank in range(nodes):
            n = self._w.node_counter
            self._w.node_counter += 1
            built.append(
                NodeRecord(
                    rank=rank,
                    role=primary_role if rank == 0 else worker_role,
                    gpus=gpus,
                    interconnect_address=f"10.65.{cluster_index % 256}.{rank + 2}",
                    ssh_host=f"203.0.113.{n % 254 + 1}",  # TEST-NET-3 (RFC 5737)
                    ssh_port=SSH_PORT_BASE + n % 40000,
                )
            )
        return built

    def start_provisioning(self, cluster: ClusterRecord) -> None:
        """Right after launch: node k boots at createdAt + (k+1) × provision_seconds_per_node."""
        self._w.emit(cluster, "cluster.provisioning", nodes=len(cluster.nodes))
        step = self._w.config.provision_seconds_per_node
        for node in cluster.nodes:
            logs.placed(self._w, cluster, node)
            self._schedule_boot(cluster, node, (node.rank + 1) * step)

    def _schedule_boot(self, cluster: ClusterRecord, node: NodeRecord, seconds: float) -> None:
        generation = node.generation
        self._w.timeline.at(self._w.after(seconds), lambda: self._boot(cluster, node, generation))

    def _boot(self, cluster: ClusterRecord, node: NodeRecord, generation: int) -> None:
        if cluster.status is not ClusterStatus.PROVISIONING or node.generation != generation:
            return
        node.status = NodeStatus.RUNNING
        logs.booted(self._w, cluster, node)
        if all(n.status is NodeStatus.RUNNING for n in cluster.nodes):
            self._ready(cluster)

    def _ready(self, cluster: ClusterRecord) -> None:
        cluster.ready_at = self._w.now
        cluster.status = ClusterStatus.RUNNING
        self._w.emit(cluster, "cluster.running", readyAt=format_timestamp(self._w.now))
        logs.rendezvous(self._w, cluster)
        self._billing.start_cluster(cluster)

    def fail_before_admission(self, cluster: ClusterRecord, node: NodeRecord) -> None:
        """The simulator re-places a node once; a second failure of it fails the launch."""
        if node.replaced:
            self._fail(cluster)
            return
        node.replaced = True
        node.generation += 1
        node.status = NodeStatus.PROVISIONING
        logs.replaced(self._w, node)
        self._schedule_boot(cluster, node, self._w.config.provision_seconds_per_node)

    def _fail(self, cluster: ClusterRecord) -> None:
        self._billing.stop_cluster(cluster)  # never billed; a volume made with it bills alone now
        cluster.status = ClusterStatus.FAILED
        cluster.last_error = "provision_failed"
        cluster.ended_at = self._w.now
        for node in cluster.nodes:
            node.generation += 1
            node.status = NodeStatus.TERMINATED
        logs.provision_failed(self._w, cluster)
        self._detach_volume(cluster)
        self._w.emit(cluster, "cluster.failed", lastError="provision_failed")

    def begin_terminate(self, cluster: ClusterRecord, reason: str) -> None:
        """Terminate is always accepted; nothing accrues from this instant (§5.1)."""
        self._billing.stop_cluster(cluster)
        cluster.status = ClusterStatus.TERMINATING
        cluster.termination_reason = reason
        recovery = cluster.recovery
        recovery.generation += 1  # abandon a running attempt and any pending health pass
        recovery.in_progress = False
        recovery.health_pass_at = None
        for node in cluster.nodes:
            node.generation += 1
            node.status = NodeStatus.TERMINATING
        self._billing.refresh(cluster)
        logs.terminating(self._w, cluster)
        self._w.emit(cluster, "cluster.terminating", reason=reason)
        self._w.timeline.at(
            self._w.after(self._w.config.terminate_seconds), lambda: self._finish(cluster)
        )

    def _finish(self, cluster: ClusterRecord) -> None:
        cluster.status = ClusterStatus.TERMINATED
        cluster.terminated_at = cluster.ended_at = self._w.now
        for node in cluster.nodes:
            node.status = NodeStatus.TERMINATED
        logs.terminated(self._w, cluster)
        self._detach_volume(cluster)
        self._w.emit(cluster, "cluster.terminated", reason=cluster.termination_reason)

    def _detach_volume(self, cluster: ClusterRecord) -> None:
        volume: VolumeRecord | None = self._w.volumes.get(cluster.volume_id or "")
        if volume is not None and volume.attached_cluster_id == cluster.id:
            volume.attached_cluster_id = None
            volume.status = VolumeStatus.AVAILABLE
