"""Read-only questions about clusters: `/cluster list` and `/cluster status <id>`."""

from __future__ import annotations

from bot.domain.errors import UnknownResource
from bot.domain.models import ClusterRecord, NodeSummary
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.services.observing import node_summaries
from bot.services.provider_errors import explain
from bot.services.watching import WatchService
from storage.db import Database


class ClusterQueries:
    def __init__(self, *, db: Database, provider: ClusterProvider,
                 watching: WatchService) -> None:
        self._db = db
        self._provider = provider
        self._watching = watching

    async def live(self) -> list[ClusterRecord]:
        async with self._db.transaction() as repos:
            return await repos.clusters.list_live()

    async def status(self, cluster_id: str) -> tuple[ClusterRecord, list[NodeSummary]]:
        """The stored record refreshed from the provider, with each node's state."""
        async with self._db.transaction() as repos:
            if await repos.clusters.get(cluster_id) is None:
                raise UnknownResource("cluster", cluster_id)
        try:
            wire = await self._provider.get_cluster(cluster_id)
        except api.ApiError as exc:
            raise explain(exc) from exc
        record = await self._watching.sync(cluster_id, wire=wire)
        assert record is not None
        return record, node_summaries(wire)
