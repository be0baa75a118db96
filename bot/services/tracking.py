"""Tracking: keep each cluster's record (and so its Slack message) in step with AI Reserve.

`sync(id)` reads the cluster at the provider, stores what changed and, when anything a person
would see changed, edits the cluster's one message. The first time a cluster is `running`, its
owner gets the connection details by DM. `sync_live()` does that for every cluster that still
holds hardware, with bounded concurrency; the scheduler calls it every poll interval.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from bot.clock import Clock
from bot.domain.models import (
    ClusterRecord,
    ClusterState,
    ConnectionDetails,
    NodeConnection,
    NodeSummary,
    ShapeSpec,
)
from bot.domain.ports import Notifier
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.reserve.schemas import Cluster, ClusterStatus, NodeStatus
from storage.db import Database

log = logging.getLogger(__name__)

MAX_CONCURRENT_POLLS = 8

# What, if it changes, makes the cluster's message worth editing.
_VISIBLE = ("status", "nodes_ready", "ready_at", "terminated_at", "termination_reason",
            "accrued_cents", "accrued_hours", "last_error")


def state_of(status: ClusterStatus) -> ClusterState | None:
    try:
        return ClusterState(status.value)
    except ValueError:
        return None  # an enum value added after us: keep the last known state


def _observed(cluster: Cluster) -> dict[str, Any]:
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
    }


def record_from_wire(cluster: Cluster, *, owner_id: str, channel_id: str, request_id: str | None,
                     accelerator_name: str, now: datetime) -> ClusterRecord:
    return ClusterRecord(
        id=cluster.id, request_id=request_id, owner_id=owner_id, channel_id=channel_id,
        shape=ShapeSpec(accelerator=cluster.shape.accelerator,
                        gpus_per_node=cluster.shape.gpus_per_node, nodes=cluster.shape.nodes),
        accelerator_name=accelerator_name, location=cluster.location,
        status=state_of(cluster.status) or ClusterState.PROVISIONING,
        created_at=cluster.created_at,
        volume_id=cluster.volume.id if cluster.volume else None,
        volume_created_with_cluster=bool(cluster.volume and cluster.volume.created_with_cluster),
        updated_at=now, **_observed(cluster),
    )


def connection_details(cluster: Cluster) -> ConnectionDetails | None:
    conn = cluster.connections
    if conn is None or conn.primary is None:
        return None
    return ConnectionDetails(
        cluster_id=cluster.id, primary_ssh_command=conn.primary.ssh.command,
        nodes=tuple(NodeConnection(rank=n.rank, ssh_command=n.ssh.command if n.ssh else None,
                                   interconnect_address=n.interconnect_address)
                    for n in conn.nodes),
    )


def node_summaries(cluster: Cluster) -> list[NodeSummary]:
    return [NodeSummary(rank=n.rank, role=n.role, status=n.status.value, gpus=n.gpus,
                        interconnect_address=n.interconnect_address, last_error=n.last_error)
            for n in cluster.nodes]


class TrackingService:
    def __init__(self, *, db: Database, provider: ClusterProvider, notifier: Notifier,
                 clock: Clock) -> None:
        self._db = db
        self._provider = provider
        self._notifier = notifier
        self._clock = clock

    async def sync_live(self) -> int:
        """Poll every cluster that may still bill; returns how many were polled."""
        async with self._db.transaction() as repos:
            live = await repos.clusters.list_live()
        gate = asyncio.Semaphore(MAX_CONCURRENT_POLLS)

        async def one(record: ClusterRecord) -> None:
            async with gate:
                try:
                    await self.sync(record.id)
                except api.ApiError as exc:
                    # Nothing is lost: the next poll sees whatever happened meanwhile.
                    log.warning("polling %s failed: %s", record.id, exc.code)

        await asyncio.gather(*(one(r) for r in live))
        return len(live)

    async def sync(self, cluster_id: str, *, wire: Cluster | None = None) -> ClusterRecord | None:
        """Bring one record up to date with the provider (or with `wire` if already fetched)."""
        if wire is None:
            try:
                wire = await self._provider.get_cluster(cluster_id)
            except api.NotFound:
                wire = None
                return await self._vanished(cluster_id)
        now = self._clock.now()
        async with self._db.transaction() as repos:
            before = await repos.clusters.get(cluster_id)
            if before is None:
                return None
            changes = {k: v for k, v in _observed(wire).items() if getattr(before, k) != v}
            state = state_of(wire.status)
            if state is not None and state is not before.status:
                changes["status"] = state
            after = await repos.clusters.update(cluster_id, now=now, **changes) if changes \
                else before
        if any(k in changes for k in _VISIBLE):
            await self._notifier.refresh_cluster(cluster_id)
        if after.status is ClusterState.RUNNING and after.connection_sent_at is None:
            details = connection_details(wire)
            if details is not None:
                await self._notifier.send_connection_details(after, details)
                async with self._db.transaction() as repos:
                    after = await repos.clusters.update(cluster_id, now=now,
                                                        connection_sent_at=now)
        return after

    async def _vanished(self, cluster_id: str) -> ClusterRecord | None:
        """The provider no longer lists it (past retention): it is over and no longer bills."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            before = await repos.clusters.get(cluster_id)
            if before is None or not before.status.is_live:
                return before
            after = await repos.clusters.update(
                cluster_id, now=now, status=ClusterState.TERMINATED,
                terminated_at=before.terminated_at or now,
                termination_reason=before.termination_reason or "not_found_at_provider")
        await self._notifier.refresh_cluster(cluster_id)
        return after
