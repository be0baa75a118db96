"""AI Reserve wire models (contract v1, §2).

camelCase on the wire, snake_case in Python. Money is integer US cents; every timestamp is an
aware UTC datetime, written as RFC 3339 with a `Z` and second precision.

Two families:
- responses (`Wire`): tolerant — unknown fields are ignored and unknown enum values become
  `OTHER`, so the provider can add things without breaking us (contract §1, "Versioning");
- requests (`WireRequest`): strict — unknown fields and wrong types are refused, which is how the
  simulator answers `400 invalid_request` and how the client catches its own mistakes.

The simulator builds its responses from these same models, so both sides share one definition.
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictBool,
    StrictInt,
    StrictStr,
)
from pydantic.alias_generators import to_camel


def _to_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def format_timestamp(value: datetime) -> str:
    """RFC 3339, UTC, `Z` suffix, second precision (contract §1)."""
    return value.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


UtcDatetime = Annotated[
    AwareDatetime, AfterValidator(_to_utc), PlainSerializer(format_timestamp, return_type=str)
]
"""An aware datetime, normalised to UTC; naive values are refused."""


class _TolerantEnum(enum.StrEnum):
    """A wire enum: values the provider adds later decode as `OTHER` instead of failing."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        return cls("other")


class Availability(_TolerantEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    NONE = "none"
    OTHER = "other"


class ClusterStatus(_TolerantEnum):
    PROVISIONING = "provisioning"
    RUNNING = "running"
    DEGRADED = "degraded"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"
    OTHER = "other"

    @property
    def is_live(self) -> bool:
        """Still holds (or is about to hold) hardware: watch it, and it may bill."""
        return self in (ClusterStatus.PROVISIONING, ClusterStatus.RUNNING, ClusterStatus.DEGRADED)


class NodeStatus(_TolerantEnum):
    PROVISIONING = "provisioning"
    RUNNING = "running"
    STOPPED = "stopped"
    UNHEALTHY = "unhealthy"
    RECOVERING = "recovering"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    OTHER = "other"


class RecoveryState(_TolerantEnum):
    IDLE = "idle"
    IN_PROGRESS = "in_progress"
    EXHAUSTED = "exhausted"
    OTHER = "other"


class PaymentStatus(_TolerantEnum):
    CURRENT = "current"
    PAST_DUE = "past_due"
    OTHER = "other"


class VolumeStatus(_TolerantEnum):
    CREATING = "creating"
    AVAILABLE = "available"
    ATTACHED = "attached"
    DELETING = "deleting"
    DELETED = "deleted"
    OTHER = "other"


class BillingIncrement(_TolerantEnum):
    HOUR = "hour"
    SECOND = "second"
    OTHER = "other"


Orchestrator = Literal["none", "slurm", "ray"]


class Wire(BaseModel):
    """A response object: tolerant of additions, immutable once parsed."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class WireRequest(BaseModel):
    """A request body: strict, so a typo or a wrong type never passes silently."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- catalog -------------------------------------------------------------------------------


class PerGpuPrice(Wire):
    per_gpu_hourly_cents: int


class LocationAvailability(Wire):
    id: str
    availability: Availability


class Accelerator(Wire):
    id: str
    name: str
    vendor: str
    memory_gb: int
    max_gpus_per_node: int
    cluster_capable: bool
    cluster: PerGpuPrice | None = None
    single_machine: PerGpuPrice | None = None
    locations: list[LocationAvailability] = Field(default_factory=list)


class Location(Wire):
    id: str
    name: str


# --- quotes --------------------------------------------------------------------------------


class Shape(Wire):
    accelerator: str
    gpus_per_node: int
    nodes: int

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


class StorageSpec(Wire):
    size_gb: int


class Rate(Wire):
    hourly_cents: int
    per_gpu_hourly_cents: int
    currency: str = "USD"
    billing_increment: BillingIncrement = BillingIncrement.HOUR


class GpuLine(Wire):
    count: int
    per_gpu_hourly_cents: int
    hourly_cents: int


class RootDiskLine(Wire):
    count: int
    size_gb_each: int
    cents_per_gb_month: int
    hourly_cents: int


class SharedVolumeLine(Wire):
    size_gb: int
    cents_per_gb_month: int
    hourly_cents: int


class InterconnectLine(Wire):
    hourly_cents: int = 0
    included: bool = True


class Breakdown(Wire):
    gpus: GpuLine
    root_disks: RootDiskLine
    shared_volume: SharedVolumeLine | None = None
    interconnect: InterconnectLine = Field(default_factory=InterconnectLine)

    @property
    def total_cents(self) -> int:
        volume = self.shared_volume.hourly_cents if self.shared_volume else 0
        return (
            self.gpus.hourly_cents + self.root_disks.hourly_cents + volume
            + self.interconnect.hourly_cents
        )


class Quote(Wire):
    id: str
    shape: Shape
    total_gpus: int
    orchestrator: str = "none"
    location: str
    root_disk_gb: int
    storage: StorageSpec | None = None
    volume_id: str | None = None
    rate: Rate
    breakdown: Breakdown
    availability: Availability
    created_at: UtcDatetime
    expires_at: UtcDatetime
    launched_cluster_id: str | None = None


# --- requests ------------------------------------------------------------------------------


class ShapeRequest(WireRequest):
    accelerator: StrictStr
    gpus_per_node: StrictInt
    nodes: StrictInt


class StorageRequest(WireRequest):
    size_gb: StrictInt


class QuoteRequest(WireRequest):
    shape: ShapeRequest
    orchestrator: Orchestrator | None = None
    location: StrictStr | None = None
    root_disk_gb: StrictInt | None = None
    storage: StorageRequest | None = None
    volume_id: StrictStr | None = None


class RecoverySetting(WireRequest):
    auto: StrictBool


class LaunchRequest(WireRequest):
    quote_id: StrictStr
    name: StrictStr | None = None
    image: StrictStr | None = None
    docker_start_cmd: list[StrictStr] | None = None
    env: dict[StrictStr, StrictStr] | None = None
    ports: list[StrictStr] | None = None
    ssh_keys: list[StrictStr] | None = None
    recovery: RecoverySetting | None = None
    # Quote-bound fields: may be repeated, must then equal the quote (else 409 price_changed).
    shape: ShapeRequest | None = None
    orchestrator: Orchestrator | None = None
    location: StrictStr | None = None
    root_disk_gb: StrictInt | None = None
    storage: StorageRequest | None = None
    volume_id: StrictStr | None = None


class RenameRequest(WireRequest):
    name: StrictStr


class VolumeCreateRequest(WireRequest):
    name: StrictStr | None = None
    size_gb: StrictInt
    location: StrictStr


class VolumeUpdateRequest(WireRequest):
    name: StrictStr | None = None
    size_gb: StrictInt | None = None


class EmptyRequest(WireRequest):
    """`POST …/recover` takes `{}`."""


# --- clusters ------------------------------------------------------------------------------


class Node(Wire):
    rank: int
    role: str
    status: NodeStatus
    gpus: int
    interconnect_address: str | None = None
    ssh_host: str | None = None
    ssh_port: int | None = None
    last_error: str | None = None
    last_recovered_at: UtcDatetime | None = None


class Ssh(Wire):
    host: str
    port: int
    user: str
    command: str


class PrimaryConnection(Wire):
    rank: int
    ssh: Ssh


class NodeConnection(Wire):
    rank: int
    ssh: Ssh | None = None
    interconnect_address: str | None = None


class Connections(Wire):
    primary: PrimaryConnection | None = None
    nodes: list[NodeConnection] = Field(default_factory=list)


class Recovery(Wire):
    auto: bool = False
    state: RecoveryState = RecoveryState.IDLE
    episode: int = 0
    episode_started_at: UtcDatetime | None = None
    attempts_used: int = 0
    attempts_max: int = 3
    last_attempt_at: UtcDatetime | None = None
    last_error: str | None = None
    skipped_nodes: list[int] = Field(default_factory=list)


class Billing(Wire):
    accrued_hours: int = 0
    accrued_cents: int = 0
    unpaid_cents: int = 0
    payment_status: PaymentStatus = PaymentStatus.CURRENT
    next_accrual_at: UtcDatetime | None = None
    grace_ends_at: UtcDatetime | None = None


class ClusterVolume(Wire):
    id: str
    size_gb: int
    mount_path: str
    created_with_cluster: bool


class Workload(Wire):
    image: str | None = None
    docker_start_cmd: list[str] | None = None
    env_keys: list[str] = Field(default_factory=list)
    ports: list[str] = Field(default_factory=list)
    ssh_key_count: int = 0


class Cluster(Wire):
    id: str
    name: str | None = None
    quote_id: str
    status: ClusterStatus
    shape: Shape
    total_gpus: int
    orchestrator: str = "none"
    location: str
    created_at: UtcDatetime
    ready_at: UtcDatetime | None = None
    terminated_at: UtcDatetime | None = None
    termination_reason: str | None = None
    last_error: str | None = None
    locked_rate: Rate
    # Required: a cluster without its billing is unreadable, not free. A default here once made
    # a malformed item show "$0 accrued"; now the item is skipped and its last figures kept.
    billing: Billing
    nodes: list[Node] = Field(default_factory=list)
    connections: Connections | None = None
    recovery: Recovery = Field(default_factory=Recovery)
    volume: ClusterVolume | None = None
    workload: Workload = Field(default_factory=Workload)

    @property
    def down_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.status is not NodeStatus.RUNNING]


