"""installations: the app's Slack installations (OAuth) and the install page's states

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02 15:50:00

Written by hand: `slack_installations` (one row per workspace, or per Enterprise organization
for an org-wide install; the bot and refresh tokens are sealed text, storage/sealing.py) and
`slack_oauth_states` (a state lives until it is taken back once, or expires). Both are read only
when SLACK_CLIENT_ID is set; the single-token mode never touches them. As in 0001, nothing here
imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # two new tables older code never reads


def upgrade() -> None:
    when = sa.DateTime(timezone=True)
    op.create_table(
        "slack_installations",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("enterprise_id", sa.String(), nullable=True),
        sa.Column("team_id", sa.String(), nullable=True),
        sa.Column("org_wide", sa.Boolean(), nullable=False),
        sa.Column("app_id", sa.String(), nullable=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("bot_token", sa.Text(), nullable=False),
        sa.Column("bot_id", sa.String(), nullable=True),
        sa.Column("bot_user_id", sa.String(), nullable=True),
        sa.Column("bot_scopes", sa.Text(), nullable=False),
        sa.Column("bot_refresh_token", sa.Text(), nullable=True),
        sa.Column("bot_token_expires_at", when, nullable=True),
        sa.Column("installer_id", sa.String(), nullable=True),
        sa.Column("installed_at", when, nullable=False),
        sa.Column("stopped_at", when, nullable=True),
        sa.Column("stopped_why", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("key", name="pk_slack_installations"),
    )
    op.create_index("ix_slack_installations_enterprise_id", "slack_installations",
                    ["enterprise_id"], unique=False)
    op.create_index("ix_slack_installations_team_id", "slack_installations", ["team_id"],
                    unique=False)
    op.create_table(
        "slack_oauth_states",
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("expires_at", when, nullable=False),
        sa.PrimaryKeyConstraint("state", name="pk_slack_oauth_states"),
    )


def downgrade() -> None:
    op.drop_table("slack_oauth_states")
    op.drop_index("ix_slack_installations_team_id", table_name="slack_installations")
    op.drop_index("ix_slack_installations_enterprise_id", table_name="slack_installations")
    op.drop_table("slack_installations")
