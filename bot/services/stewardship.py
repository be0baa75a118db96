"""Who looks after a cluster: claiming an adopted one, extra channels for its notices, logs."""

from __future__ import annotations

from typing import Unpack

from bot.domain import policies
from bot.domain.errors import Conflict, NotAllowed
from bot.domain.models import Actor, ClusterRecord, ClusterState
from bot.domain.ports import Notifier
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.reserve.schemas import Logs
from bot.services.acting import ActingService, Basics
from bot.services.audit import audited
from bot.services.observing import connection_details
from bot.services.provider_errors import explain

LOG_LINES = 50


class StewardshipService(ActingService):
    def __init__(self, *, provider: ClusterProvider, notifier: Notifier,
                 **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._provider = provider
        self._notifier = notifier

    async def _record(self, cluster_id: str) -> ClusterRecord:
        async with self._db.transaction() as repos:
            record = await repos.clusters.require(cluster_id)
        return record

    @audited("claim", subject="cluster_id")
    async def claim(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        """An adopted cluster becomes the actor's: reminders and its DMs go to them.

        Approvers only: owning a cluster lets one read its logs and terminate it, and it was
        nobody's request — someone trusted with spend has to take it on (refusals are
        audited)."""
        if actor.user_id not in await self._people.approvers():
            raise NotAllowed(f"Only an approver can claim `{cluster_id}`: it was found at AI "
                             "Reserve, not launched through the bot.")
        async with self._db.transaction() as repos:
            record = await repos.clusters.require(cluster_id)
            if record.owner_id is not None:
                raise Conflict(f"`{cluster_id}` already belongs to <@{record.owner_id}>.")
            record = await repos.clusters.update(cluster_id, now=self._clock.now(),
                                                 owner_id=actor.user_id)
        await self._notifier.refresh_cluster(cluster_id)
        return record

    @audited("notify", subject="cluster_id")
    async def notify(self, *, cluster_id: str, channel_id: str, actor: Actor) -> ClusterRecord:
        """Another channel gets this cluster's notices from now on."""
        record = await self._record(cluster_id)
        policies.ensure_can_act_on_cluster(record, actor,
                                           await self._people.approvers_for(record))
        if channel_id in record.notify_channels or channel_id == record.channel_id:
            raise Conflict(f"<#{channel_id}> already gets `{cluster_id}`'s notices.")
        async with self._db.transaction() as repos:
            return await repos.clusters.update(
                cluster_id, now=self._clock.now(),
                notify_channels=(*record.notify_channels, channel_id))

    @audited("logs", subject="cluster_id")
    async def logs(self, *, cluster_id: str, node: int, actor: Actor) -> Logs:
        record = await self._record(cluster_id)
        policies.ensure_can_act_on_cluster(record, actor,
                                           await self._people.approvers_for(record))
        if node >= record.shape.nodes:
            raise Conflict(f"`{cluster_id}` has nodes 0–{record.shape.nodes - 1}; "
                           f"there is no node {node}.")
        try:
            return await self._provider.cluster_logs(cluster_id, node=node, tail=LOG_LINES)
        except api.ApiError as exc:
            raise explain(exc, ident=cluster_id) from exc

    @audited("keep_running", subject="cluster_id")
    async def keep_running(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        """Only an acknowledgement: the hourly reminders go on until it is terminated. A press
        after the cluster ended changes nothing and says so (it does not keep running)."""
        record = await self._record(cluster_id)
        if record.status not in (ClusterState.PROVISIONING, ClusterState.RUNNING,
                                 ClusterState.DEGRADED):
            raise Conflict(f"`{cluster_id}` is {record.status.value} already: it does not keep "
                           "running, pressing Keep running changed nothing, and no more hourly "
                           "reminders come for it.")
        return record

    @audited("connect", subject="cluster_id")
    async def connect(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        """`/cluster connect`: the owner or an approver asks; the SSH and interconnect details
        are read from AI Reserve now (never stored) and DMed to the OWNER, never a channel."""
        record = await self._record(cluster_id)
        policies.ensure_can_act_on_cluster(record, actor,
                                           await self._people.approvers_for(record))
        if record.owner_id is None:
            raise Conflict(f"`{cluster_id}` has no owner to send them to; claim it first.")
        if not record.status.is_live:
            raise Conflict(f"`{cluster_id}` is {record.status.value}: nothing to connect to.")
        try:
            wire = await self._provider.get_cluster(cluster_id)
        except api.ApiError as exc:
            raise explain(exc, ident=cluster_id) from exc
        details = connection_details(wire)
        if details is None:
            raise Conflict(f"`{cluster_id}` has no connection details yet "
                           f"({wire.status.value}); they come once every node is ready.")
        asked = f"{self._clock.now().isoformat()}/{actor.user_id}"
        await self._notifier.send_connection_again(record, details, key=asked)
        return record
