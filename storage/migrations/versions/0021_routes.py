"""routes: which installation each channel and person belongs to (OAuth mode)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02 16:10:00

Written by hand: `slack_routes` (a Slack id → the key of the installation it was learned from),
read only when SLACK_CLIENT_ID is set. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # a new table older code never reads


def upgrade() -> None:
    op.create_table(
        "slack_routes",
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("installation", sa.String(), nullable=False),
        sa.Column("learned_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("target", name="pk_slack_routes"),
    )


def downgrade() -> None:
    op.drop_table("slack_routes")
