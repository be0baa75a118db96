"""The money trail: the audit (every action on money, its amount and outcome, never updated)
and the extensions of a cluster's envelope awaiting approvers."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from storage.tables.base import Base, metadata
from storage.types import UtcDateTime


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


AUDIT = metadata.tables["audit"]


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


EXTENSIONS = metadata.tables["extensions"]
