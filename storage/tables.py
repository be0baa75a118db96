"""The database tables (sqlmodel) and the translation between their rows and the domain models.

Rows never leave `storage/`: the repositories read and write through the Core `Table` objects
below and hand back the frozen models of `bot.domain.models`. Nested value objects (QuoteSpec,
Workload, ShapeSpec, PriceLine tuples, Observation, NoticeFacts) live in JSON columns as their
pydantic JSON dump, so validating the stored JSON gives back a model equal to the one written.
Datetimes inside that JSON are ISO strings with an explicit UTC offset and come back as aware UTC,
like the `UtcDateTime` columns. Enums are stored as their string values (plain strings, not
database enums: a new state needs no migration), money as BIGINT cents, every datetime column
through `UtcDateTime`.

The tables use their own `MetaData` with a naming convention, so every constraint and index has a
stable, predictable name for migrations on both SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar, get_args

import sqlalchemy as sa
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python
from sqlmodel import Field, SQLModel

from storage.sealing import SealedJSON
from storage.types import UtcDateTime

M = TypeVar("M", bound=BaseModel)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Server defaults of the NOT NULL columns added after 0001 (the same ones the migration uses).
_EMPTY_LIST = sa.text("'[]'")


def _default(server_default: sa.TextClause | sa.ColumnElement[bool]) -> dict[str, Any]:
    return {"server_default": server_default}


class Base(SQLModel):
    """The bot's tables: a metadata of their own, apart from any other SQLModel user."""

    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class QuoteRow(Base, table=True):
    """A provider quote (`QuoteInfo`)."""

    __tablename__ = "quotes"

    id: str = Field(primary_key=True, sa_type=sa.String)
    spec: dict[str, Any] = Field(sa_type=sa.JSON)
    accelerator_name: str = Field(sa_type=sa.String)
    location: str = Field(sa_type=sa.String)
    hourly_cents: int = Field(sa_type=sa.BigInteger)
    per_gpu_hourly_cents: int = Field(sa_type=sa.BigInteger)
    lines: list[dict[str, Any]] = Field(sa_type=sa.JSON)
    availability: str = Field(sa_type=sa.String)
    created_at: datetime = Field(sa_type=UtcDateTime)
    expires_at: datetime = Field(sa_type=UtcDateTime)
    requested_by: str = Field(sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)


class RequestRow(Base, table=True):
    """A launch request (`LaunchRequest`) and its place in the request state machine."""

    __tablename__ = "requests"

    id: str = Field(primary_key=True, sa_type=sa.String)
    # One request per quote: a second "Request launch" on the same quote is refused.
    quote_id: str = Field(foreign_key="quotes.id", index=True, unique=True, sa_type=sa.String)
    requester_id: str = Field(sa_type=sa.String)
    team_id: str | None = Field(default=None, sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)
    workload: dict[str, Any] = Field(sa_type=SealedJSON)  # env values sealed (storage/sealing)
    status: str = Field(index=True, sa_type=sa.String)
    hourly_cents: int = Field(sa_type=sa.BigInteger)
    # UNIQUE allows any number of NULLs on SQLite and PostgreSQL alike: "unique when not null".
    idempotency_key: str | None = Field(default=None, unique=True, sa_type=sa.String)
    decided_by: str | None = Field(default=None, sa_type=sa.String)
    decided_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    # No foreign key: the request learns its cluster id before (or without) a cluster row.
    cluster_id: str | None = Field(default=None, sa_type=sa.String)
    last_error: str | None = Field(default=None, sa_type=sa.Text)
    supersedes_id: str | None = Field(default=None, foreign_key="requests.id", sa_type=sa.String)
    previous_hourly_cents: int | None = Field(default=None, sa_type=sa.BigInteger)
    created_at: datetime = Field(sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)
    # Spend policy (added by 0003): a request stored before the policy needed one approver.
    approvals_needed: int = Field(sa_type=sa.Integer, sa_column_kwargs=_default(sa.text("1")))
    override_rule: str | None = Field(default=None, sa_type=sa.Text)
    lifetime_hours: int | None = Field(default=None, sa_type=sa.Integer)
    decision_note: str | None = Field(default=None, sa_type=sa.Text)  # added by 0009
    # Wait for stock (added by 0016).
    wait_hours: int | None = Field(default=None, sa_type=sa.Integer)
    wait_until: datetime | None = Field(default=None, sa_type=UtcDateTime)
    wait_next_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    wait_checks: int = Field(sa_type=sa.Integer, sa_column_kwargs=_default(sa.text("0")))
    project: str | None = Field(default=None, sa_type=sa.String)  # added by 0017


