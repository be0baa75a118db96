"""spend: extensions of a cluster's envelope that wait for approvers

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 20:00:00

Written by hand; only a new table, so nothing is rebuilt. As in 0001, nothing here imports
application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    op.create_table(
        "extensions",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("owner_id", sa.String(), nullable=False),
        sa.Column("requested_by", sa.String(), nullable=False),
        sa.Column("hours", sa.Integer(), nullable=False),
        sa.Column("from_hours", sa.Integer(), nullable=False),
        sa.Column("hourly_cents", sa.BigInteger(), nullable=False),
        sa.Column("approvals_needed", sa.Integer(), nullable=False),
        sa.Column("override_rule", sa.Text(), nullable=True),
        sa.Column("approved_by", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("decided_by", sa.String(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"],
                                name="fk_extensions_cluster_id_clusters"),
        sa.PrimaryKeyConstraint("id", name="pk_extensions"),
    )
    op.create_index("ix_extensions_cluster_id", "extensions", ["cluster_id"])
    op.create_index("ix_extensions_status", "extensions", ["status"])


def downgrade() -> None:
    op.drop_index("ix_extensions_status", table_name="extensions")
    op.drop_index("ix_extensions_cluster_id", table_name="extensions")
    op.drop_table("extensions")
