"""What people set up and take on: who is on a degraded episode (acknowledged, snoozed,
escalated) and the cluster templates of a person, a team or everyone."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.tables.base import Base, metadata
from storage.types import UtcDateTime


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


DUTIES = metadata.tables["duties"]


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


TEMPLATES = metadata.tables["templates"]
