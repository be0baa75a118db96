"""A month's spend day by day, for the `/cluster spend` chart: the same charges as the report
(bot/domain/spend.py), each counted on the UTC day of its instant, so the days add up to the
report's total exactly."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from bot.domain.spend import SpendReport, accrued_in, month_bounds, volume_charges

DAY = timedelta(days=1)


def daily_cents(report: SpendReport, *, now: datetime) -> list[tuple[date, int]]:
    """Every day of the report's month with the cents charged on it (clusters and volumes
    billing on their own); days still to come are 0."""
    start, end = month_bounds(report.month, now)
    charged_by = now + timedelta(microseconds=1)  # as the report: a charge made at `now` counts
    days: list[tuple[date, int]] = []
    day = start
    while day < end:
        nxt = day + DAY
        cents = sum(accrued_in(c, day, nxt) for c, _ in report.by_cluster)
        cents += sum(volume_charges(v, day, min(nxt, charged_by)) for v, _ in report.by_volume)
        days.append((day.date(), cents))
        day = nxt
    return days