class RequestQuoteRow(Base, table=True):
    """Every quote a request was ever priced with (added by 0004): the first one and each
    re-price. A cluster carries the quote it was launched from, so this is how any sweep finds
    the request (and owner) of a listed cluster, and a quote belongs to at most one request."""

    __tablename__ = "request_quotes"

    quote_id: str = Field(primary_key=True, foreign_key="quotes.id", sa_type=sa.String)
    request_id: str = Field(foreign_key="requests.id", index=True, sa_type=sa.String)
    added_at: datetime = Field(sa_type=UtcDateTime)


class LaunchIntentRow(Base, table=True):
    """A launch as it is sent to AI Reserve (`LaunchIntent`, added by 0004), stored before the
    call: the key and the exact body a replay sends again."""

    __tablename__ = "launch_intents"

    idempotency_key: str = Field(primary_key=True, sa_type=sa.String)
    request_id: str = Field(foreign_key="requests.id", index=True, sa_type=sa.String)
    quote_id: str = Field(sa_type=sa.String)
    body: dict[str, Any] = Field(sa_type=SealedJSON)  # env values sealed (storage/sealing)
    state: str = Field(sa_type=sa.String)
    # No foreign key: the intent learns the cluster id before (or without) a cluster row.
    cluster_id: str | None = Field(default=None, sa_type=sa.String)
    server_errors: int = Field(sa_type=sa.Integer)
    created_at: datetime = Field(sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)


class ApprovalRow(Base, table=True):
    """One approve/reject decision (`Approval`): an audit row, never updated."""

    __tablename__ = "approvals"

    id: int | None = Field(default=None, primary_key=True, sa_type=sa.Integer)
    request_id: str = Field(foreign_key="requests.id", index=True, sa_type=sa.String)
    approver_id: str = Field(sa_type=sa.String)
    decision: str = Field(sa_type=sa.String)
    # What the approver saw, kept as is (no foreign key: the audit must never fail to write).
    quote_id: str = Field(sa_type=sa.String)
    hourly_cents: int = Field(sa_type=sa.BigInteger)
    at: datetime = Field(sa_type=UtcDateTime)


class ClusterRow(Base, table=True):
    """A cluster the bot launched or adopted (`ClusterRecord`)."""

    __tablename__ = "clusters"

    id: str = Field(primary_key=True, sa_type=sa.String)
    request_id: str | None = Field(
        default=None, foreign_key="requests.id", index=True, sa_type=sa.String
    )
    # None: adopted and nobody claimed it yet.
    owner_id: str | None = Field(default=None, sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)
    name: str | None = Field(default=None, sa_type=sa.String)
    shape: dict[str, Any] = Field(sa_type=sa.JSON)
    accelerator_name: str = Field(sa_type=sa.String)
    location: str = Field(sa_type=sa.String)
    hourly_cents: int = Field(sa_type=sa.BigInteger)
    status: str = Field(index=True, sa_type=sa.String)
    nodes_ready: int = Field(sa_type=sa.Integer)
    created_at: datetime = Field(sa_type=UtcDateTime)
    ready_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    terminated_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    termination_reason: str | None = Field(default=None, sa_type=sa.Text)
    accrued_cents: int = Field(sa_type=sa.BigInteger)
    accrued_hours: int = Field(sa_type=sa.Integer)
    volume_id: str | None = Field(default=None, sa_type=sa.String)
    volume_created_with_cluster: bool = Field(sa_type=sa.Boolean)
    connection_sent_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    last_error: str | None = Field(default=None, sa_type=sa.Text)
    updated_at: datetime = Field(sa_type=UtcDateTime)
    # Watching (added by 0002). The server defaults let rows older than the columns migrate;
    # the repositories always write every column themselves.
    # none_as_null: "never observed" is SQL NULL, not the JSON text 'null'.
    observed: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON(none_as_null=True))
    last_reminded_hours: int = Field(sa_type=sa.Integer, sa_column_kwargs=_default(sa.text("0")))
    accrued_at_degrade: int | None = Field(default=None, sa_type=sa.BigInteger)
    manual_recoveries: list[str] = Field(sa_type=sa.JSON, sa_column_kwargs=_default(_EMPTY_LIST))
    terminate_requested_by: str | None = Field(default=None, sa_type=sa.String)
    notify_channels: list[str] = Field(sa_type=sa.JSON, sa_column_kwargs=_default(_EMPTY_LIST))
    auto_recovery: bool = Field(sa_type=sa.Boolean, sa_column_kwargs=_default(sa.false()))
    adopted: bool = Field(sa_type=sa.Boolean, sa_column_kwargs=_default(sa.false()))
    # The spend envelope (added by 0003). A cluster stored before it has no lifetime, so its
    # stage is 'none' — nothing to warn about.
    lifetime_hours: int | None = Field(default=None, sa_type=sa.Integer)
    envelope_stage: str = Field(sa_type=sa.String, sa_column_kwargs=_default(sa.text("'none'")))
    extended_by: str | None = Field(default=None, sa_type=sa.String)
    # A planned run (added by 0009): its envelope ends in termination.
    auto_terminate: bool = Field(sa_type=sa.Boolean, sa_column_kwargs=_default(sa.false()))
    project: str | None = Field(default=None, index=True, sa_type=sa.String)  # added by 0017


