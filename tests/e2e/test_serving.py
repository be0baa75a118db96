"""Serving is a state, not a medal: a lost node ends it — the cluster's message says since when
it stopped and what the outage has cost (the locked rate × the hour marks AI Reserve charged
meanwhile) — through the restart attempts and after exhaustion; once every node runs again the
readiness rule is checked again on the log *after* the restart, and Serving returns only when
the line appears again."""

import re

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.hours import HourState
from bot.domain.watch import NoticeKind
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, START, bot, fake_slack
from tests.e2e.test_readiness import VLLM_LINE, launched, readiness, say


async def serving_cluster(h):
    cluster_id = await launched(h, readiness("vllm", limit=600))
    await h.advance(60)
    await say(h, cluster_id, VLLM_LINE)
    await h.advance(60)
    assert "Serving since" in h.text_of(await h.top(cluster_id))
    return cluster_id


async def servings(h, cluster_id):
    async with h.rt.db.transaction() as repos:
        return [n for n in await repos.notices.for_cluster(cluster_id)
                if n.kind is NoticeKind.SERVING]


async def top(h, cluster_id):
    return h.text_of(await h.top(cluster_id))


async def test_losing_a_node_ends_serving_until_the_end(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await serving_cluster(h)
        rate = (await h.record(cluster_id)).hourly_cents
        await h.fail_for_good(cluster_id)
        record = await h.record(cluster_id)
        assert record.status.value == "degraded"
        lost_at = record.observed.episode_started_at
        text = await top(h, cluster_id)
        assert "Serving since" not in text
        assert "Stopped serving since" in text and lost_at.strftime("%H:%M UTC") in text
        assert "The outage has cost *$0.00* so far (0 hourly charges" in text

        # An hour mark passes during the outage: AI Reserve charges it (a node still runs).
        for _ in range(7):
            await h.advance(600)
        record = await h.record(cluster_id)
        assert record.accrued_hours == 2
        text = await top(h, cluster_id)
        assert (f"The outage has cost *${rate / 100:,.2f}* so far (1 hourly charge of "
                f"${rate / 100:,.2f}/h)") in text
        assert "Serving since" not in text

        for _ in range(3):  # every attempt fails: recovery exhausted
            await h.slash(f"recover {cluster_id}", user=ALICE)
            await h.advance(30)
        assert (await h.record(cluster_id)).observed.recovery_state == "exhausted"
        text = await top(h, cluster_id)
        assert "Stopped serving since" in text and "Serving since" not in text
        assert "recovery is exhausted" in text
        assert len(await servings(h, cluster_id)) == 1


async def test_serving_returns_only_with_a_new_line_after_the_restart(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await serving_cluster(h)
        await h.fail_node(cluster_id)
        await h.advance(30)
        assert "Stopped serving since" in await top(h, cluster_id)
        [degraded] = await h.notices(cluster_id, "is degraded")
        await h.click(degraded, Action.RECOVER, user=ALICE)
        for _ in range(3):
            await h.advance(30)
        record = await h.record(cluster_id)
        assert record.status.value == "running"

        # The line printed before the loss is still in rank 0's log: it does not count.
        for _ in range(4):
            await h.advance(300)
        text = await top(h, cluster_id)
        assert "Serving since" not in text
        assert "Not serving since" in text and "after the restart" in text
        assert len(await servings(h, cluster_id)) == 1

        await say(h, cluster_id, VLLM_LINE)
        await h.advance(60)
        text = await top(h, cluster_id)
        assert "Serving since" in text and "again: it stopped at" in text
        [again] = await h.notices(cluster_id, "is serving again")
        said = h.text_of(again)
        assert "after the restart" in said and "when a node was lost" in said
        assert re.search(r"billed \*\$\d[\d,]*\.\d\d\* \(\d+ hourly charges? of", said), said
        assert len(await servings(h, cluster_id)) == 2

        for _ in range(3):  # printed again, polled again: said once per serving period
            await say(h, cluster_id, VLLM_LINE)
            await h.advance(300)
        assert len(await servings(h, cluster_id)) == 2


async def test_the_hours_chart_counts_the_outage_as_not_serving(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await serving_cluster(h)
        for _ in range(6):  # serving through the mark at 1 h
            await h.advance(600)
        await h.fail_node(cluster_id)
        await h.advance(30)
        await h.slash(f"recover {cluster_id}", user=ALICE)
        for _ in range(3):
            await h.advance(30)
        for _ in range(12):  # running again, but the line doesn't come for two hours
            await h.advance(600)
        await say(h, cluster_id, VLLM_LINE)
        for _ in range(7):
            await h.advance(600)
        _, marks = await h.rt.services.clusters.billed_hours(cluster_id=cluster_id)
        states = [state for _, state in marks]
        # 0 h: before the line first appeared; 1 h: the node was lost in it; 2 h and 3 h:
        # running again but not serving until the line (at ~3 h 4 min); 4 h: serving.
        assert states == [HourState.NOT_SERVING, HourState.DEGRADED, HourState.NOT_SERVING,
                          HourState.NOT_SERVING, HourState.BILLED], states


async def test_serving_again_is_said_once_across_a_restart_of_the_bot(tmp_path, database_url):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as first:
            cluster_id = await serving_cluster(first)
            await first.fail_node(cluster_id)
            await first.advance(30)
            assert "Stopped serving since" in await top(first, cluster_id)
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as second:
            await second.slash(f"recover {cluster_id}", user=ALICE)
            for _ in range(3):
                await second.advance(30)
            assert "after the restart" in await top(second, cluster_id)
            await say(second, cluster_id, VLLM_LINE)
            await second.advance(60)
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as third:
            for _ in range(3):
                await say(third, cluster_id, VLLM_LINE)
                await third.advance(300)
            assert len(await third.notices(cluster_id, "is serving again")) == 1
            assert len(await servings(third, cluster_id)) == 2
            assert "again: it stopped at" in await top(third, cluster_id)
