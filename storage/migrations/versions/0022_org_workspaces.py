"""org workspaces: the workspaces an org-wide installation serves (OAuth mode, Enterprise Grid)

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02 21:20:00

Written by hand: `slack_org_workspaces` (an org-wide installation's key, a workspace of its
organization the app was given to), read only when SLACK_CLIENT_ID is set. As in 0001, nothing
here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # a new table older code never reads


def upgrade() -> None:
    op.create_table(
        "slack_org_workspaces",
        sa.Column("installation", sa.String(), nullable=False),
        sa.Column("team_id", sa.String(), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("installation", "team_id", name="pk_slack_org_workspaces"),
    )


def downgrade() -> None:
    op.drop_table("slack_org_workspaces")