class NoticeRow(Base, table=True):
    """The outbox of watcher notices (`bot.domain.watch.Notice`).

    UNIQUE (cluster_id, key) is the exactly-once guard: a transition seen again (next poll,
    restart, second replica) finds its key taken and is not announced twice. The integer id
    orders the outbox: notices are delivered in the order they were recorded.
    """

    __tablename__ = "notices"
    __table_args__ = (sa.UniqueConstraint("cluster_id", "key"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=sa.Integer)
    cluster_id: str = Field(foreign_key="clusters.id", sa_type=sa.String)
    key: str = Field(sa_type=sa.String)
    kind: str = Field(sa_type=sa.String)
    facts: dict[str, Any] = Field(sa_type=sa.JSON)
    created_at: datetime = Field(sa_type=UtcDateTime)
    delivered_at: datetime | None = Field(default=None, index=True, sa_type=UtcDateTime)
    # Who is posting it now (added by 0005): one replica claims a notice before calling Slack;
    # a claim that outlives `claimed_until` (its replica died) may be taken over.
    claimed_by: str | None = Field(default=None, sa_type=sa.String)
    claimed_until: datetime | None = Field(default=None, sa_type=UtcDateTime)


class OutboxRow(Base, table=True):
    """Every other post, keyed by what it says to whom: claimed, posted, then marked delivered.

    `payload` (the message) is kept when another replica may have to post it after a failure;
    it is NULL for posts rebuilt at delivery time (SSH details are read from the provider then,
    never stored) and for message upserts (the key only guards the first chat.postMessage).
    """

    __tablename__ = "outbox"

    key: str = Field(primary_key=True, sa_type=sa.String)
    kind: str = Field(sa_type=sa.String)
    target: str = Field(sa_type=sa.String)  # a user (DM) or a channel
    payload: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON(none_as_null=True))
    created_at: datetime = Field(sa_type=UtcDateTime)
    claimed_by: str | None = Field(default=None, sa_type=sa.String)
    claimed_until: datetime | None = Field(default=None, sa_type=UtcDateTime)
    delivered_at: datetime | None = Field(default=None, index=True, sa_type=UtcDateTime)
    attempts: int = Field(sa_type=sa.Integer, sa_column_kwargs=_default(sa.text("0")))


