"""A storm in real processes: many clusters degraded at once (a region outage) while FakeSlack
enforces Slack's limits per channel and per method. An approval card asked for mid-storm goes
out before the storm's remaining notices, an enforced envelope's terminate doesn't wait for
them, nothing is dropped or told twice, every cluster's card ends showing its state, and
/readyz stays green throughout (issue 17). `make bench storm` runs it at 250 clusters."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests import storm as storms
from tests.procs import BotProcess, World, wait_for, world

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)

# Slack's shape, faster: per channel for posts (the storm's notices and a new card share the
# approvals channel), a workspace cap on posts, and chat.update's Tier-3-like budget.
LIMITS = "chat.postMessage=2/s/channel,chat.postMessage=20/s,chat.update=4/s"
CLUSTERS = 30
# The promise, in time: the approval card within 5 s of the request's Submit, whatever the
# storm (`make bench`'s target too). Counted from Submit, not from the slash command: the
# person's own clicks through quote and modal take seconds on a busy machine, and the storm
# rightly goes on meanwhile. A card queued behind the storm would wait for its 30 notices at
# 2/s, ~15 s; it goes first in Slack's turns (bot/slack/pacing.py) and in the database's
# (storage/turns.py), waiting for the post and the transaction in progress. Measured on 2
# cores at load 13-27: 0.4-4.5 s (issue 32); 3 s did not hold there.
CARD_WITHIN = 5.0


async def test_a_storm_delays_neither_approval_cards_nor_money_and_drops_nothing(tmp_path):
    async with world(tmp_path, slack_limits=LIMITS) as w:
        storm = await storms.seed(w, CLUSTERS)
        bot = await w.bot(env={"SLACK_RATE_LIMITS": LIMITS})
        await wait_for(bot.ready, what="/readyz green before the storm")
        probes: list[int] = []
        sampler = asyncio.create_task(_sample(bot, probes))

        try:
            await storms.strike(w, storm)
            # Setup, not a promise: 30 nodes failed one by one, then a poll sees them (on 2
            # busy cores this took over 20 s in 3 of 10 runs, issue 32).
            await wait_for(lambda: storms.notices(w, storm), within=60,
                           what="the storm's first notice")
            asked = len(w.slack.calls)
            pressed = await storms.ask_for_a_launch(w, bot)
            [(card_at, card)] = await wait_for(lambda: storms.cards(w, asked), what="the card")
            # What the person feels: the card in the approvals channel soon after Submit, while
            # the storm's notices in that channel still wait their turns (after it, below).
            assert (card.at - pressed).total_seconds() <= CARD_WITHIN, (pressed, card.at)

            await storms.to_the_envelope(w, storm)  # its terminate falls due, mid-storm
            # Virtual time stands still meanwhile, so a slow terminate costs no hour; what it
            # must not do is wait for the storm's notices (`ended_at < told[-1]` below). 20 s of
            # wall time was once not enough on 2 cores running the whole suite (issue 32).
            await wait_for(lambda: _ended(w, storm.envelope), within=45,
                           what="the envelope's terminate")
            ended_at = len(w.slack.calls)

            told = await wait_for(lambda: [i for i, _ in storms.notices(w, storm)]
                                  if len(storms.notices(w, storm)) >= CLUSTERS else None,
                                  within=120, what="the storm's notices, drained")
            # The card went out with the storm's notices still queued; the terminate didn't wait
            # for them.
            assert [i for i in told if i > card_at]
            assert ended_at < told[-1]

            states = {c["id"]: c["status"] for c in await w.sim.clusters()}
            await wait_for(lambda: not storms.shows(w, storm, states), within=60,
                           what="every card showing its cluster's state")
            per_cluster = Counter(c.args["thread_ts"] for _, c in storms.notices(w, storm)
                                  if "degraded" in storms.said(c).lower())
            assert set(per_cluster.values()) == {1} and len(per_cluster) == CLUSTERS  # told once
            # ... and the channel had one digest of the storm (edited in place), not 30 posts,
            # shown while the storm's notices were still going out (before the last of them).
            [(digest_at, _)] = storms.digests(w)
            assert digest_at < told[-1], (digest_at, told)
            [enveloped] = [c for c in await w.sim.clusters() if c["id"] == storm.envelope]
            assert enveloped["billing"]["accruedHours"] <= 1  # never an unapproved hour

        finally:
            sampler.cancel()
        assert probes and set(probes) == {200}, Counter(probes)


async def _ended(w: World, cluster_id: str) -> bool:
    return any(c["id"] == cluster_id and c["status"] in ("terminating", "terminated")
               for c in await w.sim.clusters())


async def _sample(bot: BotProcess, probes: list[int]) -> None:
    while True:
        probes.append((await bot.get("/readyz"))[0])
        await asyncio.sleep(0.25)  # a readiness probe's period, not time passing for the test
