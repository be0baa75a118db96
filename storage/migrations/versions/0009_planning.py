"""planning: a planned run's envelope ends in termination; a rejection's reason

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 10:30:00

Written by hand: two nullable/defaulted columns. As in 0001, nothing here imports application
code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    # Plain op.add_column (as 0003): a constant default needs no table rebuild on SQLite.
    op.add_column("clusters", sa.Column("auto_terminate", sa.Boolean(), nullable=False,
                                        server_default=sa.false()))
    op.add_column("requests", sa.Column("decision_note", sa.Text(), nullable=True))


def downgrade() -> None:
    # Plain DROP COLUMN, not batch mode (see 0003): neither column is indexed or constrained.
    op.drop_column("requests", "decision_note")
    op.drop_column("clusters", "auto_terminate")
