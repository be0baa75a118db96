"""action claims: one row per button press that acted (the exactly-once guard of buttons)

Revision ID: 0006
Revises: 0003
Create Date: 2026-12-01 09:30:00

Written by hand; only adds a table. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    op.create_table(
        "action_claims",
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("subject_id", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("actor_id", sa.String(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("action", "subject_id", "version", name="pk_action_claims"),
    )


def downgrade() -> None:
    op.drop_table("action_claims")
