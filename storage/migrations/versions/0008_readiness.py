"""readiness: a cluster's readiness check (log line pattern, per-rank log cursors, serving)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 10:40:00

Written by hand; only a new table, so nothing is rebuilt. As in 0001, nothing here imports
application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    op.create_table(
        "readiness",
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("pattern", sa.Text(), nullable=False),
        sa.Column("all_ranks", sa.Boolean(), nullable=False),
        sa.Column("limit_minutes", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("cursors", sa.JSON(), nullable=False),
        sa.Column("matched_ranks", sa.JSON(), nullable=False),
        sa.Column("serving_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("prompts", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"],
                                name="fk_readiness_cluster_id_clusters"),
        sa.PrimaryKeyConstraint("cluster_id", name="pk_readiness"),
    )
    op.create_index("ix_readiness_state", "readiness", ["state"])


def downgrade() -> None:
    op.drop_index("ix_readiness_state", table_name="readiness")
    op.drop_table("readiness")
