"""lease: the sweeps lease records what its holder's code can do

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 21:15:00

Written by hand: one integer column on `leases` (bot/jobs/scheduler.py SWEEP_CAPABILITY), 0 for
rows written by a build from before it — which is what such a build is, so a newer replica
takes the lease over from it. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    # Plain op.add_column (as 0003): a NOT NULL column with a constant default needs no rebuild.
    op.add_column("leases", sa.Column("capability", sa.Integer(), server_default=sa.text("0"),
                                      nullable=False))


def downgrade() -> None:
    # Plain DROP COLUMN, not batch mode (see 0003): it is neither indexed nor constrained.
    op.drop_column("leases", "capability")
