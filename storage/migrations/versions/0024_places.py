"""places: the organization of a launch request, and the workspace and organization of a cluster

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 01:10:00

Written by hand: three nullable columns — `requests.enterprise_id` (beside its `team_id`) and
`clusters.team_id` / `clusters.enterprise_id` (its request's) — so whose spend policy applies
to a request or a cluster (the policy file's `installations:`) is read from its own row, in a
request or a sweep alike. A row from before has none: the policy's top level applies to it, or
its workspace's. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # nullable columns older code neither reads nor writes


def upgrade() -> None:
    # Plain op.add_column (as 0003, 0017): nullable columns need no rebuild.
    op.add_column("requests", sa.Column("enterprise_id", sa.String(), nullable=True))
    op.add_column("clusters", sa.Column("team_id", sa.String(), nullable=True))
    op.add_column("clusters", sa.Column("enterprise_id", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("clusters", "enterprise_id")
    op.drop_column("clusters", "team_id")
    op.drop_column("requests", "enterprise_id")
