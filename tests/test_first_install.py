"""A first install on a busy account, in real processes (issue 28, item 1): AI Reserve already
runs clusters nobody told the bot about. The watch sweep records them and goes on watching —
it never waits for Slack to show them — so a tracked cluster that loses a node is told within a
poll and a few seconds, and the approvals channel gets one digest of the found clusters, not a
card each (FakeSlack enforces Slack's one post per second per channel)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests import storm as storms
from tests.procs import BOB, World, wait_for, world

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)

LIMITS = "chat.postMessage=1/s/channel,chat.update=4/s"  # Slack's post limit, per channel
OUTSIDE = 40  # today's code posts one card each, inline in the sweep: 40 s of one sweep
TOLD_WITHIN = 1 + 5  # the bots' poll (tests/procs/worlds.py) + 5 s
FOUND = re.compile(rf"{OUTSIDE} clusters running that nobody here launched")


async def test_a_first_install_with_outside_clusters_keeps_watching_the_tracked_ones(tmp_path):
    async with world(tmp_path, slack_limits=LIMITS) as w:
        tracked = await storms.seed(w, 1)  # the bot's own, with its card
        [cluster_id] = tracked.clusters
        await w.sim.admin("clusters/seed", {"count": OUTSIDE})  # launched elsewhere
        await w.advance(120)
        bot = await w.bot(env={"SLACK_RATE_LIMITS": LIMITS})
        await wait_for(lambda: _adopted(w), within=30, what="the first sweep finding them")

        loop = asyncio.get_running_loop()
        struck = loop.time()
        await w.sim.fail_node(cluster_id, 1)
        await wait_for(lambda: [c for _, c in storms.notices(w, tracked)
                                if "degraded" in storms.said(c).lower()],
                       within=TOLD_WITHIN, what="the tracked cluster's degraded notice")
        told_after = loop.time() - struck

        digest = await wait_for(lambda: [c for _, c in storms.top_posts(w)
                                         if FOUND.search(storms.said(c))],
                                within=30, what="one digest of the found clusters")
        assert len(digest) == 1
        # A handful of posts, not a card each: the digest, and what a storm of one says.
        assert len(storms.top_posts(w)) <= 5, [storms.said(c)[:80] for _, c in storms.top_posts(w)]
        assert told_after <= TOLD_WITHIN
        home = await _home_of(w, bot, BOB)
        assert "Claim" in home and "nobody here launched" in home


async def _adopted(w: World) -> int:
    async with w.database() as db, db.transaction() as repos:
        return len([c for c in await repos.clusters.list_live() if c.adopted])


async def _home_of(w: World, bot, user: str) -> str:
    await bot.requests.app_home_opened(user)
    view = await wait_for(lambda: w.slack.home(user), what=f"{user}'s home")
    return json.dumps(view)
