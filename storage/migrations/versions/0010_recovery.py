"""recovery: Serving is a state — the serving periods a lost node ended, and the restart

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 20:00:00

Written by hand: two columns on `readiness`, one with a constant default, one nullable; a row
that was serving keeps `serving_at` and an empty history. As in 0001, nothing here imports
application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    # Plain op.add_column (as 0003): a constant default needs no table rebuild on SQLite.
    op.add_column("readiness", sa.Column("served", sa.JSON(), server_default=sa.text("'[]'"),
                                         nullable=False))
    op.add_column("readiness", sa.Column("rearmed_at", sa.DateTime(timezone=True),
                                         nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN, not batch mode (see 0003): neither column is indexed or constrained.
    op.drop_column("readiness", "rearmed_at")
    op.drop_column("readiness", "served")
