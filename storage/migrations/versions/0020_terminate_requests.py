"""terminate requests: count the requests sent for a terminate, not only the attempts

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02 16:00:00

Written by hand: `terminations.requests`, the HTTP requests AI Reserve was sent for the intent
in all (each attempt's client retries count: "terminated after 17 requests", issue 24 item 7).
Rows written before read 0, and are told by their attempts. As in 0001, nothing here imports
application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
compatible_with_previous = True  # one column with a constant default: older code ignores it


def upgrade() -> None:
    # Plain op.add_column (as 0003): a constant default needs no rebuild on SQLite.
    op.add_column("terminations", sa.Column("requests", sa.Integer(),
                                            server_default=sa.text("0"), nullable=False))


def downgrade() -> None:
    op.drop_column("terminations", "requests")
