"""templates: cluster templates, and the project a request and its cluster are charged to

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 22:30:00

Written by hand: a `templates` table (a name unique in its scope; what it prefills is one JSON
document, never an env value) and a nullable `project` column on `requests` and `clusters`
(NULL: no project, which is what every row stored before it is). As in 0001, nothing here
imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # a new table and nullable columns older code never reads


def upgrade() -> None:
    op.create_table(
        "templates",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("owner_id", sa.String(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_templates"),
        sa.UniqueConstraint("scope", "name", name="uq_templates_scope_name"),
    )
    op.create_index("ix_templates_scope", "templates", ["scope"], unique=False)
    # Plain op.add_column (as 0003): nullable columns need no rebuild.
    op.add_column("requests", sa.Column("project", sa.String(), nullable=True))
    op.add_column("clusters", sa.Column("project", sa.String(), nullable=True))
    op.create_index("ix_clusters_project", "clusters", ["project"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_clusters_project", table_name="clusters")
    op.drop_column("clusters", "project")
    op.drop_column("requests", "project")
    op.drop_index("ix_templates_scope", table_name="templates")
    op.drop_table("templates")
