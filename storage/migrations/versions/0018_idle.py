"""idle: idle rules share the readiness follower's row and its cursors

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01 22:45:00

Written by hand: the idle rule and its state on `readiness` (one log follower per cluster, one
cursor per node), all nullable or with a constant default; `pattern` becomes nullable, since a
cluster may have an idle rule and no readiness rule. Existing rows read as "no idle rule"
('off'). As in 0001, nothing here imports application code.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Nullable columns and an index, but not compatible (corrected, issue 26 item 2): an idle-only
# cluster's row has `pattern` NULL and state 'none', which older code can't read — its watch sweep
# raised on every tick and a planned run went past its deadline (tests/test_rollback_live.py) —
# and older code doesn't know idle rules, a money duty. Releases before 0018 refuse from here on.
compatible_with_previous = False

_WHEN = ("idle_since", "idle_fired_at", "idle_terminate_at", "last_line_at", "kept_until")


def upgrade() -> None:
    # Plain op.add_column (as 0003): constant defaults and nullable columns need no rebuild.
    op.add_column("readiness", sa.Column("idle", sa.JSON(), nullable=True))
    op.add_column("readiness", sa.Column("idle_state", sa.String(),
                                         server_default=sa.text("'off'"), nullable=False))
    op.add_column("readiness", sa.Column("idle_episode", sa.Integer(),
                                         server_default=sa.text("0"), nullable=False))
    for name in _WHEN:
        op.add_column("readiness", sa.Column(name, sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_readiness_idle_state", "readiness", ["idle_state"])
    # Nullability can't change in place on SQLite: batch mode rebuilds this small table.
    with op.batch_alter_table("readiness") as batch:
        batch.alter_column("pattern", existing_type=sa.Text(), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM readiness WHERE pattern IS NULL")  # idle-only rows: no old meaning
    with op.batch_alter_table("readiness") as batch:
        batch.alter_column("pattern", existing_type=sa.Text(), nullable=False)
    op.drop_index("ix_readiness_idle_state", table_name="readiness")
    for name in reversed(_WHEN):
        op.drop_column("readiness", name)
    op.drop_column("readiness", "idle_episode")
    op.drop_column("readiness", "idle_state")
    op.drop_column("readiness", "idle")
