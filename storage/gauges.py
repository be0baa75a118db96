"""Bounded aggregate reads for the metrics endpoint: one GROUP BY or SUM each, never a scan
into Python (the month's clusters excepted: what they accrued needs their billing figures)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.outbox import UNDELIVERABLE
from storage.tables.clusters import CLUSTERS
from storage.tables.installs import INSTALLATIONS
from storage.tables.outbox import NOTICES, OUTBOX

BILLING_STATES = ("running", "degraded")


@dataclass(frozen=True)
class Backlog:
    pending: int
    # The oldest undelivered post of each outbox: `outbox` rows are stamped by the wall clock
    # (claims are real time, shared by processes), notices by the provider-corrected clock.
    oldest_post: datetime | None
    oldest_notice: datetime | None


async def clusters_by_state(session: AsyncConnection) -> dict[str, int]:
    rows = await session.execute(
        sa.select(CLUSTERS.c.status, sa.func.count()).group_by(CLUSTERS.c.status))
    return {str(status): int(n) for status, n in rows.all()}


async def burn_cents_per_hour(session: AsyncConnection) -> int:
    """The locked rates of every cluster billing now (running or degraded)."""
    total = await session.scalar(sa.select(sa.func.coalesce(sa.func.sum(CLUSTERS.c.hourly_cents),
                                                            0))
                                 .where(CLUSTERS.c.status.in_(BILLING_STATES)))
    return int(total or 0)


async def outbox_backlog(session: AsyncConnection) -> Backlog:
    """Posts not delivered yet, in both outboxes (watcher notices and every other post)."""
    found = []
    # Outbox rows without a payload are claims on a post someone else still holds the content
    # of (a notice's part, a DM channel being opened): their post is counted where it lives.
    for table, pending in ((OUTBOX, OUTBOX.c.payload.is_not(None)), (NOTICES, sa.true())):
        row = (await session.execute(
            sa.select(sa.func.count(), sa.func.min(table.c.created_at))
            .where(table.c.delivered_at.is_(None), pending))).one()
        found.append((int(row[0]), row[1]))
    (posts, oldest_post), (notices, oldest_notice) = found
    return Backlog(pending=posts + notices, oldest_post=oldest_post, oldest_notice=oldest_notice)


async def refresh_failing(session: AsyncConnection) -> int:
    """Installations whose rotating token's last refresh failed."""
    return int(await session.scalar(sa.select(sa.func.count()).select_from(INSTALLATIONS).where(
        INSTALLATIONS.c.refresh_failing_since.is_not(None))) or 0)


async def undeliverable_by_reason(session: AsyncConnection) -> dict[str, int]:
    """Slack targets recorded undeliverable (storage/outbox.py `UNDELIVERABLE`), by Slack's code:
    an archived channel (`is_archived`), one the bot left (`not_in_channel`), a person gone."""
    rows = await session.execute(sa.select(OUTBOX.c.payload).where(OUTBOX.c.kind == UNDELIVERABLE))
    found: dict[str, int] = {}
    for (payload,) in rows:
        reason = str((payload or {}).get("reason"))
        found[reason] = found.get(reason, 0) + 1
    return found
