"""Clusters found at AI Reserve that nobody here launched (issue 28, item 1): the watch sweep
records them and tells nobody — the delivery sweep does, a card each for a few, one digest per
channel for many ("N clusters running that nobody here launched, $X/h"), each claimable from
the digest and from the approvers' App Home, and never an hourly DM per cluster per approver."""

from __future__ import annotations

import json

from bot.jobs import sweeps
from bot.slack.ids import Action, ClusterRef
from tests.e2e.harness import APPROVALS, BOB, CAROL, bot


def _found(h) -> list:
    return [m for m in h.slack.messages(APPROVALS) if "nobody here launched" in h.text_of(m)]


def _posts(h, since: int) -> list:
    return [c for c in h.slack.calls[since:] if c.method in ("chat.postMessage", "chat.update")]


async def _outside(h, count: int) -> list[str]:
    ids = (await h.sim_admin("clusters/seed", {"count": count}))["data"]
    h.clock.advance(120)  # booted
    return ids


async def test_many_found_together_are_one_digest_claimable_from_it_and_from_home(tmp_path):
    async with bot(tmp_path) as h:
        ids = await _outside(h, 8)
        before = len(h.slack.calls)
        await sweeps.watch_clusters(h.rt.services)
        assert _posts(h, before) == []  # the sweep records; it never waits for Slack
        async with h.rt.db.transaction() as repos:
            assert len(await repos.clusters.unclaimed()) == 8

        await sweeps.deliver_outbox(h.rt.services)
        [digest] = _found(h)
        assert "8 clusters running that nobody here launched" in digest.text
        assert h.slack.messages(APPROVALS) == [digest]  # one post, not eight cards
        assert {b.value for b in h.slack.find_buttons(digest)
                if b.action_id == Action.CLAIM} == {ClusterRef(cluster_id=i).pack() for i in ids}

        # Claimed from the digest: it is Bob's, and the digest shows the other seven.
        await h.click(digest, Action.CLAIM, user=BOB, value=ClusterRef(cluster_id=ids[0]).pack())
        assert (await h.record(ids[0])).owner_id == BOB
        await sweeps.deliver_outbox(h.rt.services)
        [digest] = _found(h)
        assert "7 clusters running" in digest.text

        # Claimed from Home: the approvers' Home lists them, each with Claim.
        await h.requests.app_home_opened(CAROL)
        await h.rt.settle()
        home = h.slack.home(CAROL)
        assert home is not None
        assert "7 clusters running that nobody here launched" in json.dumps(home)
        await h.click(home, Action.CLAIM, user=CAROL, value=ClusterRef(cluster_id=ids[1]).pack())
        assert (await h.record(ids[1])).owner_id == CAROL

        # Hours later: the unclaimed ones are reminded by the digest, not a DM each.
        dms = len(h.slack.dms(BOB))
        for _ in range(3):
            h.clock.advance(3600)
            await sweeps.watch_clusters(h.rt.services)
            await sweeps.deliver_outbox(h.rt.services)
            await sweeps.deliver_outbox(h.rt.services)
        reminded = [m for m in h.slack.dms(BOB)[dms:] if Action.KEEP_RUNNING in h.text_of(m)]
        assert len(reminded) <= 3, len(reminded)  # Bob's own cluster's, hourly
        [digest] = _found(h)
        assert "6 clusters running" in digest.text


async def test_a_few_found_get_a_card_each_and_many_more_join_the_digest(tmp_path):
    async with bot(tmp_path) as h:
        await _outside(h, 7)
        await sweeps.watch_clusters(h.rt.services)
        await sweeps.deliver_outbox(h.rt.services)
        [digest] = _found(h)
        few = await _outside(h, 2)  # found later, a few: a card each
        await sweeps.watch_clusters(h.rt.services)
        await sweeps.deliver_outbox(h.rt.services)
        for cluster_id in few:
            card = await h.top(cluster_id)
            assert Action.CLAIM in h.text_of(card) and card.channel == APPROVALS
        await _outside(h, 6)  # many more: they join the digest, and its thread says so
        await sweeps.watch_clusters(h.rt.services)
        await sweeps.deliver_outbox(h.rt.services)
        [digest] = _found(h)
        assert "13 clusters running" in digest.text
        [more] = h.slack.thread(APPROVALS, digest.ts)[1:]
        assert "6 more clusters found" in more.text
        assert len(h.slack.messages(APPROVALS)) == 3  # the digest and two cards
