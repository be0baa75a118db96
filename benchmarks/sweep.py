"""The watcher's poll sweep: what one `sync_live()` costs with N running clusters.

N clusters are launched at the simulator through the bot's own AI Reserve client, booted on the
virtual clock, and adopted by `reconcile()` (the bot's path for clusters it finds live). Then,
each time after the poll interval passes on the clock, as the scheduler would:

- quiet sweeps (nothing changed): wall time, per cluster, and what they cost elsewhere — Slack
  Web API calls (should be none), AI Reserve requests, SQL statements and transactions;
- one quiet sweep under tracemalloc: the peak of Python memory allocated during it;
- a sweep right after node 1 of every cluster failed: each cluster degrades, so each gets a
  notice in its thread and an edited top message; then one more sweep for what was left over.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.report import Table, counting_calls, db_statements, slack_calls
from tests.e2e.harness import Harness, bot

SIZES = (10, 50, 200)
QUIET_SWEEPS = 3
POLL_SECONDS = 30
BOOT_SECONDS = 120  # 2 nodes × 5 s provisioning + a 60 s health pass, with room to spare
PROVIDER_READS = ("get_cluster", "list_clusters", "iter_clusters")


@dataclass
class Figures:
    n: int
    quiet: list[float] = field(default_factory=list)
    quiet_slack: Counter[str] = field(default_factory=Counter)
    quiet_provider: Counter[str] = field(default_factory=Counter)
    quiet_statements: int = 0
    quiet_transactions: int = 0
    quiet_kinds: Counter[str] = field(default_factory=Counter)
    peak_bytes: int = 0
    degraded: float = 0.0
    degraded_slack: Counter[str] = field(default_factory=Counter)
    degraded_statements: int = 0
    left_pending: int = 0
    next_slack: Counter[str] = field(default_factory=Counter)


async def _populate(h: Harness, n: int) -> list[str]:
    """N running clusters at AI Reserve, adopted by the bot; their ids."""
    gate = asyncio.Semaphore(8)

    async def launch(i: int) -> str:
        async with gate:
            quote = await h.rt.provider.quote_cluster("h100-sxm-80gb", 8, 2)
            cluster = await h.rt.provider.launch_cluster(quote.id,
                                                         idempotency_key=f"bench-{i}")
            return cluster.id

    ids = list(await asyncio.gather(*(launch(i) for i in range(n))))
    h.clock.advance(BOOT_SECONDS)
    adopted = await h.rt.services.reconciling.reconcile()
    await h.rt.settle()
    assert sorted(adopted) == sorted(ids), "reconcile() did not adopt every cluster"
    return ids


async def _pending_notices(h: Harness) -> int:
    async with h.rt.db.transaction() as repos:
        return len(await repos.notices.pending(limit=100_000))


async def _measure(n: int) -> Figures:
    figures = Figures(n)
    with tempfile.TemporaryDirectory() as tmp:
        async with bot(Path(tmp)) as h:
            ids = await _populate(h, n)
            watching = h.rt.services.watching
            h.clock.advance(POLL_SECONDS)
            assert await watching.sync_live() == n  # warm-up

            for _ in range(QUIET_SWEEPS):
                h.clock.advance(POLL_SECONDS)
                with slack_calls(h.slack) as slack, db_statements(h.rt.db.engine) as db, \
                        counting_calls(h.rt.provider, PROVIDER_READS) as provider:
                    began = time.perf_counter()
                    await watching.sync_live()
                    figures.quiet.append(time.perf_counter() - began)
                figures.quiet_slack += slack
                figures.quiet_provider = provider
                figures.quiet_statements = db.statements
                figures.quiet_transactions = db.transactions
                figures.quiet_kinds = db.kinds

            h.clock.advance(POLL_SECONDS)
            tracemalloc.start()
            try:
                tracemalloc.reset_peak()
                base, _ = tracemalloc.get_traced_memory()
                await watching.sync_live()
                figures.peak_bytes = tracemalloc.get_traced_memory()[1] - base
            finally:
                tracemalloc.stop()

            for cluster_id in ids:
                h.sim.engine.fail_node(cluster_id, 1, "unhealthy")
            h.clock.advance(POLL_SECONDS)
            with slack_calls(h.slack) as slack, db_statements(h.rt.db.engine) as db:
                began = time.perf_counter()
                await watching.sync_live()
                figures.degraded = time.perf_counter() - began
            figures.degraded_slack = slack
            figures.degraded_statements = db.statements
            figures.left_pending = await _pending_notices(h)
            h.clock.advance(POLL_SECONDS)
            with slack_calls(h.slack) as slack:
                await watching.sync_live()
            figures.next_slack = slack
            await h.rt.settle()
    return figures


def _calls(counter: Counter[str]) -> str:
    return ", ".join(f"{m} {c}" for m, c in sorted(counter.items())) or "none"


async def run() -> list[Table]:
    results = [await _measure(n) for n in SIZES]
    timing = Table(
        f"2. Poll sweep `sync_live()` (median of {QUIET_SWEEPS} quiet sweeps after a warm-up)",
        ["clusters", "sweep ms", "ms/cluster", "peak KiB", "KiB/cluster", "SQL/sweep",
         "txns/sweep", "GETs/sweep", "Slack calls", "degraded ms"],
    )
    for f in results:
        quiet = statistics.median(f.quiet)
        timing.rows.append([
            str(f.n), f"{quiet * 1000:.1f}", f"{quiet * 1000 / f.n:.2f}",
            f"{f.peak_bytes / 1024:.0f}", f"{f.peak_bytes / 1024 / f.n:.1f}",
            str(f.quiet_statements), str(f.quiet_transactions),
            str(f.quiet_provider["get_cluster"]), str(sum(f.quiet_slack.values())),
            f"{f.degraded * 1000:.1f}",
        ])
    small, large = results[0], results[-1]
    scale = statistics.median(large.quiet) / statistics.median(small.quiet)
    timing.notes.append(
        f"scaling {large.n}/{small.n}: quiet sweep x{scale:.1f} for x{large.n / small.n:g} "
        f"clusters (linear = x{large.n / small.n:g}); degraded sweep "
        f"x{large.degraded / small.degraded:.1f}")
    timing.notes.append(
        "provider reads per quiet sweep: " + "; ".join(
            f"N={f.n}: {_calls(f.quiet_provider)}" for f in results))
    timing.notes.append(
        f"SQL of a quiet sweep at N={large.n}: {_calls(large.quiet_kinds)}")
    degraded = Table(
        "   Sweep after node 1 of every cluster failed (Slack Web API calls)",
        ["clusters", "degraded sweep", "SQL", "notices left", "next sweep"],
    )
    for f in results:
        degraded.rows.append([str(f.n), _calls(f.degraded_slack), str(f.degraded_statements),
                              str(f.left_pending), _calls(f.next_slack)])
    degraded.notes.append("each degraded cluster should cost 1 chat.postMessage (thread notice, "
                          "broadcast) + 1 chat.update (its top message)")
    return [timing, degraded]
