"""charges: what a shared volume's own hours are replayed from

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 20:00:00

Written by hand: five nullable/defaulted columns on `volumes` (bot/domain/charges.py replays a
volume's charges from them). As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    # Plain op.add_column (as 0003): nullable columns and a constant default need no rebuild.
    op.add_column("volumes", sa.Column("created_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("volumes", sa.Column("created_with_cluster_id", sa.String(), nullable=True))
    op.add_column("volumes", sa.Column("cents_per_gb_month", sa.Integer(), nullable=True))
    op.add_column("volumes", sa.Column("prices", sa.JSON(), server_default=sa.text("'[]'"),
                                       nullable=False))
    op.add_column("volumes", sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN, not batch mode (see 0003): none of them is indexed or constrained.
    for name in ("deleted_at", "prices", "cents_per_gb_month", "created_with_cluster_id",
                 "created_at"):
        op.drop_column("volumes", name)
