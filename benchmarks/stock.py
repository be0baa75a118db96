"""Waiting for stock: AI Reserve calls per minute with 100 requests waiting (bot/services/stock.py).

A whole bot (tests/e2e/harness.py) on the simulator's virtual clock, 100 requests stored as
`waiting` with no stock anywhere they want, and the stock sweep run as the scheduler runs it
(every 60 s) for two virtual hours. Three spreads: all 100 on one shape in one place, on 10
shapes-and-places, and on 100 different ones. The figure is quote calls per minute — the peak
minute, the first hour's mean and the second hour's — against AI Reserve's published limits
(contract §7: 30 quotes a minute per API key, 120 requests a minute overall). A figure, not an
assertion: `python -m benchmarks stock`.
"""

from __future__ import annotations

import tempfile
import uuid
from datetime import timedelta
from pathlib import Path

from benchmarks.report import Table
from bot.domain import stock as rules
from bot.domain.models import (
    LaunchRequest,
    QuoteInfo,
    QuoteSpec,
    RequestStatus,
    ShapeSpec,
    Workload,
)
from tests.e2e.harness import ALICE, GENERAL, bot

WAITERS = 100
MINUTES = 120
QUOTE_LIMIT, OVERALL_LIMIT = 30, 120  # per minute per API key (contract §7)
ACCELERATORS = ("h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "b200-sxm-180gb",
                "mi300x-192gb")
LOCATIONS = ("us-tx", "us-ga", "eu-ro", "ca-mtl")


def shapes(groups: int) -> list[tuple[str, int, str]]:
    """`groups` distinct (accelerator, nodes, location)."""
    found = [(a, n, loc) for n in range(2, 9) for a in ACCELERATORS for loc in LOCATIONS]
    return found[:groups]


async def one(groups: int, *, stock_at: int | None = None) -> tuple[int, float, float, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        async with bot(Path(tmp)) as h:
            engine = h.sim.engine
            used = shapes(groups)
            for accelerator, _, location in used:
                engine.set_capacity(accelerator=accelerator, location=location,
                                    availability="none", placeable_nodes=0)
            now = h.clock.now()
            async with h.rt.db.transaction() as repos:
                for i in range(WAITERS):
                    accelerator, nodes, location = used[i % groups]
                    quote = QuoteInfo(
                        id=f"qte_bench{i}", spec=QuoteSpec(
                            shape=ShapeSpec(accelerator=accelerator, gpus_per_node=8,
                                            nodes=nodes), location=location),
                        accelerator_name=accelerator, location=location, hourly_cents=10_000,
                        per_gpu_hourly_cents=100, lines=(), availability="none",
                        created_at=now, expires_at=now + timedelta(minutes=10),
                        requested_by=ALICE, channel_id=GENERAL)
                    await repos.quotes.add(quote)
                    await repos.requests.add(LaunchRequest(
                        id=f"lr_{uuid.uuid4().hex[:12]}", quote_id=quote.id, requester_id=ALICE,
                        team_id=None, channel_id=GENERAL, workload=Workload(),
                        status=RequestStatus.WAITING, hourly_cents=1_000_000,
                        created_at=now, updated_at=now, wait_hours=72,
                        wait_until=now + timedelta(hours=72), wait_next_at=now))
            per_minute, all_launched = [], 0
            for minute in range(MINUTES):
                if minute == stock_at:
                    for accelerator, _, location in used:
                        engine.set_capacity(accelerator=accelerator, location=location,
                                            availability="high", placeable_nodes=8)
                per_minute.append(await h.rt.services.stock_service().sweep())
                await h.rt.settle()
                if not all_launched and len(engine.list_clusters()) == WAITERS:
                    all_launched = minute + 1 - (stock_at or 0)
                h.clock.advance(60)
            if stock_at is None:
                assert engine.list_clusters() == []  # no stock: nothing launched
            first, second = per_minute[:60], per_minute[60:]
            return (max(per_minute), sum(first) / 60, sum(second) / 60, sum(per_minute),
                    all_launched)


async def run() -> list[Table]:
    table = Table(
        f"Waiting for stock: quote calls per minute, {WAITERS} requests waiting, "
        f"{MINUTES} virtual minutes",
        ["spread", "peak/min", "mean/min 1st h", "mean/min 2nd h", "calls in all",
         f"vs quote limit {QUOTE_LIMIT}/min"])
    for groups, label in ((1, "1 shape+place"), (10, "10 shapes+places"),
                          (WAITERS, "100 shapes+places")):
        peak, first, second, total, _ = await one(groups)
        table.rows.append([label, str(peak), f"{first:.2f}", f"{second:.2f}", str(total),
                           f"{peak / QUOTE_LIMIT:.0%} at the peak"])
    peak, first, second, total, took = await one(1, stock_at=30)
    table.rows.append(["1 shape+place, stock at 30 min", str(peak), f"{first:.2f}",
                       f"{second:.2f}", str(total), f"{peak / QUOTE_LIMIT:.0%} at the peak"])
    table.notes.append(f"stock at minute 30 for all 100 of one shape: all launched within "
                       f"{took} min (quote + launch for ≤ 10 waiters a sweep: AI Reserve "
                       "allows 10 launches a minute)")
    table.notes += [
        f"one quote per shape and place per round; back-off {rules.FIRST_CHECK.seconds // 60}, "
        f"2, 4, 8 then every {rules.LONGEST_CHECK.seconds // 60} min; at most "
        f"{rules.MAX_QUOTES_PER_MINUTE} quotes a minute (the sweep runs every minute here)",
        f"AI Reserve publishes {QUOTE_LIMIT} quotes/min and {OVERALL_LIMIT} requests/min per "
        "key (contract §7); stock found costs one more quote per waiter, then its launch"]
    return [table]