class LeaseRow(Base, table=True):
    """Named leases: one holder at a time until `expires_at` (the sweeps run on one replica)."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, sa_type=sa.String)
    holder: str = Field(sa_type=sa.String)
    expires_at: datetime = Field(sa_type=UtcDateTime)
    # What the holder's code can do (bot/jobs/scheduler.py SWEEP_CAPABILITY): a replica that
    # can do more takes the lease over from one that can do less. 0: a build from before it.
    capability: int = Field(sa_type=sa.Integer, sa_column_kwargs=_default(sa.text("0")))


class SchemaCompatRow(Base, table=True):
    """What code may run on this schema, for builds that don't know its newest revisions: one
    row, rewritten by every migration run (storage/schema.py). Read by revision id only, so an
    older build can answer from it without knowing anything newer."""

    __tablename__ = "schema_compat"

    revision: str = Field(primary_key=True, sa_type=sa.String)  # the schema's revision
    oldest_compatible: str = Field(sa_type=sa.String)  # the oldest code head that runs on it
    migrated_at: datetime = Field(sa_type=UtcDateTime)


class DmChannelRow(Base, table=True):
    """The DM channel of each person (conversations.open once per user, not once per post)."""

    __tablename__ = "dm_channels"

    user_id: str = Field(primary_key=True, sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)


class VolumeRow(Base, table=True):
    """A persistent volume the bot knows of (`VolumeRecord`)."""

    __tablename__ = "volumes"

    id: str = Field(primary_key=True, sa_type=sa.String)
    owner_id: str | None = Field(default=None, sa_type=sa.String)
    # No foreign key: an adopted volume may name a cluster the bot never stored.
    cluster_id: str | None = Field(default=None, sa_type=sa.String)
    name: str | None = Field(default=None, sa_type=sa.String)
    size_gb: int = Field(sa_type=sa.Integer)
    location: str = Field(sa_type=sa.String)
    hourly_cents: int = Field(sa_type=sa.BigInteger)
    status: str = Field(sa_type=sa.String)
    orphaned_since: datetime | None = Field(default=None, sa_type=UtcDateTime)
    next_reminder_at: datetime | None = Field(default=None, index=True, sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)
    # What its charges are replayed from (added by 0012; bot/domain/charges.py).
    created_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    created_with_cluster_id: str | None = Field(default=None, sa_type=sa.String)
    cents_per_gb_month: int | None = Field(default=None, sa_type=sa.Integer)
    prices: list[dict[str, Any]] = Field(sa_type=sa.JSON, sa_column_kwargs=_default(_EMPTY_LIST))
    deleted_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class AuditRow(Base, table=True):
    """One line of the audit trail (`AuditEntry`): inserted, never updated or deleted.

    The integer id is the order of the trail (and the paging cursor); no foreign keys and no
    unique constraints, so recording a refusal about anything can never fail on a constraint.
    """

    __tablename__ = "audit"

    id: int | None = Field(default=None, primary_key=True, sa_type=sa.Integer)
    at: datetime = Field(index=True, sa_type=UtcDateTime)
    actor_id: str | None = Field(default=None, sa_type=sa.String)  # None: the bot itself
    team_id: str | None = Field(default=None, sa_type=sa.String)
    action: str = Field(sa_type=sa.String)
    subject_id: str = Field(index=True, sa_type=sa.String)
    amount_cents: int | None = Field(default=None, sa_type=sa.BigInteger)
    outcome: str = Field(sa_type=sa.String)
    detail: str = Field(sa_type=sa.Text)
    # Not unique: a retried launch is audited once per attempt under the same key.
    idempotency_key: str | None = Field(default=None, sa_type=sa.String)


class MessageRow(Base, table=True):
    """Where the Slack message for (kind, subject) lives, so the bot can edit it later."""

    __tablename__ = "messages"
    __table_args__ = (sa.UniqueConstraint("kind", "subject_id"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=sa.Integer)
    kind: str = Field(sa_type=sa.String)
    subject_id: str = Field(sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)
    ts: str = Field(sa_type=sa.String)
    created_at: datetime = Field(sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)


class ActionClaimRow(Base, table=True):
    """One button press claimed before it acts (`ActionClaim`): the key is the exactly-once
    guard; a row with no `done_at` is in progress (or its process died: see the lease)."""

    __tablename__ = "action_claims"

    action: str = Field(primary_key=True, sa_type=sa.String)
    subject_id: str = Field(primary_key=True, sa_type=sa.String)
    version: str = Field(primary_key=True, sa_type=sa.String)
    actor_id: str = Field(sa_type=sa.String)
    claimed_at: datetime = Field(sa_type=UtcDateTime)
    done_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    answer: str | None = Field(default=None, sa_type=sa.Text)


class TerminationRow(Base, table=True):
    """A terminate asked for and not yet known done (`TerminationIntent`, added by 0007).

    One row per cluster: a second terminate of the same cluster finds the first one's intent.
    `next_attempt_at` is also the claim: a replica takes an attempt by moving it forward with a
    compare-and-set, so two replicas never call AI Reserve for the same attempt.
    """

    __tablename__ = "terminations"

    cluster_id: str = Field(primary_key=True, foreign_key="clusters.id", sa_type=sa.String)
    requested_by: str = Field(sa_type=sa.String)
    requested_at: datetime = Field(sa_type=UtcDateTime)
    state: str = Field(index=True, sa_type=sa.String)
    attempts: int = Field(sa_type=sa.Integer)
    next_attempt_at: datetime = Field(sa_type=UtcDateTime)
    last_error: str | None = Field(default=None, sa_type=sa.Text)
    warned_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    done_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)


class ReadinessRow(Base, table=True):
    """A cluster's readiness check (`ReadinessWatch`, added by 0008): the rule from the launch
    form, each rank's log cursor, and whether Serving was said / the owner was asked; since
    0010 also the serving periods a lost node ended. Only rows in state 'watching' are
    followed, so the sweep stays bounded."""

    __tablename__ = "readiness"

    cluster_id: str = Field(primary_key=True, foreign_key="clusters.id", sa_type=sa.String)
    pattern: str | None = Field(default=None, sa_type=sa.Text)  # 0014: None, idle rule only
    all_ranks: bool = Field(sa_type=sa.Boolean)
    limit_minutes: int = Field(sa_type=sa.Integer)
    state: str = Field(index=True, sa_type=sa.String)
    cursors: dict[str, Any] = Field(sa_type=sa.JSON)
    matched_ranks: list[int] = Field(sa_type=sa.JSON)
    serving_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    deadline_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    prompts: int = Field(sa_type=sa.Integer)
    updated_at: datetime = Field(sa_type=UtcDateTime)
    # 0010: serving periods that ended when a node was lost; the restart read from again.
    served: list[Any] = Field(sa_type=sa.JSON, sa_column_kwargs=_default(_EMPTY_LIST))
    rearmed_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    # 0014: the idle rule shares this follower (bot/domain/idle.py); `idle_state` is the
    # compare-and-set that makes each idle DM and each idle terminate happen once.
    idle: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    idle_state: str = Field(index=True, sa_type=sa.String,
                            sa_column_kwargs=_default(sa.text("'off'")))
    idle_episode: int = Field(sa_type=sa.Integer, sa_column_kwargs=_default(sa.text("0")))
    idle_since: datetime | None = Field(default=None, sa_type=UtcDateTime)
    idle_fired_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    idle_terminate_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    last_line_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    kept_until: datetime | None = Field(default=None, sa_type=UtcDateTime)


class ExtensionRow(Base, table=True):
    """An extension of a cluster's envelope waiting for approvers (`Extension`, added by
    0011); applied, rejected, refused or stale once decided (a compare-and-set on
    `status`)."""

    __tablename__ = "extensions"

    id: str = Field(primary_key=True, sa_type=sa.String)
    cluster_id: str = Field(index=True, foreign_key="clusters.id", sa_type=sa.String)
    owner_id: str = Field(sa_type=sa.String)
    requested_by: str = Field(sa_type=sa.String)
    hours: int = Field(sa_type=sa.Integer)
    from_hours: int = Field(sa_type=sa.Integer)
    hourly_cents: int = Field(sa_type=sa.BigInteger)
    approvals_needed: int = Field(sa_type=sa.Integer)
    override_rule: str | None = Field(default=None, sa_type=sa.Text)
    approved_by: list[str] = Field(sa_type=sa.JSON)
    status: str = Field(index=True, sa_type=sa.String)
    decided_by: str | None = Field(default=None, sa_type=sa.String)
    note: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = Field(sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)


class DutyRow(Base, table=True):
    """Who is on a degraded episode (`Duty`, added by 0015): acknowledged, snoozed, and when
    the bot escalated it — each escalation stamped by a compare-and-set, so once per episode
    across replicas and restarts."""

    __tablename__ = "duties"

    cluster_id: str = Field(primary_key=True, foreign_key="clusters.id", sa_type=sa.String)
    episode: int = Field(primary_key=True, sa_type=sa.Integer)
    acknowledged_by: str | None = Field(default=None, sa_type=sa.String)
    acknowledged_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    snoozed_by: str | None = Field(default=None, sa_type=sa.String)
    snoozed_until: datetime | None = Field(default=None, sa_type=UtcDateTime)
    snoozes: int = Field(default=0, sa_type=sa.Integer)
    escalated_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    exhausted_escalated_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)


class DigestRow(Base, table=True):
    """A storm's one message in a channel (added by 0015). `open_channel` is the channel while
    the digest is open and NULL once closed: UNIQUE, so a channel has one open digest however
    many replicas open it at once."""

    __tablename__ = "digests"

    id: str = Field(primary_key=True, sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)
    open_channel: str | None = Field(default=None, unique=True, sa_type=sa.String)
    opened_at: datetime = Field(sa_type=UtcDateTime)
    closed_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    shown: str | None = Field(default=None, sa_type=sa.String)  # digest of the last rendering


class DigestMemberRow(Base, table=True):
    """A cluster in a storm's digest (added by 0015): joined once."""

    __tablename__ = "digest_members"

    digest_id: str = Field(primary_key=True, foreign_key="digests.id", sa_type=sa.String)
    cluster_id: str = Field(primary_key=True, foreign_key="clusters.id", sa_type=sa.String)
    joined_at: datetime = Field(sa_type=UtcDateTime)


