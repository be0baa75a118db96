"""Termination: the owner or an approver ends a cluster — always accepted, even mid-provision."""

from __future__ import annotations

from bot.clock import Clock
from bot.domain import policies
from bot.domain.errors import Conflict, UnknownResource
from bot.domain.models import Actor, ClusterRecord
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.services.audit import AuditLog, audited
from bot.services.people import People
from bot.services.provider_errors import explain
from bot.services.watching import WatchService
from storage.db import Database


class TerminationService:
    def __init__(self, *, db: Database, provider: ClusterProvider, watching: WatchService,
                 people: People, audit: AuditLog,
                 clock: Clock) -> None:
        self._db = db
        self._provider = provider
        self._watching = watching
        self._people = people
        self._audit = audit
        self._clock = clock

    @audited("terminate", subject="cluster_id", refusals_only=True)
    async def check(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        """Who may terminate, and is there anything left to terminate? (before the confirm;
        a refusal is audited as a refused terminate)"""
        return await self._check(cluster_id=cluster_id, actor=actor)

    async def _check(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
        if record is None:
            raise UnknownResource("cluster", cluster_id)
        policies.ensure_can_act_on_cluster(record, actor, await self._people.approvers())
        if not record.status.is_live or record.status.value == "terminating":
            raise Conflict(f"`{cluster_id}` is already {record.status.value}.")
        return record

    @audited("terminate", subject="cluster_id")
    async def terminate(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        await self._check(cluster_id=cluster_id, actor=actor)
        return await self._terminate(cluster_id, by=actor.user_id)

    async def terminate_for_policy(self, *, cluster_id: str) -> ClusterRecord:
        """The spend policy's enforced envelope ran out (audited by the caller)."""
        return await self._terminate(cluster_id, by="spend-policy")

    async def _terminate(self, cluster_id: str, *, by: str) -> ClusterRecord:
        # Intent first: the watcher must not call this "terminated outside the bot".
        async with self._db.transaction() as repos:
            await repos.clusters.update(cluster_id, now=self._clock.now(),
                                        terminate_requested_by=by)
        try:
            wire = await self._provider.terminate_cluster(cluster_id)
        except api.ApiError as exc:
            raise explain(exc, ident=cluster_id) from exc
        record = await self._watching.sync(cluster_id, wire=wire)
        assert record is not None
        return record
