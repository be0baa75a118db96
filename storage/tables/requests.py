"""A launch request's rows: the quotes it was priced with (every re-price too), the request and
its place in the request state machine, the launch as sent to AI Reserve (stored before the
call), and each approver's decision."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.sealing import SealedJSON
from storage.tables.base import Base, default, metadata
from storage.types import UtcDateTime


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


QUOTES = metadata.tables["quotes"]


class RequestRow(Base, table=True):
    """A launch request (`LaunchRequest`) and its place in the request state machine."""

    __tablename__ = "requests"

    id: str = Field(primary_key=True, sa_type=sa.String)
    # One request per quote: a second "Request launch" on the same quote is refused.
    quote_id: str = Field(foreign_key="quotes.id", index=True, unique=True, sa_type=sa.String)
    requester_id: str = Field(sa_type=sa.String)
    team_id: str | None = Field(default=None, sa_type=sa.String)
    enterprise_id: str | None = Field(default=None, sa_type=sa.String)  # added by 0024
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
    approvals_needed: int = Field(sa_type=sa.Integer, sa_column_kwargs=default(sa.text("1")))
    override_rule: str | None = Field(default=None, sa_type=sa.Text)
    lifetime_hours: int | None = Field(default=None, sa_type=sa.Integer)
    decision_note: str | None = Field(default=None, sa_type=sa.Text)  # added by 0009
    # Wait for stock (added by 0016).
    wait_hours: int | None = Field(default=None, sa_type=sa.Integer)
    wait_until: datetime | None = Field(default=None, sa_type=UtcDateTime)
    wait_next_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    wait_checks: int = Field(sa_type=sa.Integer, sa_column_kwargs=default(sa.text("0")))
    project: str | None = Field(default=None, sa_type=sa.String)  # added by 0017


REQUESTS = metadata.tables["requests"]


class RequestQuoteRow(Base, table=True):
    """Every quote a request was ever priced with (added by 0004): the first one and each
    re-price. A cluster carries the quote it was launched from, so this is how any sweep finds
    the request (and owner) of a listed cluster, and a quote belongs to at most one request."""

    __tablename__ = "request_quotes"

    quote_id: str = Field(primary_key=True, foreign_key="quotes.id", sa_type=sa.String)
    request_id: str = Field(foreign_key="requests.id", index=True, sa_type=sa.String)
    added_at: datetime = Field(sa_type=UtcDateTime)


REQUEST_QUOTES = metadata.tables["request_quotes"]


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


LAUNCH_INTENTS = metadata.tables["launch_intents"]


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


APPROVALS = metadata.tables["approvals"]
