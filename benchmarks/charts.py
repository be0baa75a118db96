"""The `/cluster spend` chart for a month of 50 clusters (and 10 kept volumes): the day-by-day
sums plus the drawing, cold (matplotlib imported on the first chart) and warm.

`python -m benchmarks charts`; tests/test_charts.py draws the same month and checks the PNG.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from benchmarks.report import Table
from bot.domain.models import ClusterRecord, ClusterState, ShapeSpec
from bot.domain.spend import SpendReport, VolumeSpan, spend_report

NOW = datetime(2026, 11, 29, 18, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
RUNS = 7


def month_of(clusters: int = 50, *, seed: int = 7) -> tuple[SpendReport, datetime]:
    """A November of `clusters` clusters of 12 owners (some still running, some unclaimed)
    and 10 kept volumes, as `/cluster spend` reports it on the 29th."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    records = []
    for i in range(clusters):
        ready = start + timedelta(minutes=rng.randrange(0, 27 * 24 * 60))
        hours = rng.randint(1, min(200, int((NOW - ready) / HOUR)))
        rate = rng.choice((6253, 12506, 25012))
        live = rng.random() < 0.2
        records.append(ClusterRecord(
            id=f"clu_{i:03d}", request_id=None,
            owner_id=None if i % 13 == 0 else f"U{rng.randrange(12):04d}",
            channel_id="C0GPU", name=None,
            shape=ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2),
            accelerator_name="NVIDIA H100 80GB SXM", location="us-tx", hourly_cents=rate,
            status=ClusterState.RUNNING if live else ClusterState.TERMINATED,
            created_at=ready - 10 * timedelta(minutes=1), ready_at=ready,
            terminated_at=None if live else ready + hours * HOUR,
            accrued_hours=hours, accrued_cents=hours * rate, updated_at=NOW))
    volumes = [VolumeSpan(id=f"vol_{i}", owner_id=f"U{i:04d}", hourly_cents=14,
                          own_from=start + timedelta(days=rng.randrange(28)))
               for i in range(10)]
    return spend_report(records, "2026-11", NOW, volumes=volumes), NOW


def draw(report: SpendReport, now: datetime) -> bytes:
    from bot.domain.spend_days import daily_cents
    from bot.slack import charts

    owners = [(owner or "unclaimed", cents) for owner, cents in report.by_owner]
    charts.forget_charts()  # drawn, not the PNG kept from the last run
    return charts.spend_png(month=report.month, days=daily_cents(report, now=now),
                            owners=owners, total_cents=report.total_cents)


def _cold() -> float:
    """A fresh interpreter: matplotlib's import is part of the first chart."""
    code = ("import time; t = time.perf_counter(); from benchmarks.charts import month_of, draw; "
            "draw(*month_of()); print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


async def run() -> list[Table]:
    report, now = month_of()
    draw(report, now)  # warm-up
    warm = []
    for _ in range(RUNS):
        began = time.perf_counter()
        png = draw(report, now)
        warm.append(time.perf_counter() - began)
    cold = _cold()
    table = Table("Spend chart: a month of 50 clusters and 10 kept volumes (PNG 1000×600)",
                  ["run", "seconds", "bytes"])
    table.rows.append([f"warm (median of {RUNS})", f"{statistics.median(warm):.3f}",
                       str(len(png))])
    table.rows.append(["warm (max)", f"{max(warm):.3f}", ""])
    table.rows.append(["cold (incl. importing matplotlib)", f"{cold:.3f}", ""])
    table.notes.append("drawn in a worker thread (asyncio.to_thread) by /cluster spend; "
                       "target < 1 s warm")
    return [table]