class TemplateRow(Base, table=True):
    """A cluster template (`ClusterTemplate`, added by 0017): a name unique in its scope (a
    person's own, a team's, everyone's); what it prefills is one JSON document (`settings`),
    never an env value."""

    __tablename__ = "templates"
    __table_args__ = (sa.UniqueConstraint("scope", "name"),)

    id: str = Field(primary_key=True, sa_type=sa.String)
    scope: str = Field(index=True, sa_type=sa.String)
    name: str = Field(sa_type=sa.String)
    owner_id: str = Field(sa_type=sa.String)
    settings: dict[str, Any] = Field(sa_type=sa.JSON)
    created_at: datetime = Field(sa_type=UtcDateTime)


metadata = Base.metadata
QUOTES = metadata.tables["quotes"]
REQUESTS = metadata.tables["requests"]
APPROVALS = metadata.tables["approvals"]
CLUSTERS = metadata.tables["clusters"]
MESSAGES = metadata.tables["messages"]
NOTICES = metadata.tables["notices"]
VOLUMES = metadata.tables["volumes"]
AUDIT = metadata.tables["audit"]
ACTION_CLAIMS = metadata.tables["action_claims"]
REQUEST_QUOTES = metadata.tables["request_quotes"]
LAUNCH_INTENTS = metadata.tables["launch_intents"]
OUTBOX = metadata.tables["outbox"]
LEASES = metadata.tables["leases"]
DM_CHANNELS = metadata.tables["dm_channels"]
TERMINATIONS = metadata.tables["terminations"]
READINESS = metadata.tables["readiness"]
EXTENSIONS = metadata.tables["extensions"]
SCHEMA_COMPAT = metadata.tables["schema_compat"]
DUTIES = metadata.tables["duties"]
DIGESTS = metadata.tables["digests"]
DIGEST_MEMBERS = metadata.tables["digest_members"]
TEMPLATES = metadata.tables["templates"]


