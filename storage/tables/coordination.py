"""What keeps replicas and builds in step: the named leases (one sweeper at a time), the
button presses claimed before they act, and the schema's record of what code runs on it."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from storage.tables.base import Base, default, metadata
from storage.types import UtcDateTime


class LeaseRow(Base, table=True):
    """Named leases: one holder at a time until `expires_at` (the sweeps run on one replica)."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, sa_type=sa.String)
    holder: str = Field(sa_type=sa.String)
    expires_at: datetime = Field(sa_type=UtcDateTime)
    # What the holder's code can do (bot/jobs/scheduler.py SWEEP_CAPABILITY): a replica that
    # can do more takes the lease over from one that can do less. 0: a build from before it.
    capability: int = Field(sa_type=sa.Integer, sa_column_kwargs=default(sa.text("0")))


LEASES = metadata.tables["leases"]


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


ACTION_CLAIMS = metadata.tables["action_claims"]


class SchemaCompatRow(Base, table=True):
    """What code may run on this schema, for builds that don't know its newest revisions: one
    row, rewritten by every migration run (storage/schema.py). Read by revision id only, so an
    older build can answer from it without knowing anything newer."""

    __tablename__ = "schema_compat"

    revision: str = Field(primary_key=True, sa_type=sa.String)  # the schema's revision
    oldest_compatible: str = Field(sa_type=sa.String)  # the oldest code head that runs on it
    migrated_at: datetime = Field(sa_type=UtcDateTime)


SCHEMA_COMPAT = metadata.tables["schema_compat"]
