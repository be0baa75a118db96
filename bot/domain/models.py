"""Value objects the services, the repositories and the Block Kit builders share.

All frozen pydantic models; money in integer cents; datetimes aware UTC. Repositories return
these, never table rows; builders render these, never wire models.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from bot.domain import patterns


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Actor(Frozen):
    """Who clicked or typed: always the Slack user id from the signed payload."""

    user_id: str
    team_id: str | None = None
    enterprise_id: str | None = None  # an Enterprise Grid org; None outside one


class MessageRef(Frozen):
    """Where a message the bot edits lives."""

    channel_id: str
    ts: str


class ShapeSpec(Frozen):
    accelerator: str  # provider catalog id, e.g. "h100-sxm-80gb"
    gpus_per_node: int
    nodes: int

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


class QuoteSpec(Frozen):
    """What `/cluster quote` asked for, with the accelerator already resolved to a catalog id."""

    shape: ShapeSpec
    storage_gb: int | None = None
    volume_id: str | None = None
    location: str | None = None
    root_disk_gb: int | None = None
    orchestrator: str = "none"  # none | slurm | ray: the topology (node roles) AI Reserve gives
    planned_hours: int | None = None  # `hours=`: the run's planned length (its envelope)
    project: str | None = None  # `project=`: whose spend it is, beside the person's and team's
    template_id: str | None = None  # `template=`: the launch form is prefilled from it


class PriceLine(Frozen):
    label: str
    detail: str
    hourly_cents: int


class QuoteInfo(Frozen):
    """A provider quote as the bot keeps it: enough to render, approve and launch from."""

    id: str
    spec: QuoteSpec
    accelerator_name: str
    location: str
    hourly_cents: int
    per_gpu_hourly_cents: int
    lines: tuple[PriceLine, ...]
    availability: str
    created_at: datetime
    expires_at: datetime
    requested_by: str
    channel_id: str

    @property
    def daily_cents(self) -> int:
        return self.hourly_cents * 24

    def is_expired(self, now: datetime) -> bool:
        return now >= self.expires_at


class Alternative(Frozen):
    """Another accelerator's shape that fits the same GPU memory, from the catalog."""

    accelerator: str  # catalog id
    name: str
    gpus_per_node: int
    nodes: int
    memory_gb: int  # in all (per GPU × GPUs)
    gpu_hourly_cents: int  # the catalog's cluster GPU rate for the whole shape
    location: str  # the best-stocked location
    availability: str


class QuoteOutlook(Frozen):
    """What the quote card says beside the price, before anyone fills in a launch form: the
    spend policy's verdict on the person quoting, and where the shape has stock."""

    refused: str | None = None  # the rule(s) broken, with the numbers, in words
    override: bool = False  # broken, but an admin may approve it as an explicit override
    approvals_needed: int = 1  # 0: auto-approved by the spend policy
    auto_approve_below_cents: int | None = None
    single_machine_per_gpu_cents: int | None = None  # the provider's non-cluster rate
    stock_elsewhere: tuple[tuple[str, str], ...] = ()  # (location, availability) with stock
    gpu_hourly_cents: int | None = None  # the catalog's cluster GPU rate × this shape's GPUs
    alternatives: tuple[Alternative, ...] = ()  # other accelerators that hold the same memory
    lifetime_hours: int | None = None  # the envelope a request would be approved for
    envelope_terminates: bool = False  # it ends in termination (enforced, or a planned run)

    @property
    def can_request(self) -> bool:
        """A request can go on: nothing broken (or an admin may override) and stock exists."""
        return self.refused is None or self.override


DEFAULT_LIMIT_MINUTES = 45


class ReadinessRule(Frozen):
    """Readiness (bot/domain/readiness.py): the log line that says the workload serves, on rank 0
    or every rank, and how long to wait for it before asking the owner."""

    pattern: str
    all_ranks: bool = False
    limit_minutes: int = DEFAULT_LIMIT_MINUTES

    @property
    def limit(self) -> timedelta:
        return timedelta(minutes=self.limit_minutes)

    def ranks(self, nodes: int) -> tuple[int, ...]:
        return tuple(range(nodes)) if self.all_ranks else (0,)

    def matches(self, line: str) -> bool:
        return patterns.search(self.pattern, line)


class IdleRule(Frozen):
    """Idle rules (bot/domain/idle.py): idle after `quiet_minutes` without a new line (None: no
    quiet rule) on rank 0, or on every rank (`all_ranks`: idle only when none printed); done
    when a line matches `done`."""

    quiet_minutes: int | None = None
    all_ranks: bool = False
    done: str | None = None

    def ranks(self, nodes: int) -> tuple[int, ...]:
        return tuple(range(nodes)) if self.all_ranks else (0,)


