"""outbox claims: notices claimed before posting, the outbox of other posts, leases, DM channels

Revision ID: 0005
Revises: 0003
Create Date: 2026-12-01 09:30:00

Written by hand. Only adds nullable columns and new tables (no table rebuilt on SQLite). As in
0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("notices", sa.Column("claimed_by", sa.String(), nullable=True))
    op.add_column("notices", sa.Column("claimed_until", _utc(), nullable=True))
    op.create_table(
        "outbox",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("claimed_by", sa.String(), nullable=True),
        sa.Column("claimed_until", _utc(), nullable=True),
        sa.Column("delivered_at", _utc(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_outbox"),
    )
    op.create_index("ix_outbox_delivered_at", "outbox", ["delivered_at"])
    op.create_table(
        "leases",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )
    op.create_table(
        "dm_channels",
        sa.Column("user_id", sa.String(), nullable=False),
        sa.Column("channel_id", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", name="pk_dm_channels"),
    )


def downgrade() -> None:
    op.drop_table("dm_channels")
    op.drop_table("leases")
    op.drop_index("ix_outbox_delivered_at", table_name="outbox")
    op.drop_table("outbox")
    # Plain DROP COLUMN (SQLite ≥ 3.35): neither column is indexed or constrained.
    op.drop_column("notices", "claimed_until")
    op.drop_column("notices", "claimed_by")
