"""initial schema: quotes, requests, approvals, clusters, messages

Revision ID: 0001
Revises:
Create Date: 2026-11-29 12:00:00

Written by hand. Datetimes are `DateTime(timezone=True)` here: the application's `UtcDateTime`
decorator only changes what Python sees, not the column, and a migration must not depend on
application code that may change after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = False  # the first schema: there is no previous release


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "quotes",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("accelerator_name", sa.String(), nullable=False),
        sa.Column("location", sa.String(), nullable=False),
        sa.Column("hourly_cents", sa.BigInteger(), nullable=False),
        sa.Column("per_gpu_hourly_cents", sa.BigInteger(), nullable=False),
        sa.Column("lines", sa.JSON(), nullable=False),
        sa.Column("availability", sa.String(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.Column("requested_by", sa.String(), nullable=False),
        sa.Column("channel_id", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_quotes"),
    )
    op.create_table(
        "requests",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("quote_id", sa.String(), nullable=False),
        sa.Column("requester_id", sa.String(), nullable=False),
        sa.Column("team_id", sa.String(), nullable=True),
        sa.Column("channel_id", sa.String(), nullable=False),
        sa.Column("workload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("hourly_cents", sa.BigInteger(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=True),
        sa.Column("decided_by", sa.String(), nullable=True),
        sa.Column("decided_at", _utc(), nullable=True),
        sa.Column("cluster_id", sa.String(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("supersedes_id", sa.String(), nullable=True),
        sa.Column("previous_hourly_cents", sa.BigInteger(), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_requests"),
        sa.ForeignKeyConstraint(["quote_id"], ["quotes.id"], name="fk_requests_quote_id_quotes"),
        sa.ForeignKeyConstraint(
            ["supersedes_id"], ["requests.id"], name="fk_requests_supersedes_id_requests"
        ),
        sa.UniqueConstraint("idempotency_key", name="uq_requests_idempotency_key"),
    )
    op.create_index("ix_requests_quote_id", "requests", ["quote_id"], unique=True)
    op.create_index("ix_requests_status", "requests", ["status"])
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("approver_id", sa.String(), nullable=False),
        sa.Column("decision", sa.String(), nullable=False),
        sa.Column("quote_id", sa.String(), nullable=False),
        sa.Column("hourly_cents", sa.BigInteger(), nullable=False),
        sa.Column("at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
        sa.ForeignKeyConstraint(
            ["request_id"], ["requests.id"], name="fk_approvals_request_id_requests"
        ),
    )
    op.create_index("ix_approvals_request_id", "approvals", ["request_id"])
    op.create_table(
        "clusters",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=True),
        sa.Column("owner_id", sa.String(), nullable=False),
        sa.Column("channel_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("shape", sa.JSON(), nullable=False),
        sa.Column("accelerator_name", sa.String(), nullable=False),
        sa.Column("location", sa.String(), nullable=False),
        sa.Column("hourly_cents", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("nodes_ready", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("ready_at", _utc(), nullable=True),
        sa.Column("terminated_at", _utc(), nullable=True),
        sa.Column("termination_reason", sa.Text(), nullable=True),
        sa.Column("accrued_cents", sa.BigInteger(), nullable=False),
        sa.Column("accrued_hours", sa.Integer(), nullable=False),
        sa.Column("volume_id", sa.String(), nullable=True),
        sa.Column("volume_created_with_cluster", sa.Boolean(), nullable=False),
        sa.Column("connection_sent_at", _utc(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_clusters"),
        sa.ForeignKeyConstraint(
            ["request_id"], ["requests.id"], name="fk_clusters_request_id_requests"
        ),
    )
    op.create_index("ix_clusters_request_id", "clusters", ["request_id"])
    op.create_index("ix_clusters_status", "clusters", ["status"])
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("subject_id", sa.String(), nullable=False),
        sa.Column("channel_id", sa.String(), nullable=False),
        sa.Column("ts", sa.String(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.UniqueConstraint("kind", "subject_id", name="uq_messages_kind_subject_id"),
    )


def downgrade() -> None:
    op.drop_table("messages")
    op.drop_index("ix_clusters_status", table_name="clusters")
    op.drop_index("ix_clusters_request_id", table_name="clusters")
    op.drop_table("clusters")
    op.drop_index("ix_approvals_request_id", table_name="approvals")
    op.drop_table("approvals")
    op.drop_index("ix_requests_status", table_name="requests")
    op.drop_index("ix_requests_quote_id", table_name="requests")
    op.drop_table("requests")
    op.drop_table("quotes")