class Workload(Frozen):
    """Launch settings that do not change the price (contract §2.3)."""

    name: str | None = None
    image: str | None = None
    docker_start_cmd: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    ports: tuple[str, ...] = ()
    ssh_keys: tuple[str, ...] = ()
    auto_recovery: bool = False
    readiness: ReadinessRule | None = None
    idle: IdleRule | None = None


class RequestStatus(enum.StrEnum):
    PENDING = "pending"  # waiting for an approver
    APPROVED = "approved"  # approved, launch not started yet
    LAUNCHING = "launching"  # intent recorded with its idempotency key; provider called
    LAUNCHED = "launched"  # a cluster exists
    LAUNCH_FAILED = "launch_failed"  # capacity / payment: kept so it can be retried
    REJECTED = "rejected"
    SUPERSEDED = "superseded"  # price or quote changed: a fresh request replaced it
    CANCELLED = "cancelled"
    WITHDRAWN = "withdrawn"  # the requester took it back while it was pending
    FAILED = "failed"  # the provider refused for good (e.g. invalid settings)
    WAITING = "waiting"  # approved, waiting for stock (bot/services/stock.py) until wait_until

    @property
    def is_open(self) -> bool:
        return self in (RequestStatus.PENDING, RequestStatus.APPROVED,
                        RequestStatus.LAUNCHING, RequestStatus.LAUNCH_FAILED,
                        RequestStatus.WAITING)


class LaunchRequest(Frozen):
    id: str
    quote_id: str
    requester_id: str
    team_id: str | None  # the requester's workspace, and its organization on Enterprise Grid:
    enterprise_id: str | None = None  # whose policy applies (bot/domain/places.py)
    channel_id: str
    workload: Workload
    status: RequestStatus
    hourly_cents: int  # the rate on the card the approver sees: the rate the launch must match
    idempotency_key: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    cluster_id: str | None = None
    last_error: str | None = None
    supersedes_id: str | None = None  # the request this one re-asks approval for
    previous_hourly_cents: int | None = None
    created_at: datetime
    updated_at: datetime
    # Spend policy (bot/domain/policy.py): how many distinct approvers this rate needs, whether
    # a rule was broken that only an admin may override (and which), the approved lifetime.
    approvals_needed: int = 1
    override_rule: str | None = None
    lifetime_hours: int | None = None
    decision_note: str | None = None  # the reason a rejecting approver gave
    # Wait for stock (bot/domain/stock.py): how long the requester will wait, until when, the
    # next re-quote and how many were made (the back-off).
    wait_hours: int | None = None
    wait_until: datetime | None = None
    wait_next_at: datetime | None = None
    wait_checks: int = 0
    project: str | None = None  # from the quote (`project=`): carried on to the cluster


