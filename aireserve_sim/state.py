"""The engine's mutable, in-memory state and the shared recorders (events, ledger, node logs).

Records here are plain mutable dataclasses; `render.py` turns them into the frozen wire models.
`World` is the single container the lifecycle, billing and recovery parts share.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from aireserve_sim.catalog import ACCELERATORS, AcceleratorSpec
from aireserve_sim.config import SimConfig
from aireserve_sim.timeline import Timeline
from bot.reserve.schemas import (
    Availability,
    ClusterStatus,
    Event,
    NodeStatus,
    Quote,
    Rate,
    Shape,
    VolumeStatus,
)

_ID_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class LedgerEntry:
    """One money movement: an accrual (paid or not), a volume hour, a payment, a top-up."""

    at: datetime
    kind: str  # cluster_hour | cluster_seconds | volume_hour | payment | balance_set
    resource_id: str
    cents: int
    paid: bool
    note: str


@dataclass
class Debt:
    """Unpaid charges of one cluster or volume (contract §5.5)."""

    unpaid_cents: int = 0
    first_unpaid_at: datetime | None = None
    grace_ends_at: datetime | None = None
    generation: int = 0  # bumped when the debt is settled: cancels a pending grace expiry


@dataclass
class ChargeRecord:
    """A cluster's last hourly charge, kept so a terminate at that same instant can undo it."""

    at: datetime
    entry: LedgerEntry
    opened_debt: bool  # this charge made the resource past due (and scheduled its grace)
    event_ids: frozenset[str]
    prev_paid_until: datetime | None  # the attached volume's paid_until before this charge


@dataclass
class NodeRecord:
    """One node of a cluster; its address and SSH endpoint never change."""

    rank: int
    role: str
    gpus: int
    interconnect_address: str
    ssh_host: str
    ssh_port: int
    status: NodeStatus = NodeStatus.PROVISIONING
    last_error: str | None = None
    last_recovered_at: datetime | None = None
    recoverable: bool = True
    replaced: bool = False  # the one pre-admission re-placement has been used
    generation: int = 0  # bumped on every re-boot/terminate: cancels a stale boot
    logs: list[tuple[datetime, str, str]] = field(default_factory=list)


@dataclass
class RecoveryRecord:
    """The cluster's recovery episode and the attempt in flight (§6)."""

    auto: bool = False
    in_progress: bool = False
    exhausted: bool = False
    episode: int = 0
    episode_started_at: datetime | None = None
    attempts_used: int = 0
    attempt_started_at: datetime | None = None
    attempt_manual: bool = False
    last_attempt_at: datetime | None = None
    last_error: str | None = None
    skipped_nodes: list[int] = field(default_factory=list)
    generation: int = 0  # bumped when an attempt is abandoned (terminate)
    health_pass_at: datetime | None = None  # the pass already scheduled for this cluster


@dataclass
class ClusterBilling:
    """A cluster's accruals and debt (§5); see billing.py for the rules."""

    accrued_hours: int = 0
    accrued_cents: int = 0
    next_anchor: int = 0  # index k of the next readyAt + k·3600 accrual
    accruing: bool = False  # between readyAt and the start of terminating
    # second mode: billable seconds banked so far, and since when the meter is running
    banked_seconds: float = 0.0
    meter_since: datetime | None = None
    booked_cents: int = 0
    debt: Debt = field(default_factory=Debt)
    last_charge: ChargeRecord | None = None


@dataclass
class ClusterRecord:
    """The engine's cluster; `render.cluster` turns it into the wire model."""

    id: str
    seq: int
    quote_id: str
    name: str | None
    shape: Shape
    orchestrator: str
    location: str
    locked_rate: Rate
    created_at: datetime
    nodes: list[NodeRecord]
    image: str | None
    docker_start_cmd: list[str] | None
    env_keys: list[str]
    ports: list[str]
    ssh_key_count: int
    volume_id: str | None
    volume_created_with_cluster: bool
    status: ClusterStatus = ClusterStatus.PROVISIONING
    ready_at: datetime | None = None
    terminated_at: datetime | None = None
    ended_at: datetime | None = None  # terminated or failed: the retention clock starts here
    termination_reason: str | None = None
    last_error: str | None = None
    recovery: RecoveryRecord = field(default_factory=RecoveryRecord)
    billing: ClusterBilling = field(default_factory=ClusterBilling)
    events: list[Event] = field(default_factory=list)

    @property
    def any_node_running(self) -> bool:
        return any(n.status is NodeStatus.RUNNING for n in self.nodes)


@dataclass
class VolumeRecord:
    """The engine's volume; `render.volume` turns it into the wire model."""

    id: str
    seq: int
    name: str | None
    size_gb: int
    location: str
    created_at: datetime
    status: VolumeStatus = VolumeStatus.AVAILABLE
    attached_cluster_id: str | None = None
    created_with_cluster_id: str | None = None
    deleted_at: datetime | None = None
    paid_until: datetime | None = None  # the end of the last hour already paid (own or cluster)
    covered: bool = False  # an accruing cluster pays for it now
    tick_generation: int = 0  # only the newest scheduled volume hour is live
    debt: Debt = field(default_factory=Debt)


class World:
    """Everything the engine holds; rebuilt whole by `reset()`."""

    def __init__(
        self,
        config: SimConfig,
        start: datetime,
        *,
        seed: int,
        catalog: tuple[AcceleratorSpec, ...] = ACCELERATORS,
    ) -> None:
        self.config = config
        self.catalog = catalog
        self.timeline = Timeline(start)
        self.rng = random.Random(seed)
        self.balance_cents = config.initial_balance_cents
        self.quotes: dict[str, Quote] = {}
        self.clusters: dict[str, ClusterRecord] = {}
        self.volumes: dict[str, VolumeRecord] = {}
        self.ledger: list[LedgerEntry] = []
        self.availability: dict[tuple[str, str], Availability] = dict(config.availability)
        self.placeable_override: dict[tuple[str, str], int] = {}
        self._ids: set[str] = set()
        self._event_seq = 0
        self._seq = 0
        self.node_counter = 0  # for distinct SSH endpoints across the whole simulator

    @property
    def now(self) -> datetime:
        return self.timeline.now

    def new_id(self, prefix: str) -> str:
        while True:
            candidate = prefix + "".join(self.rng.choices(_ID_ALPHABET, k=8))
            if candidate not in self._ids:
                self._ids.add(candidate)
                return candidate

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def emit(self, cluster: ClusterRecord, kind: str, **data: Any) -> None:
        """Record a feed event (§2.7) at the current simulated instant; ids sort in time order."""
        self._event_seq += 1
        cluster.events.append(
            Event(
                id=f"evt_{self._event_seq:010d}",
                type=kind,
                cluster_id=cluster.id,
                at=self.now,
                data=data,
            )
        )

    def log(self, node: NodeRecord, stream: str, line: str) -> None:
        """Append a node log line, stamped to the second (the wire's precision, see logs.py)."""
        node.logs.append((self.now.replace(microsecond=0), stream, line))

    def book(self, *, kind: str, resource_id: str, cents: int, paid: bool, note: str
             ) -> LedgerEntry:
        entry = LedgerEntry(self.now, kind, resource_id, cents, paid, note)
        self.ledger.append(entry)
        return entry

    def unbook(self, entry: LedgerEntry) -> None:
        """Take back one entry (by identity: equal-looking entries may exist)."""
        for i in range(len(self.ledger) - 1, -1, -1):
            if self.ledger[i] is entry:
                del self.ledger[i]
                return

    def after(self, seconds: float) -> datetime:
        return self.now + timedelta(seconds=seconds)
