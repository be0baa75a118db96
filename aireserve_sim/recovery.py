"""Degraded clusters and their recovery (contract §4.2, §6).

An episode opens when a running cluster loses a node. An attempt takes the nodes that are not
running when it starts, in rank order, one by one (`recovery_node_seconds` each): a node comes
back on the same hardware with the same interconnect address, or — if the provider cannot
bring it back — returns to its failed status and is skipped. Attempts are bounded per episode.
With `auto` on, the health pass (a global tick every `health_pass_seconds` since the epoch)
starts one attempt for a degraded cluster that has attempts left and none running.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from aireserve_sim import logs
from aireserve_sim.billing import BillingBook
from aireserve_sim.state import ClusterRecord, NodeRecord, World
from bot.reserve.errors import NotDegraded, RecoveryExhausted, RecoveryInProgress
from bot.reserve.schemas import ClusterStatus, NodeStatus, format_timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Recovery:
    """Node failures after admission, manual and automatic recovery attempts."""

    def __init__(self, world: World, billing: BillingBook) -> None:
        self._w = world
        self._billing = billing

    def fail_node(self, cluster: ClusterRecord, node: NodeRecord, mode: NodeStatus) -> None:
        """A running node of an admitted cluster stops or turns unhealthy."""
        node.status = mode
        node.last_error = f"node_{mode.value}"
        logs.node_failed(self._w, node, mode.value)
        if cluster.status is ClusterStatus.RUNNING:
            cluster.status = ClusterStatus.DEGRADED
            r = cluster.recovery
            r.episode += 1
            r.episode_started_at = self._w.now
            r.attempts_used = 0
            r.exhausted = False
            r.last_error = None
            r.skipped_nodes = []
            self._w.emit(
                cluster, "cluster.degraded", episode=r.episode,
                nodesDown=[n.rank for n in cluster.nodes if n.status is not NodeStatus.RUNNING],
            )
        self._billing.refresh(cluster)
        self.schedule_health_pass(cluster)

    # --- starting attempts ---------------------------------------------------------------

    def recover_now(self, cluster: ClusterRecord) -> None:
        """`POST …/recover`: one attempt now, whatever `auto` says, from the same budget."""
        r = cluster.recovery
        if cluster.status is not ClusterStatus.DEGRADED:
            raise NotDegraded(
                f"Cluster {cluster.id} is {cluster.status.value}, not degraded: "
                "there is nothing to recover.",
                details={"status": cluster.status.value},
            )
        if r.in_progress:
            raise RecoveryInProgress(
                f"A recovery attempt on cluster {cluster.id} is already running; poll the "
                "cluster until recovery.state leaves in_progress.",
                details={"lastAttemptAt": _fmt(r.attempt_started_at)},
            )
        if r.exhausted or r.attempts_used >= self._max:
            raise RecoveryExhausted(
                f"All {self._max} recovery attempts of this episode are spent "
                f"({r.attempts_used} used); terminate the cluster and relaunch.",
                details={"attemptsUsed": r.attempts_used, "attemptsMax": self._max},
            )
        self._start_attempt(cluster, manual=True)

    def set_auto(self, cluster: ClusterRecord, auto: bool) -> None:
        cluster.recovery.auto = auto
        self.schedule_health_pass(cluster)  # turning auto on while degraded: the next pass acts

    @property
    def _max(self) -> int:
        return self._w.config.recovery_attempts_max

    def _eligible_for_pass(self, cluster: ClusterRecord) -> bool:
        r = cluster.recovery
        return (
            r.auto and cluster.status is ClusterStatus.DEGRADED and not r.in_progress
            and not r.exhausted and r.attempts_used < self._max
        )

    def schedule_health_pass(self, cluster: ClusterRecord) -> None:
        if not self._eligible_for_pass(cluster):
            return
        period = timedelta(seconds=self._w.config.health_pass_seconds)
        tick = _EPOCH + ((self._w.now - _EPOCH) // period + 1) * period
        if cluster.recovery.health_pass_at == tick:
            return
        cluster.recovery.health_pass_at = tick
        generation = cluster.recovery.generation
        self._w.timeline.at(tick, lambda: self._health_pass(cluster, tick, generation))

    def _health_pass(self, cluster: ClusterRecord, tick: datetime, generation: int) -> None:
        r = cluster.recovery
        if r.health_pass_at != tick or r.generation != generation:
            return
        r.health_pass_at = None
        if self._eligible_for_pass(cluster):
            self._start_attempt(cluster, manual=False)

    # --- running an attempt ----------------------------------------------------------------

    def _start_attempt(self, cluster: ClusterRecord, *, manual: bool) -> None:
        r = cluster.recovery
        r.in_progress = True
        r.attempt_started_at = self._w.now
        r.attempt_manual = manual
        targets = [n.rank for n in cluster.nodes if n.status is not NodeStatus.RUNNING]
        self._w.emit(cluster, "recovery.attempt_started", attempt=r.attempts_used + 1,
                     manual=manual, nodes=targets)
        self._begin_node(cluster, targets, 0, r.generation)

    def _begin_node(self, cluster: ClusterRecord, targets: list[int], i: int, gen: int) -> None:
        if i >= len(targets):
            self._end_attempt(cluster)
            return
        node = cluster.nodes[targets[i]]
        failed_as = node.status
        action = "starting" if failed_as is NodeStatus.STOPPED else "restarting"
        node.status = NodeStatus.RECOVERING
        logs.recovering(self._w, node, cluster.recovery.attempts_used + 1, action)
        self._w.timeline.at(
            self._w.after(self._w.config.recovery_node_seconds),
            lambda: self._finish_node(cluster, targets, i, gen, failed_as),
        )

    def _finish_node(
        self, cluster: ClusterRecord, targets: list[int], i: int, gen: int,
        failed_as: NodeStatus,
    ) -> None:
        r = cluster.recovery
        if r.generation != gen or not r.in_progress:
            return  # abandoned (the cluster is terminating)
        node = cluster.nodes[targets[i]]
        if node.recoverable:
            node.status = NodeStatus.RUNNING
            node.last_error = None
            node.last_recovered_at = self._w.now
            logs.recovered(self._w, cluster, node)
            self._w.emit(cluster, "recovery.node_recovered", rank=node.rank)
        else:
            node.status = failed_as
            node.last_error = "provider_unrecoverable"
            if node.rank not in r.skipped_nodes:
                r.skipped_nodes.append(node.rank)
            logs.skipped(self._w, node)
            self._w.emit(cluster, "recovery.node_skipped", rank=node.rank)
        self._billing.refresh(cluster)
        self._begin_node(cluster, targets, i + 1, gen)

    def _end_attempt(self, cluster: ClusterRecord) -> None:
        r = cluster.recovery
        r.in_progress = False
        r.attempts_used += 1
        r.last_attempt_at = self._w.now
        all_up = all(n.status is NodeStatus.RUNNING for n in cluster.nodes)
        self._w.emit(cluster, "recovery.attempt_finished", attempt=r.attempts_used,
                     manual=r.attempt_manual, recovered=all_up,
                     skippedNodes=list(r.skipped_nodes))
        if all_up:
            cluster.status = ClusterStatus.RUNNING
            cluster.last_error = None
            r.last_error = None
            r.skipped_nodes = []
            r.exhausted = False
            self._w.emit(cluster, "cluster.recovered", episode=r.episode)
        elif r.attempts_used >= self._max:
            r.exhausted = True
            cluster.last_error = r.last_error = "recovery_exhausted"
            self._w.emit(cluster, "recovery.exhausted", attemptsUsed=r.attempts_used,
                         attemptsMax=self._max)
        else:
            self.schedule_health_pass(cluster)
        self._billing.refresh(cluster)


def _fmt(when: datetime | None) -> str | None:
    return format_timestamp(when) if when else None
