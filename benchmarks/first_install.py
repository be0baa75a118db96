"""A first install on a busy account (issue 28, item 1), at 1,000 outside clusters: the figure
tests/test_first_install.py checks at 40, in the same real processes (the bot, the AI Reserve
simulator, FakeSlack enforcing Slack's one post per second per channel; tests/procs/, a 1 s
poll).

AI Reserve runs one cluster the bot launched and OUTSIDE nobody told it about; the bot starts,
its first sweep finds them; then the tracked cluster loses a node. Measured: how long until its
owner's degraded notice is posted (target: poll + 5 s), how many top-level posts the approvals
channel got (target: a handful), and the watch sweep's age (`/metrics`) while it all happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks.report import Table
from tests import storm as storms
from tests.procs import World, wait_for, world

OUTSIDE = 1000
POLL_SECONDS = 1  # tests/procs/worlds.py's bots
WAIT = 120  # seconds
LIMITS = "chat.postMessage=1/s/channel,chat.update=4/s"
SCRAPE_SECONDS = 1.0  # /metrics reads the database: scraped every 50 ms it slowed the bot
AGE = re.compile(r'clusterbot_last_sweep_timestamp_seconds\{sweep="watch_clusters"\} (\S+)')


async def _sweep_age(session: aiohttp.ClientSession, internal_url: str) -> float | None:
    async with session.get(f"{internal_url}/metrics") as r:
        found = AGE.search(await r.text())
    return time.time() - float(found[1]) if found else None


async def _adopted(w: World) -> int:
    async with w.database() as db, db.transaction() as repos:
        return len([c for c in await repos.clusters.list_live() if c.adopted])


async def run() -> list[Table]:
    with tempfile.TemporaryDirectory() as tmp_name:
        async with world(Path(tmp_name), slack_limits=LIMITS) as w, \
                aiohttp.ClientSession() as session:
            tracked = await storms.seed(w, 1)
            [cluster_id] = tracked.clusters
            await w.sim.admin("clusters/seed", {"count": OUTSIDE})
            await w.advance(120)
            started = time.perf_counter()
            bot = await w.bot(env={"SLACK_RATE_LIMITS": LIMITS})
            await wait_for(lambda: _adopted(w), within=300, what="the first sweep finding them")
            found_after = time.perf_counter() - started
            ages: list[float] = []

            async def scrape() -> None:  # as Prometheus would, if more often (it reads the DB)
                while True:
                    if (age := await _sweep_age(session, bot.internal_url)) is not None:
                        ages.append(age)
                    await asyncio.sleep(SCRAPE_SECONDS)

            scraping = asyncio.create_task(scrape())
            loop = asyncio.get_running_loop()
            struck = loop.time()
            await w.sim.fail_node(cluster_id, 1)
            try:
                await wait_for(lambda: [c for _, c in storms.notices(w, tracked)
                                        if "degraded" in storms.said(c).lower()],
                               within=WAIT, what="the tracked cluster's degraded notice")
                told_after: float | None = loop.time() - struck
            except AssertionError:  # a figure too: not told within WAIT
                told_after = None
            scraping.cancel()
            with contextlib.suppress(AssertionError):
                await wait_for(lambda: [c for _, c in storms.top_posts(w)
                                        if "nobody here launched" in storms.said(c)],
                               within=WAIT, what="the digest of the found clusters")
            posts = len(storms.top_posts(w))
    table = Table(f"28c. First install with {OUTSIDE:,} outside clusters (real processes, "
                  f"{POLL_SECONDS} s poll, Slack's 1 post/s per channel)",
                  ["degraded notice after", "target", "approvals-channel posts",
                   "watch sweep age (max while waiting)",
                   "first found after start (the node fails then)"])
    told = f"{told_after:.1f} s" if told_after is not None else f"not within {WAIT} s"
    table.rows.append([told, f"≤ {POLL_SECONDS + 5} s", str(posts),
                       f"{max(ages):.1f} s" if ages else "n/a", f"{found_after:.1f} s"])
    table.notes.append("before item 1 (300 outside clusters): no degraded notice within "
                       "120 s, 123 cards in two minutes, the sweep 131 s old")
    return [table]
