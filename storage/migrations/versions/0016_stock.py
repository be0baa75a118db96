"""stock: a launch request can wait for stock (bot/services/stock.py)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 22:30:00

Written by hand: four nullable/defaulted columns on `requests` — how long the requester will
wait, until when, the next re-quote and how many were made (the back-off). As in 0001, nothing
here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Corrected to False (issue 26 item 2): the columns are additive, but the code that comes with them
# writes a request status older code can't read (`waiting`), and older code would never look for
# the stock it waits for. Releases before 0016 refuse a schema from here on (`schema_compat`).
compatible_with_previous = False


def upgrade() -> None:
    # Plain op.add_column (as 0003): a constant default needs no table rebuild on SQLite.
    op.add_column("requests", sa.Column("wait_hours", sa.Integer(), nullable=True))
    op.add_column("requests", sa.Column("wait_until", sa.DateTime(timezone=True),
                                        nullable=True))
    op.add_column("requests", sa.Column("wait_next_at", sa.DateTime(timezone=True),
                                        nullable=True))
    op.add_column("requests", sa.Column("wait_checks", sa.Integer(), nullable=False,
                                        server_default=sa.text("0")))


def downgrade() -> None:
    # Plain DROP COLUMN, not batch mode (see 0003): none of them is indexed or constrained.
    op.drop_column("requests", "wait_checks")
    op.drop_column("requests", "wait_next_at")
    op.drop_column("requests", "wait_until")
    op.drop_column("requests", "wait_hours")
