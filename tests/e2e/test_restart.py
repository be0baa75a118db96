"""A restart in the middle of a launch: the same key is sent again, one cluster results, and the
bot edits the messages it posted before the restart instead of posting new ones."""

import sqlalchemy as sa

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.app import runtime
from bot.clock import ManualClock
from bot.domain.models import LaunchRequest, RequestStatus
from bot.slack.ids import Action
from storage.tables.clusters import ClusterRow
from tests.e2e.harness import BOB, GENERAL, START, Harness, bot, fake_slack


async def _crashed_mid_launch(h: Harness) -> LaunchRequest:
    """Approve a launch, then put the database back to the instant after AI Reserve accepted it
    and before the bot recorded it: the crash window. Intent and key are on disk."""
    card = await h.request()
    await h.click(card, Action.APPROVE, user=BOB)
    [request] = await h.requests_in_db()
    async with h.rt.db.transaction() as repos:
        await repos.requests.transition(
            request.id, from_=[RequestStatus.LAUNCHED], to=RequestStatus.LAUNCHING,
            now=h.clock.now(), cluster_id=None)
        await repos.session.execute(sa.delete(ClusterRow))
    return request


async def test_restart_mid_launch_resumes_with_the_same_key(tmp_path, database_url):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as first:
            request = await _crashed_mid_launch(first)
            edits_before = len(first.progress(GENERAL)[0].edits)

        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as second:
            [resumed] = await second.requests_in_db()
            assert resumed.status is RequestStatus.LAUNCHED
            assert resumed.idempotency_key == request.idempotency_key
            [cluster] = sim.engine.list_clusters()  # the replay, not a second launch
            assert resumed.cluster_id == cluster.id == request.cluster_id
            # The same two messages, edited again: nothing posted twice.
            assert len(second.progress(GENERAL)) == 1 and len(second.cards()) == 1
            assert len(second.progress(GENERAL)[0].edits) > edits_before
            await second.advance(60)
            assert "running" in second.text_of(second.progress(GENERAL)[0]).lower()


async def test_settle_waits_for_the_resume_start_stopped_waiting_for(tmp_path, monkeypatch):
    """Start serves after START_WAIT_SECONDS whether or not its resume of the launches an earlier
    run left is done (a loaded host, a slow AI Reserve); `settle()` — what every test and the
    local workspace wait with — waits for it too. It did not: the crash matrix's restarted bot
    read the request before its resume had re-priced it, on a loaded machine (issue 32)."""
    monkeypatch.setattr(runtime, "START_WAIT_SECONDS", 0.0)  # start never waits
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim) as first:
            request = await _crashed_mid_launch(first)
            # The replay's answer is held a second (real time): the resume outlasts start.
            await first.sim_admin("faults", {"route": "POST /v1/clusters", "delaySeconds": 1.0,
                                             "count": 1})
        async with bot(tmp_path, slack=slack, sim=sim) as second:
            await second.rt.settle()
            [resumed] = await second.requests_in_db()
            assert resumed.status is RequestStatus.LAUNCHED, resumed.status
            [cluster] = sim.engine.list_clusters()
            assert resumed.cluster_id == cluster.id == request.cluster_id


async def test_provider_timeouts_on_launch_are_resolved_with_the_same_key(tmp_path):
    async with bot(tmp_path) as h:
        # AI Reserve carries the launch out but answers 504: the client re-sends with the same
        # Idempotency-Key and gets the original launch back.
        request = await h.approved_while_launch_fails(504, 1)
        assert request.status is RequestStatus.LAUNCHED
        assert len(h.sim.engine.list_clusters()) == 1


async def test_provider_down_at_launch_keeps_the_intent_and_retries_later(tmp_path):
    async with bot(tmp_path) as h:
        request = await h.approved_while_launch_fails(503, 10)
        assert request.status is RequestStatus.LAUNCHING
        assert "retrying" in (request.last_error or "")
        assert h.sim.engine.list_clusters() == []
        await h.sim_admin("faults", {}, method="DELETE")
        h.clock.advance(11 * 60)  # past the launch lease
        await h.rt.services.launching.resume()
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED
        assert len(h.sim.engine.list_clusters()) == 1
