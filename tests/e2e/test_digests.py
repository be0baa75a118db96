"""Storms become digests (issue 17, item 2): when more than five clusters of a channel degrade
within one poll, the channel gets one digest message — the count, the location, the $/h still
billing degraded, a row and a thread link per cluster, Recover all mine — edited in place as
the storm evolves, instead of a broadcast per cluster; each cluster's thread still gets its
line. The digest is stored: three replicas post it once."""

import asyncio

import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.digest import STORM_THRESHOLD
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, DAVE, GENERAL, LEADS, START, fake_slack, replicas
from tests.e2e.harness import bot as one_bot

# Each test builds a storm of clusters through the whole bot: long ones, scheduled early
# (tests/conftest.py).
pytestmark = pytest.mark.slow

STORM = STORM_THRESHOLD + 2


def digests(h):
    return [m for m in h.slack.messages(GENERAL) if "degraded in" in m.text
            or m.text.startswith("Storm over")]


def broadcasts(h):
    return [m for m in h.slack.messages(GENERAL) if m.is_reply]


async def clusters(h, n, *, owner=ALICE):
    before = {r.id for r in await h.requests_in_db()}
    for _ in range(n):
        card = await h.request(user=owner, quote_text="quote h100x8 nodes=2")
        await h.click(card, Action.APPROVE, user=BOB)
    out = sorted(r.cluster_id for r in await h.requests_in_db() if r.id not in before)
    assert len(out) == n and None not in out
    await h.advance(60)
    for cluster_id in out:
        assert (await h.record(cluster_id)).status.value == "running"
    return out


async def fail_all(h, ids):
    for cluster_id in ids:
        await h.fail_node(cluster_id)


async def test_a_storm_is_one_digest_edited_in_place(tmp_path):
    async with one_bot(tmp_path) as h:
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=64)
        mine = await clusters(h, STORM - 1)
        [daves] = await clusters(h, 1, owner=DAVE)
        ids = [*mine, daves]
        await fail_all(h, ids)
        await h.advance(30)

        [digest] = digests(h)
        text = h.text_of(digest)
        rate = (await h.record(ids[0])).hourly_cents
        assert f"{STORM} clusters degraded in us-tx" in digest.text
        assert f"${rate * STORM / 100:,.2f}/h billing degraded" in digest.text
        for cluster_id in ids:
            assert cluster_id in text
            assert await h.notices(cluster_id, "is degraded")  # each thread still has its line
        assert text.count("slack.com/archives/") == STORM
        assert broadcasts(h) == []  # no broadcast per cluster: the digest speaks for them
        assert [b.action_id for b in h.slack.find_buttons(digest)] == [Action.RECOVER_ALL_MINE]
        # Every owner is told once, by DM: Alice of her six, Dave of his one.
        [alice_dm] = [m for m in h.slack.dms(ALICE) if "degraded in a storm" in m.text]
        assert f"{STORM - 1} clusters of yours" in alice_dm.text
        assert all(cluster_id in h.text_of(alice_dm) for cluster_id in mine)
        [dave_dm] = [m for m in h.slack.dms(DAVE) if "degraded in a storm" in m.text]
        assert daves in h.text_of(dave_dm) and mine[0] not in h.text_of(dave_dm)

        edits = len(h.slack.calls_to("chat.update"))
        await h.advance(30)  # nothing changed: the digest is not edited again
        assert len(h.slack.calls_to("chat.update")) == edits

        await h.click(digest, Action.RECOVER_ALL_MINE, user=ALICE)
        answer = h.text_of(h.last_ephemeral(ALICE, containing="Recovery attempt started"))
        assert f"{STORM - 1} clusters of yours" in answer and daves not in answer
        assert all(cluster_id in answer for cluster_id in mine)
        for _ in range(12):
            await h.advance(30)
        for cluster_id in mine:
            assert (await h.record(cluster_id)).status.value == "running"
        assert (await h.record(daves)).status.value == "degraded"  # not Alice's to recover

        [same] = digests(h)
        assert same.ts == digest.ts  # edited in place
        assert len([m for m in h.slack.dms(ALICE) if "degraded in a storm" in m.text]) == 1
        assert "1 cluster degraded in us-tx" in same.text
        assert f"${rate / 100:,.2f}/h billing degraded" in same.text
        assert "running again" in h.text_of(same)

        await h.slash(f"terminate {daves}", user=DAVE)
        await h.click(h.last_ephemeral(DAVE, containing=Action.TERMINATE), Action.TERMINATE,
                      user=DAVE)
        for _ in range(4):
            await h.advance(60)
        [over] = digests(h)
        assert over.ts == digest.ts and over.text.startswith("Storm over")
        assert "terminated" in h.text_of(over)
        assert h.slack.find_buttons(over) == []
        assert broadcasts(h) == []


