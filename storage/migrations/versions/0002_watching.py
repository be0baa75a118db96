"""watching: cluster observation columns, the notices outbox, volumes

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-06 12:00:00

Written by hand. `clusters` changes in batch mode: SQLite cannot ALTER a column's nullability,
so alembic rebuilds the table (copy, drop, rename); `Database.migrate()` switches foreign key
enforcement off around that and checks every key afterwards. On PostgreSQL the batch is plain
ALTER TABLE statements. The new NOT NULL columns have server defaults, so rows written before
this revision get their default values. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = False  # clusters.owner_id became nullable: older code needs it


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        # None: an adopted cluster nobody has claimed yet.
        batch.alter_column("owner_id", existing_type=sa.String(), nullable=True)
        batch.add_column(sa.Column("observed", sa.JSON(), nullable=True))
        batch.add_column(sa.Column(
            "last_reminded_hours", sa.Integer(), server_default=sa.text("0"), nullable=False
        ))
        batch.add_column(sa.Column("accrued_at_degrade", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column(
            "manual_recoveries", sa.JSON(), server_default=sa.text("'[]'"), nullable=False
        ))
        batch.add_column(sa.Column("terminate_requested_by", sa.String(), nullable=True))
        batch.add_column(sa.Column(
            "notify_channels", sa.JSON(), server_default=sa.text("'[]'"), nullable=False
        ))
        # sa.false() renders per dialect: `false` on PostgreSQL, `0` on SQLite.
        batch.add_column(sa.Column(
            "auto_recovery", sa.Boolean(), server_default=sa.false(), nullable=False
        ))
        batch.add_column(sa.Column(
            "adopted", sa.Boolean(), server_default=sa.false(), nullable=False
        ))
    op.create_table(
        "notices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("delivered_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_notices"),
        sa.ForeignKeyConstraint(
            ["cluster_id"], ["clusters.id"], name="fk_notices_cluster_id_clusters"
        ),
        sa.UniqueConstraint("cluster_id", "key", name="uq_notices_cluster_id_key"),
    )
    op.create_index("ix_notices_delivered_at", "notices", ["delivered_at"])
    op.create_table(
        "volumes",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("owner_id", sa.String(), nullable=True),
        sa.Column("cluster_id", sa.String(), nullable=True),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("size_gb", sa.Integer(), nullable=False),
        sa.Column("location", sa.String(), nullable=False),
        sa.Column("hourly_cents", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("orphaned_since", _utc(), nullable=True),
        sa.Column("next_reminder_at", _utc(), nullable=True),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_volumes"),
    )
    op.create_index("ix_volumes_next_reminder_at", "volumes", ["next_reminder_at"])


def downgrade() -> None:
    op.drop_index("ix_volumes_next_reminder_at", table_name="volumes")
    op.drop_table("volumes")
    op.drop_index("ix_notices_delivered_at", table_name="notices")
    op.drop_table("notices")
    # 0001 requires an owner: an unclaimed adopted cluster gets the empty string (no such
    # Slack user) rather than making the downgrade impossible.
    op.execute(sa.text("UPDATE clusters SET owner_id = '' WHERE owner_id IS NULL"))
    with op.batch_alter_table("clusters") as batch:
        for column in ("adopted", "auto_recovery", "notify_channels", "terminate_requested_by",
                       "manual_recoveries", "accrued_at_degrade", "last_reminded_hours",
                       "observed"):
            batch.drop_column(column)
        batch.alter_column("owner_id", existing_type=sa.String(), nullable=False)
