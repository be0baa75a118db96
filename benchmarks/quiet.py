"""Ten thousand clusters (issue 28, item 3): what one quiet watch sweep costs at 1,000 and
10,000 live clusters, beside a raw aiohttp client listing the same pages in the same run, and
what each of the sweeps' other duties adds at each size.

Each size runs in a process of its own (`python -m benchmarks.quiet N`: its peak RSS is its
own), with the bot's whole runtime in it (bot/app/runtime.py, scheduler off: the benchmark runs
the production sweep functions itself, one at a time) and the AI Reserve simulator in another
process, so the CPU measured is the bot's alone (`time.process_time()`, every thread). The
clusters are seeded at the simulator and recorded in the bot's database already observed, as a
bot that has watched them for a while has them (benchmarks/world.py); one warm-up sweep first.

- quiet sweep (`watch_clusters`, as the scheduler runs it): wall, CPU, AI Reserve requests, SQL
  statements and writes; then the raw client's listing of the same statuses: wall, CPU, calls;
- the duties one by one, on the quiet account (each is part of the watch sweep or a sweep of
  its own at the same poll): the readiness / idle log follower, the escalation of degraded
  clusters, expired approvals, spend envelopes (money), terminations, waiting for stock, the
  delivery sweep (notices, digests, queued messages);
- the hour mark: AI Reserve's clock passes an hour, every cluster accrues one (charges), and
  the next sweep stores each changed cluster and queues its reminder — the loud sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.report import Table, db_statements
from benchmarks.world import World, rss_mib
from bot.app import runtime
from bot.config.settings import load_settings
from bot.jobs import sweeps
from bot.reserve.retry import counting_sent
from bot.services.container import Services
from devslack.webapi import FakeSlack
from tests.e2e.harness import APPROVALS, GENERAL, SECRET
from tests.procs import SimProcess

SIZES = (1000, 10_000)
SWEEPS = 3  # measured, after one warm-up
POLL_SECONDS = 5
SEED_AT_ONCE = 2000  # per seed call (at most 10,000; a busy machine takes minutes for many)

DUTIES: dict[str, Callable[[Services], Awaitable[object]]] = {
    "readiness / idle follower": lambda s: s.watching.readiness.follow()  # type: ignore[union-attr]
    if s.watching.readiness else asyncio.sleep(0),
    "degraded escalation": lambda s: s.watching.duty.escalate_due()  # type: ignore[union-attr]
    if s.watching.duty else asyncio.sleep(0),
    "expired approvals": lambda s: s.approvals.show_expired(),
    "spend envelopes (money)": sweeps.enforce_envelopes,
    "terminations": sweeps.finish_terminations,
    "stock waits": sweeps.look_for_stock,
    "delivery (notices, digests)": sweeps.deliver_outbox,
}


async def _timed(work: Callable[[], Awaitable[object]], rt: runtime.Runtime) -> dict[str, float]:
    with counting_sent() as sent, db_statements(rt.db.engine) as db:
        wall, cpu = time.perf_counter(), time.process_time()
        await work()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"wall": wall, "cpu": cpu, "calls": sent.requests, "sql": db.statements,
            "writes": sum(db.kinds[k] for k in ("INSERT", "UPDATE", "DELETE"))}


async def measure(n: int) -> dict[str, Any]:
    """One size, in this process: the figures as JSON-ready data."""
    out: dict[str, Any] = {"n": n, "sweeps": [], "raw": [], "duties": {}}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        async with AsyncExitStack() as stack:
            sim = SimProcess(tmp, profile="fast")

            async def stop_sim() -> None:  # a simulator slow to stop is killed: not a figure
                with contextlib.suppress(AssertionError):
                    await sim.stop()

            stack.push_async_callback(stop_sim)
            await sim.start()
            await sim.admin("account", {"balanceCents": 10**12})
            slack = await stack.enter_async_context(FakeSlack(
                channels={GENERAL: "general", APPROVALS: "approvals"}))
            session = await stack.enter_async_context(aiohttp.ClientSession())
            w = World(tmp=tmp, session=session, sim=sim, slack={},
                      database_url=f"sqlite:///{tmp / 'bot.db'}")
            while w.seeded < n:
                await w.grow_to(min(n, w.seeded + SEED_AT_ONCE))
            rt = await stack.enter_async_context(runtime.start(load_settings({
                "SLACK_BOT_TOKEN": slack.bot_token, "SLACK_SIGNING_SECRET": SECRET,
                "SLACK_API_URL": slack.api_url, "DATABASE_URL": w.database_url,
                "AIRESERVE_API_URL": sim.base_url, "AIRESERVE_API_KEY": sim.api_key,
                "APPROVALS_CHANNEL": APPROVALS, "APPROVERS": "U0BOB,U0CAROL",
                "POLL_INTERVAL_SECONDS": str(POLL_SECONDS)}), scheduler=False))
            services = rt.services
            out["warm-up"] = await _timed(lambda: sweeps.watch_clusters(services), rt)
            for _ in range(SWEEPS):
                out["sweeps"].append(await _timed(lambda: sweeps.watch_clusters(services), rt))
                wall, cpu = time.perf_counter(), time.process_time()
                _, calls = await w.list_raw()
                out["raw"].append({"wall": time.perf_counter() - wall,
                                   "cpu": time.process_time() - cpu, "calls": calls})
            out["rss"] = rss_mib(os.getpid())
            for name, duty in DUTIES.items():
                out["duties"][name] = await _timed(lambda d=duty: d(services), rt)  # type: ignore[misc]
            await sim.advance(3600)
            out["hour"] = await _timed(lambda: sweeps.watch_clusters(services), rt)
            out["after hour"] = await _timed(lambda: sweeps.watch_clusters(services), rt)
            out["rss after"] = rss_mib(os.getpid())
    return out


async def _child(n: int) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.quiet", str(n), stdout=asyncio.subprocess.PIPE)
    stdout, _ = await proc.communicate()
    assert proc.returncode == 0, f"benchmarks.quiet {n} exited {proc.returncode}"
    result: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return result


def _med(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _spread(rows: list[dict[str, float]], key: str, unit: str = " s") -> str:
    got = [r[key] for r in rows]
    return f"{statistics.median(got):.3g}{unit} [{min(got):.3g}–{max(got):.3g}]"


async def run() -> list[Table]:
    results = [await _child(n) for n in SIZES]
    sweep = Table(
        f"28a. Quiet watch sweep vs a raw client listing the same (median [min–max] of "
        f"{SWEEPS} after a warm-up; poll {POLL_SECONDS} s)",
        ["clusters", "sweep wall", "sweep CPU", "raw wall", "raw CPU", "CPU ×raw",
         "calls (raw)", "SQL / writes", "RSS MiB (peak)", "warm-up CPU"])
    for r in results:
        s, raw = r["sweeps"], r["raw"]
        sweep.rows.append([
            f"{r['n']:,}", _spread(s, "wall"), _spread(s, "cpu"), _spread(raw, "wall"),
            _spread(raw, "cpu"), f"{_med(s, 'cpu') / _med(raw, 'cpu'):.2f}×",
            f"{max(x['calls'] for x in s):.0f} ({raw[0]['calls']})",
            f"{max(x['sql'] for x in s):.0f} / {max(x['writes'] for x in s):.0f}",
            f"{r['rss'][0]:.0f} ({r['rss'][1]:.0f})", f"{r['warm-up']['cpu']:.2f} s"])
    small, large = results[0], results[-1]
    sweep.notes.append(
        f"growth {large['n'] // small['n']}× clusters: sweep CPU "
        f"{_med(large['sweeps'], 'cpu') / _med(small['sweeps'], 'cpu'):.1f}×, raw CPU "
        f"{_med(large['raw'], 'cpu') / _med(small['raw'], 'cpu'):.1f}×")
    sweep.notes.append("wall is bound by the simulator (a process on the same cores, O(N) per "
                       "page): the raw client's wall is that floor; the warm-up sweep judges "
                       "every cluster (the cost of a restart's first sweep)")
    duties = Table("28b. What each duty costs per run on the quiet account (s CPU / s wall / "
                   "AI Reserve calls / SQL statements)",
                   ["duty", *(f"{r['n']:,} clusters" for r in results)])
    for name in DUTIES:
        duties.rows.append([name, *(
            f"{d['cpu']:.3f} / {d['wall']:.3f} / {d['calls']:.0f} / {d['sql']:.0f}"
            for d in (r["duties"][name] for r in results))])
    for key, label in (("hour", "hour mark: every cluster accrues (charges, reminders)"),
                       ("after hour", "the sweep after it (quiet again)")):
        duties.rows.append([label, *(
            f"{r[key]['cpu']:.3f} / {r[key]['wall']:.3f} / {r[key]['calls']:.0f} / "
            f"{r[key]['sql']:.0f} ({r[key]['writes']:.0f} writes)" for r in results)])
    duties.notes.append("the follower, the escalation and expired approvals run inside the "
                        "watch sweep (28a includes them); the others are sweeps of their own")
    duties.notes.append("RSS after the hour mark (MiB, peak): " + ", ".join(
        f"{r['n']:,}: {r['rss after'][0]:.0f} ({r['rss after'][1]:.0f})" for r in results))
    return [sweep, duties]


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.ERROR)
    sys.stdout.write(json.dumps(asyncio.run(measure(int(sys.argv[1])))) + "\n")
