"""terminate intent: a terminate is stored before AI Reserve is asked, and retried until it takes

Revision ID: 0007
Revises: 0003
Create Date: 2026-12-01 09:40:00

Written by hand; only a new table, so nothing is rebuilt. As in 0001, nothing here imports
application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    op.create_table(
        "terminations",
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("requested_by", sa.String(), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("warned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"],
                                name="fk_terminations_cluster_id_clusters"),
        sa.PrimaryKeyConstraint("cluster_id", name="pk_terminations"),
    )
    op.create_index("ix_terminations_state", "terminations", ["state"])


def downgrade() -> None:
    op.drop_index("ix_terminations_state", table_name="terminations")
    op.drop_table("terminations")