class Decision(enum.StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class Approval(Frozen):
    request_id: str
    approver_id: str
    decision: Decision
    quote_id: str
    hourly_cents: int
    at: datetime


class ClusterState(enum.StrEnum):
    PROVISIONING = "provisioning"
    RUNNING = "running"
    DEGRADED = "degraded"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"

    @property
    def is_live(self) -> bool:
        return self in (ClusterState.PROVISIONING, ClusterState.RUNNING, ClusterState.DEGRADED,
                        ClusterState.TERMINATING)


class NodeState(Frozen):
    rank: int
    status: str
    last_recovered_at: datetime | None = None


class Observation(Frozen):
    """The parts of a provider cluster the watcher compares from one poll to the next
    (bot/domain/watch.py)."""

    status: ClusterState
    episode: int = 0
    episode_started_at: datetime | None = None
    attempts_used: int = 0
    attempts_max: int = 3
    recovery_state: str = "idle"  # idle | in_progress | exhausted
    auto_recovery: bool = False
    skipped: tuple[int, ...] = ()
    nodes: tuple[NodeState, ...] = ()
    accrued_cents: int = 0
    accrued_hours: int = 0
    termination_reason: str | None = None
    # The account's payment state as this cluster's billing shows it (contract §5.5).
    payment_status: str = "current"  # current | past_due
    grace_ends_at: datetime | None = None
    unpaid_cents: int = 0
    # Hour marks (readyAt + k·1 h) the provider passed without charging: no node was running
    # (contract §5.3). None when the provider's fields can't tell (not accruing, per-second).
    skipped_charges: int | None = None
    next_accrual_at: datetime | None = None
    # The instants of those uncharged marks, carried from poll to poll (bot/domain/watch.py).
    skipped_marks: tuple[datetime, ...] = ()
    # Sweeps in a row whose listing had this cluster but could not parse it, and since when
    # (the episode): the figures above are then the last known ones. A poll that reads it
    # again starts from the defaults, which ends the episode.
    unreadable_sweeps: int = 0
    unreadable_since: datetime | None = None

    @property
    def attempts_started(self) -> int:
        return self.attempts_used + (1 if self.recovery_state == "in_progress" else 0)

    @property
    def down_ranks(self) -> tuple[int, ...]:
        return tuple(n.rank for n in self.nodes if n.status != "running")


class ClusterRecord(Frozen):
    """A cluster the bot launched (or adopted) and keeps track of until it stops billing."""

    id: str
    request_id: str | None
    owner_id: str | None  # None: adopted and not claimed yet (the approvers are reminded)
    channel_id: str
    name: str | None
    shape: ShapeSpec
    accelerator_name: str
    location: str
    hourly_cents: int
    status: ClusterState
    nodes_ready: int = 0
    created_at: datetime
    ready_at: datetime | None = None
    terminated_at: datetime | None = None
    termination_reason: str | None = None
    accrued_cents: int = 0
    accrued_hours: int = 0
    volume_id: str | None = None
    volume_created_with_cluster: bool = False
    connection_sent_at: datetime | None = None
    last_error: str | None = None
    updated_at: datetime
    # Watching (bot/domain/watch.py): the last observation and what was said about it.
    observed: Observation | None = None
    last_reminded_hours: int = 0
    accrued_at_degrade: int | None = None
    manual_recoveries: tuple[str, ...] = ()  # "episode:attempt" the bot asked for
    terminate_requested_by: str | None = None
    notify_channels: tuple[str, ...] = ()
    auto_recovery: bool = False
    adopted: bool = False
    # The approved spend envelope: warned at 80 %, due at 100 %, optionally enforced.
    lifetime_hours: int | None = None
    envelope_stage: str = "none"  # none | warned | due | final | extended
    extended_by: str | None = None
    auto_terminate: bool = False  # a planned run (`hours=`): its envelope ends in terminate
    project: str | None = None  # from its request: spend by project, the project's budget
    # Its request's workspace and organization: whose policy applies (bot/domain/places.py);
    # None for a cluster found at AI Reserve (the top level of the policy).
    team_id: str | None = None
    enterprise_id: str | None = None


class AuditEntry(Frozen):
    """One line of the append-only audit trail: every state change and every refusal."""

    at: datetime
    actor_id: str | None  # None: the bot itself (a sweep, a timer)
    team_id: str | None = None
    action: str  # quote, request, approve, reject, launch, terminate, recover, extend, …
    subject_id: str  # the request, cluster, quote or volume it is about
    amount_cents: int | None = None  # the hourly rate or the sum concerned
    outcome: str  # ok | refused | failed
    detail: str = ""
    idempotency_key: str | None = None


class PriceStep(Frozen):
    """A volume's hourly price from `at` on (it changes when the volume grows)."""

    at: datetime
    hourly_cents: int


class VolumeRecord(Frozen):
    """A persistent volume the bot knows of: it bills on its own once no cluster holds it."""

    id: str
    owner_id: str | None
    cluster_id: str | None  # the cluster it was created with / last attached to
    name: str | None = None
    size_gb: int
    location: str
    hourly_cents: int  # what it costs alone (contract §5.4)
    status: str  # attached | available | deleting | deleted
    orphaned_since: datetime | None = None
    next_reminder_at: datetime | None = None
    updated_at: datetime
    # What its charges are replayed from (bot/domain/charges.py): when AI Reserve made it and
    # whether a launch did, the provider's monthly price per GB, each hourly price it had, and
    # when it stopped billing (deleting began).
    created_at: datetime | None = None
    created_with_cluster_id: str | None = None
    cents_per_gb_month: int | None = None
    prices: tuple[PriceStep, ...] = ()
    deleted_at: datetime | None = None

    @property
    def monthly_cents(self) -> int:
        """The provider's monthly figure (size × its price per GB-month), not the rounded
        hourly price × 730."""
        if self.cents_per_gb_month is not None:
            return self.size_gb * self.cents_per_gb_month
        return self.hourly_cents * 730


class NodeSummary(Frozen):
    rank: int
    role: str
    status: str
    gpus: int
    interconnect_address: str | None = None
    last_error: str | None = None
