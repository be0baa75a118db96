"""The notices outbox on a SQLite file: how fast `repos.notices.add_new` stores notices.

5,000 new notices (spread over 100 clusters) are stored in batches of 50, one transaction per
batch — the shape of a sweep queueing notices. Then the same 5,000 again: every key exists, so
each INSERT … ON CONFLICT DO NOTHING stores nothing (what a repeated or racing poll costs).
Last, how long reading the undelivered outbox takes with all 5,000 pending.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.report import Table, ms, percentile
from bot.domain.models import ClusterRecord, ClusterState, ShapeSpec
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from storage.db import Database

NOTICES = 5_000
BATCH = 50
CLUSTERS = 100
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def _cluster(i: int) -> ClusterRecord:
    return ClusterRecord(
        id=f"clu_bench{i:04d}", request_id=None, owner_id=None, channel_id="C0APPROVALS",
        name=f"bench-{i}", shape=ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8,
                                           nodes=2),
        accelerator_name="NVIDIA H100 SXM 80GB", location="us-tx-1", hourly_cents=6_412,
        status=ClusterState.RUNNING, created_at=T0, updated_at=T0, adopted=True,
    )


def _notice(i: int, prefix: str = "degraded") -> Notice:
    return Notice(
        cluster_id=f"clu_bench{i % CLUSTERS:04d}", key=f"{prefix}:{i}",
        kind=NoticeKind.DEGRADED, created_at=T0 + timedelta(seconds=i),
        facts=NoticeFacts(episode=i, down_ranks=(1,), accrued_cents=6_412),
    )


async def _insert(db: Database, notices: Sequence[Notice],
                  batch: int = BATCH) -> tuple[float, list[float], int]:
    """(total seconds, seconds per batch, notices actually stored)."""
    batches: list[float] = []
    stored = 0
    began = time.perf_counter()
    for start in range(0, len(notices), batch):
        t = time.perf_counter()
        async with db.transaction() as repos:
            stored += len(await repos.notices.add_new(notices[start:start + batch]))
        batches.append(time.perf_counter() - t)
    return time.perf_counter() - began, batches, stored


async def run() -> list[Table]:
    notices = [_notice(i) for i in range(NOTICES)]
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        try:
            await db.migrate()
            async with db.transaction() as repos:
                for i in range(CLUSTERS):
                    await repos.clusters.add(_cluster(i))
            fresh = await _insert(db, notices)
            again = await _insert(db, notices)
            # The same work in one transaction: what is left is the cost of the statements.
            single = await _insert(db, [_notice(i, "single") for i in range(NOTICES)],
                                   batch=NOTICES)
            began = time.perf_counter()
            async with db.transaction() as repos:
                pending = await repos.notices.pending()
            read = time.perf_counter() - began
        finally:
            await db.dispose()

    table = Table(
        f"3. Notices outbox on SQLite (file, WAL): {NOTICES:,} add_new in batches of {BATCH}",
        ["case", "stored", "total s", "ops/s", "batch p50 ms", "batch p99 ms"],
    )
    cases = (("new keys", fresh), ("duplicate keys (same again)", again),
             (f"new keys, one transaction of {NOTICES:,}", single))
    for name, (total, batches, stored) in cases:
        table.rows.append([name, f"{stored:,}", f"{total:.2f}", f"{NOTICES / total:,.0f}",
                           ms(percentile(batches, 50)) if len(batches) > 1 else "-",
                           ms(percentile(batches, 99)) if len(batches) > 1 else "-"])
    table.notes.append(f"pending() with {NOTICES:,} undelivered: {ms(read)} ms for the first "
                       f"{len(pending)} (its default limit)")
    return [table]
