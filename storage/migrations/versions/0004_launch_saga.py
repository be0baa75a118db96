"""launch saga: every quote a request held, and each launch intent stored before the call

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-20 12:00:00

Written by hand. Only new tables, so nothing is rebuilt. `request_quotes` is filled from the
requests already stored (their current quote; earlier quotes of a re-priced request were never
kept before this revision). Launches in flight at the upgrade get their intent written the
first time the bot picks them up. As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = False  # older code writes requests without their request_quotes row


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "request_quotes",
        sa.Column("quote_id", sa.String(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("added_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("quote_id", name="pk_request_quotes"),
        sa.ForeignKeyConstraint(["quote_id"], ["quotes.id"],
                                name="fk_request_quotes_quote_id_quotes"),
        sa.ForeignKeyConstraint(["request_id"], ["requests.id"],
                                name="fk_request_quotes_request_id_requests"),
    )
    op.create_index("ix_request_quotes_request_id", "request_quotes", ["request_id"])
    op.execute(sa.text(
        "INSERT INTO request_quotes (quote_id, request_id, added_at) "
        "SELECT quote_id, id, created_at FROM requests"
    ))
    op.create_table(
        "launch_intents",
        sa.Column("idempotency_key", sa.String(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("quote_id", sa.String(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("cluster_id", sa.String(), nullable=True),
        sa.Column("server_errors", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("idempotency_key", name="pk_launch_intents"),
        sa.ForeignKeyConstraint(["request_id"], ["requests.id"],
                                name="fk_launch_intents_request_id_requests"),
    )
    op.create_index("ix_launch_intents_request_id", "launch_intents", ["request_id"])


def downgrade() -> None:
    op.drop_index("ix_launch_intents_request_id", table_name="launch_intents")
    op.drop_table("launch_intents")
    op.drop_index("ix_request_quotes_request_id", table_name="request_quotes")
    op.drop_table("request_quotes")
