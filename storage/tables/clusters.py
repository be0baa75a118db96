"""A cluster's rows: the cluster itself (launched or adopted: its shape, price, state, what
was observed and what it accrued), its volumes, a terminate asked for and not yet known done,
and its readiness and idle follower."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.tables.base import EMPTY_LIST, Base, default, metadata
from storage.types import UtcDateTime


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
    last_reminded_hours: int = Field(sa_type=sa.Integer, sa_column_kwargs=default(sa.text("0")))
    accrued_at_degrade: int | None = Field(default=None, sa_type=sa.BigInteger)
    manual_recoveries: list[str] = Field(sa_type=sa.JSON, sa_column_kwargs=default(EMPTY_LIST))
    terminate_requested_by: str | None = Field(default=None, sa_type=sa.String)
    notify_channels: list[str] = Field(sa_type=sa.JSON, sa_column_kwargs=default(EMPTY_LIST))
    auto_recovery: bool = Field(sa_type=sa.Boolean, sa_column_kwargs=default(sa.false()))
    adopted: bool = Field(sa_type=sa.Boolean, sa_column_kwargs=default(sa.false()))
    # The spend envelope (added by 0003). A cluster stored before it has no lifetime, so its
    # stage is 'none' — nothing to warn about.
    lifetime_hours: int | None = Field(default=None, sa_type=sa.Integer)
    envelope_stage: str = Field(sa_type=sa.String, sa_column_kwargs=default(sa.text("'none'")))
    extended_by: str | None = Field(default=None, sa_type=sa.String)
    # A planned run (added by 0009): its envelope ends in termination.
    auto_terminate: bool = Field(sa_type=sa.Boolean, sa_column_kwargs=default(sa.false()))
    project: str | None = Field(default=None, index=True, sa_type=sa.String)  # added by 0017
    # Its request's workspace and organization: whose policy applies (added by 0024).
    team_id: str | None = Field(default=None, sa_type=sa.String)
    enterprise_id: str | None = Field(default=None, sa_type=sa.String)


CLUSTERS = metadata.tables["clusters"]


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
    prices: list[dict[str, Any]] = Field(sa_type=sa.JSON, sa_column_kwargs=default(EMPTY_LIST))
    deleted_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


VOLUMES = metadata.tables["volumes"]


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
    # 0020: the HTTP requests sent, in all (an attempt's client retries each count)
    requests: int = Field(sa_type=sa.Integer, sa_column_kwargs=default(sa.text("0")))
    next_attempt_at: datetime = Field(sa_type=UtcDateTime)
    last_error: str | None = Field(default=None, sa_type=sa.Text)
    warned_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    done_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)


TERMINATIONS = metadata.tables["terminations"]


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
    served: list[Any] = Field(sa_type=sa.JSON, sa_column_kwargs=default(EMPTY_LIST))
    rearmed_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    # 0014: the idle rule shares this follower (bot/domain/idle.py); `idle_state` is the
    # compare-and-set that makes each idle DM and each idle terminate happen once.
    idle: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON)
    idle_state: str = Field(index=True, sa_type=sa.String,
                            sa_column_kwargs=default(sa.text("'off'")))
    idle_episode: int = Field(sa_type=sa.Integer, sa_column_kwargs=default(sa.text("0")))
    idle_since: datetime | None = Field(default=None, sa_type=UtcDateTime)
    idle_fired_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    idle_terminate_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    last_line_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    kept_until: datetime | None = Field(default=None, sa_type=UtcDateTime)


READINESS = metadata.tables["readiness"]
