"""policy and audit: request approval policy, cluster spend envelope, the audit trail

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-13 12:00:00

Written by hand. The upgrade only adds columns and a table, so no table is rebuilt (no foreign
key dance on SQLite), and the downgrade drops columns in place. The new NOT NULL columns
have server defaults, so rows written before this revision read as the model's defaults: one
approver needed, envelope stage 'none'. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # additive only


def upgrade() -> None:
    # Plain op.add_column, not batch mode: alembic's batch rebuilds a SQLite table for any
    # default given as SQL text, while ALTER TABLE … ADD COLUMN takes these constant defaults
    # on SQLite and PostgreSQL alike.
    op.add_column("requests", sa.Column(
        "approvals_needed", sa.Integer(), server_default=sa.text("1"), nullable=False
    ))
    op.add_column("requests", sa.Column("override_rule", sa.Text(), nullable=True))
    op.add_column("requests", sa.Column("lifetime_hours", sa.Integer(), nullable=True))
    op.add_column("clusters", sa.Column("lifetime_hours", sa.Integer(), nullable=True))
    op.add_column("clusters", sa.Column(
        "envelope_stage", sa.String(), server_default=sa.text("'none'"), nullable=False
    ))
    op.add_column("clusters", sa.Column("extended_by", sa.String(), nullable=True))
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.String(), nullable=True),
        sa.Column("team_id", sa.String(), nullable=True),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("subject_id", sa.String(), nullable=False),
        sa.Column("amount_cents", sa.BigInteger(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_audit"),
    )
    op.create_index("ix_audit_at", "audit", ["at"])
    op.create_index("ix_audit_subject_id", "audit", ["subject_id"])


def downgrade() -> None:
    op.drop_index("ix_audit_subject_id", table_name="audit")
    op.drop_index("ix_audit_at", table_name="audit")
    op.drop_table("audit")
    # Plain ALTER TABLE … DROP COLUMN (SQLite ≥ 3.35), not batch mode: a batch rebuild drops
    # and recreates `requests` and `clusters`, which SQLite refuses while foreign keys are
    # enforced and other rows point at them — and a downgrade runs outside `Database.migrate()`,
    # which is what switches enforcement off. None of these columns is indexed or constrained,
    # which is what SQLite's DROP COLUMN requires.
    for column in ("extended_by", "envelope_stage", "lifetime_hours"):
        op.drop_column("clusters", column)
    for column in ("lifetime_hours", "override_rule", "approvals_needed"):
        op.drop_column("requests", column)
