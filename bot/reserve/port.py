"""The provider port: what the bot's services need from AI Reserve, and nothing more.

`AsyncAIReserveClient` (HTTP, against the real service or the simulator) satisfies it; services
depend on this Protocol so tests can hand them any twin. Every method raises the typed errors of
`bot.reserve.errors` (`ApiError` subclasses; `TransportError` when no answer came back).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Protocol

from bot.reserve.bodies import Known, OnSkip, SkippedItem, UnexpectedResponse
from bot.reserve.retry import Sent, counting_sent
from bot.reserve.schemas import (
    Accelerator,
    Account,
    Cluster,
    ClusterStatus,
    Health,
    Logs,
    Orchestrator,
    Quote,
    Shape,
    ShapeRequest,
    Volume,
)

__all__ = ["MAX_PAGE_SIZE", "ClusterProvider", "Known", "OnSkip", "Sent", "SkippedItem",
           "StatusFilter", "UnexpectedResponse", "counting_sent"]

MAX_PAGE_SIZE = 200  # contract: list endpoints take ?limit= up to 200 (default 50)

StatusFilter = ClusterStatus | str | Iterable[ClusterStatus | str] | None
"""One status, several, or None for all (sent as `?status=a,b`)."""


class ClusterProvider(Protocol):
    """The subset of the AI Reserve API the bot's services use (contract §3)."""

    async def list_accelerators(self, location: str | None = None) -> list[Accelerator]:
        """The catalog: cluster per-GPU price, max GPUs per machine, per-location availability."""
        ...

    async def quote_cluster(
        self,
        shape: ShapeRequest | Shape | str,
        gpus_per_node: int | None = None,
        nodes: int | None = None,
        *,
        orchestrator: Orchestrator | None = None,
        location: str | None = None,
        root_disk_gb: int | None = None,
        storage_gb: int | None = None,
        volume_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Quote:
        """Price a whole cluster; `shape` is a shape model or an accelerator id with the counts.

        The quote locks the rate until `expires_at` and can be launched once. Its `availability`
        is a per-node signal only: whether every node fits together is decided at launch.
        """
        ...

    async def get_quote(self, quote_id: str) -> Quote:
        """Re-read a stored quote (e.g. to re-render it or see `launched_cluster_id`)."""
        ...

    async def launch_cluster(
        self,
        quote_id: str,
        *,
        idempotency_key: str,
        name: str | None = None,
        image: str | None = None,
        docker_start_cmd: list[str] | None = None,
        env: dict[str, str] | None = None,
        ports: list[str] | None = None,
        ssh_keys: list[str] | None = None,
        auto_recovery: bool | None = None,
        shape: ShapeRequest | Shape | None = None,
        orchestrator: Orchestrator | None = None,
        location: str | None = None,
        root_disk_gb: int | None = None,
        storage_gb: int | None = None,
        volume_id: str | None = None,
    ) -> Cluster:
        """Launch from a quote. The key is mandatory: the same key replays the original launch.

        Workload settings never change the price; a repeated quote-bound field that differs
        from the quote raises `PriceChanged`.
        """
        ...

    async def get_cluster(self, cluster_id: str) -> Cluster:
        """The full cluster: the polling endpoint (status, nodes, billing, recovery)."""
        ...

    def iter_clusters(self, status: StatusFilter = None, *, page_size: int | None = None,
                      on_skip: OnSkip | None = None) -> AsyncIterator[Cluster]:
        """Every cluster (newest first), across all pages (`page_size` per page, at most
        MAX_PAGE_SIZE; None: the server's default). An item that does not parse is skipped
        (logged, and given to `on_skip` with its id and the field), never the whole listing."""
        ...

    def cluster_pages(self, status: StatusFilter = None, *, page_size: int | None = None,
                      on_skip: OnSkip | None = None, known: Known | None = None
                      ) -> AsyncIterator[list[Cluster]]:
        """`iter_clusters` a page at a time, as each arrives; an item `known` recognises (its
        raw JSON object: the caller holds it, parsed, as it is) is left out, unparsed."""
        ...

    async def terminate_cluster(self, cluster_id: str) -> Cluster:
        """Terminate: always accepted, even mid-provision; a repeat is a no-op."""
        ...

    async def recover_cluster(self, cluster_id: str, *, idempotency_key: str) -> Cluster:
        """Make one recovery attempt now on a degraded cluster (uses the episode's budget)."""
        ...

    async def set_auto_recovery(self, cluster_id: str, auto: bool) -> Cluster:
        """Opt the cluster in or out of automatic recovery on each health pass."""
        ...

    async def cluster_logs(
        self,
        cluster_id: str,
        node: int = 0,
        tail: int = 100,
        since: datetime | None = None,
        stream: str | None = None,
    ) -> Logs:
        """One node's recent log lines (rank 0, the primary, by default)."""
        ...

    async def get_volume(self, volume_id: str) -> Volume:
        """One persistent volume."""
        ...

    def iter_volumes(self) -> AsyncIterator[Volume]:
        """Every volume (newest first), across all pages."""
        ...

    async def delete_volume(self, volume_id: str) -> Volume:
        """Delete a volume that no cluster holds; billing stops at once."""
        ...

    async def resize_volume(self, volume_id: str, size_gb: int) -> Volume:
        """Grow a volume no cluster holds (never shrink); later hours bill at the new size."""
        ...

    async def get_account(self) -> Account:
        """Balance, payment status and grace period, self-serve limits."""
        ...

    async def health(self) -> Health:
        """The cheapest call there is (no auth, no quota): its answer's `Date` is a reading of
        AI Reserve's clock (bot/services/provider_time.py)."""
        ...
