"""digests: a storm's one message per channel, and who is on duty for a degraded episode

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 22:40:00

Written by hand; only new tables, so nothing is rebuilt. As in 0001, nothing here imports
application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # new tables older code never reads


def upgrade() -> None:
    op.create_table(
        "duties",
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("episode", sa.Integer(), nullable=False),
        sa.Column("acknowledged_by", sa.String(), nullable=True),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("snoozed_by", sa.String(), nullable=True),
        sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("snoozes", sa.Integer(), nullable=False),
        sa.Column("escalated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exhausted_escalated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"],
                                name="fk_duties_cluster_id_clusters"),
        sa.PrimaryKeyConstraint("cluster_id", "episode", name="pk_duties"),
    )
    op.create_table(
        "digests",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("channel_id", sa.String(), nullable=False),
        sa.Column("open_channel", sa.String(), nullable=True),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("shown", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_digests"),
        sa.UniqueConstraint("open_channel", name="uq_digests_open_channel"),
    )
    op.create_table(
        "digest_members",
        sa.Column("digest_id", sa.String(), nullable=False),
        sa.Column("cluster_id", sa.String(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["digest_id"], ["digests.id"],
                                name="fk_digest_members_digest_id_digests"),
        sa.ForeignKeyConstraint(["cluster_id"], ["clusters.id"],
                                name="fk_digest_members_cluster_id_clusters"),
        sa.PrimaryKeyConstraint("digest_id", "cluster_id", name="pk_digest_members"),
    )


def downgrade() -> None:
    op.drop_table("digest_members")
    op.drop_table("digests")
    op.drop_table("duties")
