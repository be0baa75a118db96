"""The AI Reserve simulator engine: the provider's whole state, in memory, behind typed calls.

The aiohttp server (server.py) is a thin adapter over this class. Each public call first
settles simulated time up to `clock.now()` — node boots, readiness, accruals, grace expiry,
health passes, recovery steps, terminations, volume hours — in chronological order, each at its
own instant (timeline.py); then it validates, acts, and answers with the wire models of
bot/reserve/schemas.py or raises the typed errors of bot/reserve/errors.py.

Parts: quotes.py (stock, quotes, launches), lifecycle.py (provisioning, termination),
recovery.py (degraded, attempts), billing.py (accruals, volume hours, balance, grace),
volumes.py, validation.py, logs.py, render.py; state.py holds the records they share.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from aireserve_sim import logs, render
from aireserve_sim.billing import BillingBook
from aireserve_sim.catalog import ACCELERATORS, LOCATIONS, AcceleratorSpec, find_accelerator
from aireserve_sim.config import SimConfig
from aireserve_sim.lifecycle import Lifecycle
from aireserve_sim.quotes import QuoteDesk
from aireserve_sim.recovery import Recovery
from aireserve_sim.state import ClusterRecord, LedgerEntry, World
from aireserve_sim.validation import check_name, check_range
from aireserve_sim.volumes import Volumes, check_location
from bot.clock import Clock, ManualClock
from bot.reserve.errors import InvalidRequest, InvalidState, NotFound
from bot.reserve.schemas import (
    Accelerator,
    Account,
    Availability,
    Cluster,
    ClusterStatus,
    Event,
    LaunchRequest,
    Location,
    LocationAvailability,
    Logs,
    NodeStatus,
    PaymentStatus,
    PerGpuPrice,
    Quote,
    QuoteRequest,
    ShapeRequest,
    Volume,
    VolumeCreateRequest,
    VolumeUpdateRequest,
)

__all__ = ["LedgerEntry", "Listed", "SimulatorEngine"]

_LIVE = (ClusterStatus.PROVISIONING, ClusterStatus.RUNNING, ClusterStatus.DEGRADED)

MAX_ADVANCE_SECONDS = 366 * 24 * 3600
MAX_BALANCE_CENTS = 10**12
MAX_PLACEABLE_NODES = 10_000
MAX_LOG_TAIL = 5000


@dataclass(frozen=True)
class Listed:
    """A listed cluster, rendered on demand."""

    id: str
    render: Callable[[], Cluster]

    def to_wire(self) -> dict[str, Any]:
        return self.render().to_wire()


class SimulatorEngine:
    """The in-memory AI Reserve: provider surface (§3) plus the /_sim control surface (§11)."""

    def __init__(
        self,
        config: SimConfig,
        clock: Clock,
        *,
        seed: int = 0,
        catalog: tuple[AcceleratorSpec, ...] = ACCELERATORS,
    ) -> None:
        self.config = config
        self.clock = clock
        self._seed = seed
        self._catalog = catalog
        self.reset()

    def reset(self) -> None:
        """Forget everything: a fresh provider with the same config, clock and seed."""
        self._w = World(self.config, self.clock.now(), seed=self._seed, catalog=self._catalog)
        self._billing = BillingBook(self._w, on_grace_expired=self._grace_expired)
        self._lifecycle = Lifecycle(self._w, self._billing)
        self._recovery = Recovery(self._w, self._billing)
        self._volumes = Volumes(self._w, self._billing)
        self._desk = QuoteDesk(self._w, billing=self._billing, volumes=self._volumes,
                               lifecycle=self._lifecycle)

    def _grace_expired(self, cluster: ClusterRecord) -> None:
        self._lifecycle.begin_terminate(cluster, "payment_grace_expired")

    def _settle(self) -> datetime:
        """Run everything that has happened by `clock.now()`, in order (timeline.py)."""
        self._w.timeline.run_until(self.clock.now())
        return self._w.now

    # --- catalog and quotes --------------------------------------------------------------

    def list_accelerators(self, location: str | None = None) -> list[Accelerator]:
        self._settle()
        wanted = [check_location(location)] if location is not None else [x.id for x in LOCATIONS]
        return [
            Accelerator(
                id=a.id,
                name=a.name,
                vendor=a.vendor,
                memory_gb=a.memory_gb,
                max_gpus_per_node=a.max_gpus_per_node,
                cluster_capable=a.cluster_capable,
                cluster=_price(a.cluster_cents),
                single_machine=_price(a.single_machine_cents),
                locations=[
                    LocationAvailability(id=loc, availability=self._desk.availability(a.id, loc))
                    for loc in wanted
                ],
            )
            for a in self._catalog
        ]

    def list_locations(self) -> list[Location]:
        self._settle()
        return [Location(id=loc.id, name=loc.name) for loc in LOCATIONS]

    def quote(self, req: QuoteRequest) -> Quote:
        self._settle()
        return self._desk.quote(req)

    def get_quote(self, quote_id: str) -> Quote:
        self._settle()
        return self._desk.get(quote_id)

    def launch(self, req: LaunchRequest) -> Cluster:
        """A provisioning cluster from an open quote (201), or 404/400/409/402/409 capacity."""
        self._settle()
        return self._render(self._desk.launch(req))

    # --- clusters ------------------------------------------------------------------------

    def _visible(self, cluster: ClusterRecord) -> bool:
        """Terminated (and failed) clusters stay readable for `retention_days`, then 404."""
        if cluster.ended_at is None:
            return True
        return self._w.now - cluster.ended_at < timedelta(days=self.config.retention_days)

    def _cluster(self, cluster_id: str) -> ClusterRecord:
        self._settle()
        cluster = self._w.clusters.get(cluster_id)
        if cluster is None or not self._visible(cluster):
            raise NotFound(f"No cluster {cluster_id[:40]!r}.", details={"resource": "cluster"})
        return cluster

    def _render(self, cluster: ClusterRecord) -> Cluster:
        return render.cluster(self._w, cluster, self._billing)

    def list_clusters(self, statuses: set[ClusterStatus] | None = None) -> list[Cluster]:
        return [listed.render() for listed in self.listed_clusters(statuses)]

    def listed_clusters(self, statuses: set[ClusterStatus] | None = None) -> list[Listed]:
        """The clusters `list_clusters` returns, each rendered only when asked (`to_wire`): a
        page of 200 out of thousands renders 200."""
        self._settle()
        chosen = [
            c for c in self._w.clusters.values()
            if self._visible(c) and (not statuses or c.status in statuses)
        ]
        chosen.sort(key=lambda c: (c.created_at, c.seq), reverse=True)
        return [Listed(c.id, lambda c=c: self._render(c)) for c in chosen]  # type: ignore[misc]

    def seed_clusters(self, *, count: int, shape: ShapeRequest) -> list[str]:
        """`count` clusters launched at once, each from its own quote, as the API would (for
        benchmarks and demos: `POST /_sim/clusters/seed`). They provision like any other."""
        ids = []
        for _ in range(count):
            quote = self.quote(QuoteRequest(shape=shape))
            ids.append(self._desk.launch(LaunchRequest(quote_id=quote.id)).id)
        return ids

    def get_cluster(self, cluster_id: str) -> Cluster:
        return self._render(self._cluster(cluster_id))

    def terminate(self, cluster_id: str) -> tuple[Cluster, bool]:
        """Always accepted: (cluster, True) if terminating starts now, (cluster, False) if no-op."""
        cluster = self._cluster(cluster_id)
        if cluster.status not in _LIVE:
            return self._render(cluster), False
        self._lifecycle.begin_terminate(cluster, "requested")
        return self._render(cluster), True

    def recover(self, cluster_id: str) -> Cluster:
        cluster = self._cluster(cluster_id)
        self._recovery.recover_now(cluster)
        return self._render(cluster)

    def set_auto_recovery(self, cluster_id: str, auto: bool) -> Cluster:
        cluster = self._cluster(cluster_id)
        if cluster.status not in _LIVE:
            raise InvalidState(
                f"Cluster {cluster.id} is {cluster.status.value}; automatic recovery can only "
                "be changed on a live cluster.",
                details={"status": cluster.status.value},
            )
        self._recovery.set_auto(cluster, auto)
        return self._render(cluster)

    def rename(self, cluster_id: str, name: str) -> Cluster:
        cluster = self._cluster(cluster_id)
        cluster.name = check_name(name)
        return self._render(cluster)

    def logs(self, cluster_id: str, *, node: int = 0, tail: int = 100,
             since: datetime | None = None, stream: str | None = None) -> Logs:
        cluster = self._cluster(cluster_id)
        last = len(cluster.nodes) - 1
        if not 0 <= node <= last:
            raise InvalidRequest(
                f"node must be a rank of this cluster, 0 to {last}; got {str(node)[:20]}.",
                details={"field": "node", "reason": "unknown_node", "min": 0, "max": last},
            )
        check_range(tail, field="tail", low=1, high=MAX_LOG_TAIL, what="lines")
        if stream is not None and stream not in logs.STREAMS:
            raise InvalidRequest(
                f"stream must be one of {', '.join(logs.STREAMS)}; got {stream[:20]!r}.",
                details={"field": "stream", "reason": "unknown_stream"},
            )
        if since is not None and since.tzinfo is None:
            raise InvalidRequest("since must carry a time zone (RFC 3339, e.g. …Z).",
                                 details={"field": "since", "reason": "naive_timestamp"})
        return logs.query(cluster, node=node, tail=tail, since=since, stream=stream)

    def events(self, cluster_id: str) -> list[Event]:
        """The cluster's feed (§2.7), oldest first."""
        return list(self._cluster(cluster_id).events)

    # --- volumes and account -------------------------------------------------------------

    def create_volume(self, req: VolumeCreateRequest) -> Volume:
        self._settle()
        past_due = self._billing.account_status() is PaymentStatus.PAST_DUE
        return render.volume(self._volumes.create(req, past_due=past_due))

    def list_volumes(self) -> list[Volume]:
        self._settle()
        return [render.volume(v) for v in self._volumes.listed()]

    def get_volume(self, volume_id: str) -> Volume:
        self._settle()
        return render.volume(self._volumes.get(volume_id))

    def update_volume(self, volume_id: str, req: VolumeUpdateRequest) -> Volume:
        self._settle()
        return render.volume(self._volumes.update(volume_id, req))

    def delete_volume(self, volume_id: str) -> Volume:
        self._settle()
        return render.volume(self._volumes.delete(volume_id))

    def account(self) -> Account:
        self._settle()
        return Account(
            balance_cents=self._w.balance_cents,
            payment_status=self._billing.account_status(),
            payment_grace_seconds=self.config.payment_grace_seconds,
        )

    # --- control surface (/_sim) ---------------------------------------------------------

    def advance(self, seconds: float) -> datetime:
        """Move the virtual clock forward and settle everything that happens meanwhile."""
        if not isinstance(self.clock, ManualClock):
            raise InvalidState(
                "This simulator runs on the real clock; start it with a virtual clock "
                "(--virtual-clock) to advance time.",
                details={"reason": "clock_not_virtual"},
            )
        if not (isinstance(seconds, int | float) and math.isfinite(seconds)
                and 0 <= seconds <= MAX_ADVANCE_SECONDS):
            raise InvalidRequest(
                f"seconds must be a number from 0 to {MAX_ADVANCE_SECONDS} (366 days); "
                f"got {str(seconds)[:30]}.",
                details={"field": "seconds", "reason": "out_of_range", "min": 0,
                         "max": MAX_ADVANCE_SECONDS},
            )
        self._settle()
        self.clock.advance(seconds)
        return self._settle()

    def _rank(self, cluster: ClusterRecord, rank: int) -> int:
        last = len(cluster.nodes) - 1
        if not 0 <= rank <= last:
            raise InvalidRequest(
                f"rank must be 0 to {last} for cluster {cluster.id}; got {str(rank)[:20]}.",
                details={"field": "rank", "reason": "unknown_node", "min": 0, "max": last},
            )
        return rank

    def append_log(self, cluster_id: str, rank: int, line: str,
                   stream: str = "stdout") -> Logs:
        """What the workload on node `rank` prints (a `/_sim` control): the line, as stored."""
        cluster = self._cluster(cluster_id)
        node = cluster.nodes[self._rank(cluster, rank)]
        self._w.log(node, stream, line)
        return logs.query(cluster, node=node.rank, tail=1, since=None, stream=None)

    def fail_node(self, cluster_id: str, rank: int,
                  mode: Literal["stopped", "unhealthy"]) -> Cluster:
        cluster = self._cluster(cluster_id)
        if mode not in ("stopped", "unhealthy"):
            raise InvalidRequest(f"mode must be stopped or unhealthy; got {str(mode)[:20]!r}.",
                                 details={"field": "mode", "reason": "invalid_mode"})
        node = cluster.nodes[self._rank(cluster, rank)]
        if cluster.status is ClusterStatus.PROVISIONING:
            self._lifecycle.fail_before_admission(cluster, node)
        elif cluster.status in (ClusterStatus.RUNNING, ClusterStatus.DEGRADED):
            if node.status is not NodeStatus.RUNNING:
                raise InvalidState(
                    f"Node {rank} of {cluster.id} is {node.status.value}; only a running node "
                    "can fail.",
                    details={"status": node.status.value, "rank": rank},
                )
            self._recovery.fail_node(cluster, node, NodeStatus(mode))
        else:
            raise InvalidState(
                f"Cluster {cluster.id} is {cluster.status.value}; its nodes cannot fail now.",
                details={"status": cluster.status.value},
            )
        return self._render(cluster)

    def set_recoverable(self, cluster_id: str, rank: int, value: bool) -> Cluster:
        """Whether the provider can bring this node back in a recovery attempt."""
        cluster = self._cluster(cluster_id)
        cluster.nodes[self._rank(cluster, rank)].recoverable = bool(value)
        return self._render(cluster)

    def set_capacity(self, *, accelerator: str, location: str,
                     availability: Availability | None = None,
                     placeable_nodes: int | None = None) -> None:
        """Override stock for one (accelerator, location); with neither value, restore config."""
        self._settle()
        if find_accelerator(accelerator, self._catalog) is None:
            raise InvalidRequest(f"Unknown accelerator {accelerator[:40]!r}.",
                                 details={"field": "accelerator", "reason": "unknown_accelerator"})
        check_location(location)
        key = (accelerator, location)
        if availability is None and placeable_nodes is None:
            self._w.availability[key] = self.config.availability.get(key, Availability.NONE)
            self._w.placeable_override.pop(key, None)
            return
        if availability is not None:
            level = Availability(availability)  # a plain string is fine; unknown → OTHER
            if level is Availability.OTHER:
                raise InvalidRequest("availability must be high, medium, low or none.",
                                     details={"field": "availability", "reason": "invalid"})
            self._w.availability[key] = level
        if placeable_nodes is not None:
            check_range(placeable_nodes, field="placeableNodes", low=0,
                        high=MAX_PLACEABLE_NODES, what="nodes")
            self._w.placeable_override[key] = placeable_nodes

    def set_balance(self, cents: int) -> Account:
        """Set the balance; it then pays whole unpaid debts, oldest first (§5.5)."""
        self._settle()
        check_range(cents, field="balanceCents", low=0, high=MAX_BALANCE_CENTS, what="cents")
        self._billing.set_balance(cents)
        return self.account()

    def ledger(self) -> list[LedgerEntry]:
        self._settle()
        return list(self._w.ledger)


def _price(cents: int | None) -> PerGpuPrice | None:
    return None if cents is None else PerGpuPrice(per_gpu_hourly_cents=cents)