async def test_a_few_at_once_are_not_a_storm(tmp_path):
    async with one_bot(tmp_path) as h:
        ids = await clusters(h, STORM_THRESHOLD)
        await fail_all(h, ids)
        await h.advance(30)
        assert digests(h) == []
        assert len(broadcasts(h)) == STORM_THRESHOLD  # each degraded notice as before


async def test_recover_all_mine_recovers_only_the_pressers_own_degraded_ones(tmp_path):
    async with one_bot(tmp_path) as h:
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=64)
        ids = await clusters(h, STORM)
        await h.sim_admin(f"clusters/{ids[0]}/nodes/1/recoverable", {"value": False})
        await fail_all(h, ids)
        await h.advance(30)
        for _ in range(3):  # ids[0]: every attempt spent
            await h.slash(f"recover {ids[0]}", user=ALICE)
            await h.advance(30)
        assert h.sim.engine.get_cluster(ids[0]).recovery.state.value == "exhausted"
        [digest] = digests(h)

        await h.click(digest, Action.RECOVER_ALL_MINE, user=DAVE)  # owns none of them
        assert "None of the clusters in this storm is yours" in h.text_of(
            h.slack.ephemerals(DAVE)[-1])
        await h.click(digest, Action.RECOVER_ALL_MINE, user=ALICE)
        answer = h.text_of(h.last_ephemeral(ALICE, containing="Recovery attempt started"))
        assert f"{STORM - 1} clusters of yours" in answer
        assert f"`{ids[0]}` not recovered: every recovery attempt" in answer
        calls = h.sim.engine.get_cluster(ids[0]).recovery.attempts_used
        assert calls == 3  # nothing asked of AI Reserve for the exhausted one
        async with h.rt.db.transaction() as repos:
            rows = [e for e in await repos.audit.list(limit=500)
                    if e.action == "recover" and e.outcome == "ok"]
        assert len(rows) == 3 + STORM - 1  # one row per recovery, as a Recover press writes


async def test_three_replicas_post_one_digest(tmp_path):
    async with replicas(tmp_path, 3, database_url=None) as bots:
        h = bots[0]
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=64)
        ids = await clusters(h, STORM)
        await fail_all(h, ids)
        h.clock.advance(30)
        await asyncio.gather(*(b.rt.services.watching.sync_live() for b in bots))
        for b in bots:
            await b.rt.settle()
        assert len(digests(h)) == 1
        assert broadcasts(h) == []
        posts = [c for c in h.slack.calls_to("chat.postMessage")
                 if c.args.get("channel") == GENERAL
                 and "degraded in" in str(c.args.get("text", ""))]
        assert len(posts) == 1
        assert len([m for m in h.slack.dms(ALICE) if "degraded in a storm" in m.text]) == 1


async def test_the_digest_survives_a_restart(tmp_path):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with one_bot(tmp_path, slack=slack, sim=sim) as first:
            sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                    placeable_nodes=64)
            ids = await clusters(first, STORM)
            await fail_all(first, ids)
            await first.advance(30)
            [digest] = digests(first)
        async with one_bot(tmp_path, slack=slack, sim=sim) as second:
            await second.slash(f"recover {ids[0]}", user=ALICE)
            for _ in range(10):
                await second.advance(30)
            assert (await second.record(ids[0])).status.value == "running"
            [same] = digests(second)  # edited, not posted again
            assert same.ts == digest.ts
            assert f"{STORM - 1} clusters degraded in us-tx" in same.text
            assert broadcasts(second) == []


async def test_escalations_in_a_storm_go_to_each_thread_not_the_channel(tmp_path):
    policy = f"approvers: {{users: [{BOB}]}}\ndegraded: {{escalate_to: {LEADS}, " \
             "escalate_after_minutes: 30}\n"
    async with one_bot(tmp_path, policy=policy) as h:
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=64)
        ids = await clusters(h, STORM)
        await fail_all(h, ids)
        for _ in range(4):
            await h.advance(600)
        mention = f"<!subteam^{LEADS}>"
        assert [m for m in h.slack.messages(GENERAL) if mention in h.text_of(m)] == []
        for cluster_id in ids:
            assert len(await h.notices(cluster_id, f"{mention} ")) == 1
        assert len(digests(h)) == 1