# --- volumes, account, logs, events --------------------------------------------------------


class VolumeBilling(Wire):
    cents_per_gb_month: int
    hourly_cents: int
    covered_by_cluster: bool


class Volume(Wire):
    id: str
    name: str | None = None
    size_gb: int
    location: str
    status: VolumeStatus
    attached_cluster_id: str | None = None
    mount_path: str = "/workspace"
    created_with_cluster_id: str | None = None
    billing: VolumeBilling
    created_at: UtcDatetime
    deleted_at: UtcDatetime | None = None


class SelfServeLimits(Wire):
    max_nodes: int = 8
    max_gpus_per_node: int = 8


class Account(Wire):
    balance_cents: int
    payment_status: PaymentStatus
    payment_grace_seconds: int
    self_serve: SelfServeLimits = Field(default_factory=SelfServeLimits)


class LogLine(Wire):
    ts: UtcDatetime
    stream: str
    line: str


class Logs(Wire):
    cluster_id: str
    node: int
    lines: list[LogLine]
    next_since: UtcDatetime | None = None


class Event(Wire):
    id: str
    type: str
    cluster_id: str
    at: UtcDatetime
    data: dict[str, Any] = Field(default_factory=dict)


class Health(Wire):
    ok: bool
    version: str


T = TypeVar("T")


class Page(Wire, Generic[T]):
    data: list[T]
    next_cursor: str | None = None


class ErrorDetail(Wire):
    code: str
    message: str
    status: int
    request_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    retry_after_seconds: int | None = None


class ErrorBody(Wire):
    error: ErrorDetail