# -- rows <-> domain models ------------------------------------------------------------------


def row_values(model: BaseModel) -> dict[str, Any]:
    """Column values for a domain model: datetimes as they are, everything else as JSON data.

    The JSON dump turns enums into their values and nested models/tuples into dicts/lists, which
    is exactly what the String and JSON columns want (see `json_data` for nested datetimes).
    """
    dumped = model.model_dump(mode="python")
    return {
        name: value if isinstance(value := getattr(model, name), datetime)
        else json_data(dumped[name])
        for name in type(model).model_fields
    }


def field_values(
    model_cls: type[BaseModel], fields: dict[str, Any], *, forbidden: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Validate partial updates against the domain model's field types; return column values.

    An unknown or forbidden name is a programming error (TypeError, like a bad keyword); a value
    of the wrong type fails pydantic validation (ValueError), before anything reaches the database.
    """
    values: dict[str, Any] = {}
    for name, raw in fields.items():
        if name not in model_cls.model_fields or name in forbidden:
            raise TypeError(f"{model_cls.__name__} has no updatable field {name!r}")
        adapter = _adapter(model_cls, name)
        value = adapter.validate_python(raw)
        values[name] = value if isinstance(value, datetime) else json_data(
            adapter.dump_python(value, mode="python")
        )
    return values


# From this many rows on, `to_domain_many` converts in a worker thread, off the event loop.
MANY_ROWS = 64


def raw_columns(table: sa.Table) -> list[sa.ColumnElement[Any]]:
    """`table`'s columns as the driver returns them: no JSON decoding, no datetime parsing on
    the event loop (`to_domain_many` does it, on a thread for many rows)."""
    return [sa.type_coerce(c, sa.types.NullType()).label(c.name) for c in table.c]


async def to_domain_many(model_cls: type[M], table: sa.Table, rows: Sequence[sa.Row[Any]],
                         dialect: sa.Dialect) -> list[M]:
    """The domain models of `rows` read through `raw_columns(table)`, in one batch: the
    column types' own result processing, then `to_domain`; on a thread when there are many (a
    thousand cluster rows take tens of milliseconds of CPU the event loop must not spend)."""
    names = [c.name for c in table.c]
    processors = [(i, p) for i, c in enumerate(table.c)
                  if (p := c.type._cached_result_processor(dialect, None)) is not None]

    def convert() -> list[M]:
        models = []
        for row in rows:
            values = list(row)
            for i, process in processors:
                values[i] = process(values[i])
            models.append(to_domain(model_cls, dict(zip(names, values, strict=True))))
        return models

    return convert() if len(rows) < MANY_ROWS else await asyncio.to_thread(convert)


def to_domain(model_cls: type[M], row: sa.RowMapping | Mapping[str, Any], *,
              skip: tuple[str, ...] = ()) -> M:
    """Build the domain model from a row mapping (surrogate keys named in `skip` left out)."""
    data = dict(row)
    for key in skip:
        data.pop(key, None)
    model = model_cls.model_validate(data)
    # Datetimes parsed from JSON carry pydantic's own UTC tzinfo: make them the `UTC` every
    # other datetime of the bot has (`UtcDateTime` columns already are).
    in_utc: M = _in_utc(model)
    return in_utc


def json_data(value: Any) -> Any:
    """JSON-ready data for a python-mode dump; nested datetimes become ISO strings in UTC.

    pydantic would write an aware datetime with whatever offset it has and a naive one as is;
    like `UtcDateTime`, a naive datetime is refused and every other one stored as UTC, so the
    JSON says which instant it means and reads back as aware UTC.
    """
    return to_jsonable_python(_utc_iso(value))


def _utc_iso(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: pass an aware one")
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {key: _utc_iso(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_utc_iso(item) for item in value]
    return value


def _in_utc(value: Any) -> Any:
    """`value` with every datetime inside it (models, tuples, dicts) converted to `UTC`."""
    if isinstance(value, datetime):
        return value if value.tzinfo is UTC else value.astimezone(UTC)
    if isinstance(value, BaseModel):
        changes = {}
        for name in _timed_fields(type(value)):
            old = getattr(value, name)
            if (new := _in_utc(old)) is not old:
                changes[name] = new
        return value.model_copy(update=changes) if changes else value
    if isinstance(value, tuple):
        items = tuple(_in_utc(item) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = {key: _in_utc(item) for key, item in value.items()}
        return value if all(pairs[k] is value[k] for k in value) else pairs
    return value


@cache
def _timed_fields(model_cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of `model_cls` whose type may hold a datetime (at any depth): the only ones
    `_in_utc` needs to look into (a cluster row has ~35 fields, ~8 of them such)."""
    return tuple(name for name, f in model_cls.model_fields.items() if _may_hold_time(f.annotation))


def _may_hold_time(annotation: Any, seen: frozenset[Any] = frozenset()) -> bool:
    if annotation is datetime or annotation is Any:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation not in seen and any(
            _may_hold_time(f.annotation, seen | {annotation})
            for f in annotation.model_fields.values())
    return any(_may_hold_time(arg, seen) for arg in get_args(annotation))


@cache
def _adapter(model_cls: type[BaseModel], name: str) -> TypeAdapter[Any]:
    annotation = model_cls.model_fields[name].annotation
    assert annotation is not None  # every field of a domain model is annotated
    return TypeAdapter(annotation)
