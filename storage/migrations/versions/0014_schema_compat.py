"""upgrades: the schema says which code may run on it

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 22:30:00

Written by hand: `schema_compat` holds one row, rewritten after every migration run
(storage/schema.py record_compat): the schema's revision and the oldest code head that can run
on it. A build that doesn't know the database's revision (a rollback, an old replica restarting
during a rolling update) reads it to decide whether it may start. As in 0001, nothing here
imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # a new table older code never reads


def upgrade() -> None:
    op.create_table(
        "schema_compat",
        sa.Column("revision", sa.String(), primary_key=True),
        sa.Column("oldest_compatible", sa.String(), nullable=False),
        sa.Column("migrated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("schema_compat")
