"""refresh failures: whether an installation's rotating token could not be refreshed (OAuth mode)

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02 21:45:00

Written by hand: two nullable columns of `slack_installations` — since when its token's refresh
fails and why (Slack's error) — so the failure is said once across replicas and shown by every
replica's metrics alike. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # nullable columns older code neither reads nor writes


def upgrade() -> None:
    with op.batch_alter_table("slack_installations") as batch:
        batch.add_column(sa.Column("refresh_failing_since", sa.DateTime(timezone=True),
                                   nullable=True))
        batch.add_column(sa.Column("refresh_failure", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("slack_installations") as batch:
        batch.drop_column("refresh_failure")
        batch.drop_column("refresh_failing_since")
