"""A terminate is durable: AI Reserve failing DELETE (5xx) doesn't lose it. It is retried with
backoff until it takes, across restarts and by a real process's own sweeps, and the person who
asked is told it still bills (once) and, at the end, that it is really terminated."""

from __future__ import annotations

import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from aireserve_sim.faults import FaultInjector
from bot.clock import ManualClock
from bot.domain.termination import TerminationState, retry_delay
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, GENERAL, START, bot, fake_slack
from tests.procs import wait_for, world

DELETE = "DELETE /v1/clusters/{id}"


def _dms(h, containing: str) -> list:
    return [m for m in h.slack.dms(ALICE) if containing in h.text_of(m)]


async def _intent(h, cluster_id):
    async with h.rt.db.transaction() as repos:
        return await repos.terminations.get(cluster_id)


async def test_terminate_failing_three_times_then_taking_ends_the_cluster_and_tells(
        tmp_path, database_url):
    async with bot(tmp_path, database_url=database_url) as h:
        cluster_id = await h.running_cluster()
        await h.sim_admin("faults", {"route": DELETE, "status": 500, "count": 3})
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)

        answer = h.text_of(h.last_ephemeral(ALICE, containing="keep trying"))
        assert "still billing" in answer and "internal error" in answer  # words, not the code
        assert h.sim.engine.get_cluster(cluster_id).status.value == "running"
        intent = await _intent(h, cluster_id)
        assert (intent.state, intent.attempts) == (TerminationState.PENDING, 1)

        terminate = h.rt.services.termination
        assert await terminate.finish() == 0  # not due yet: the backoff holds
        for attempt in (2, 3, 4):
            h.clock.advance(retry_delay(attempt - 1).total_seconds())
            await terminate.finish()
            assert (await _intent(h, cluster_id)).attempts == attempt
        assert len(_dms(h, "still billing")) == 1  # told once, after the third failure
        assert h.sim.engine.get_cluster(cluster_id).status.value in ("terminating",
                                                                      "terminated")
        assert (await _intent(h, cluster_id)).state is TerminationState.ACCEPTED

        await h.advance(60)  # AI Reserve finishes; the watcher sees it
        assert await terminate.finish() == 1
        assert await terminate.finish() == 0
        [done] = _dms(h, "no longer bills")
        assert "after 4 terminate requests" in h.text_of(done)
        assert h.sim.engine.get_cluster(cluster_id).status.value == "terminated"
        assert (await _intent(h, cluster_id)).state is TerminationState.DONE


async def test_the_owner_is_told_how_many_terminate_requests_ai_reserve_received(
        tmp_path, monkeypatch):
    """Issue 24 item 7: "terminated after 5 attempts" when AI Reserve received 17 terminate
    requests (each attempt's client retried a 503 three times). What was sent is counted."""
    received: list[str] = []
    take = FaultInjector.take

    def counting(injector, method, path):
        if method == "DELETE" and path.startswith("/v1/clusters/"):
            received.append(path)
        return take(injector, method, path)

    monkeypatch.setattr(FaultInjector, "take", counting)
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.sim_admin("faults", {"route": DELETE, "status": 503, "count": 16})
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        terminate = h.rt.services.termination
        for _ in range(12):
            h.clock.advance(300)
            await terminate.finish()
        await h.advance(60)
        await terminate.finish()
        [still] = _dms(h, "still billing")
        [done] = _dms(h, "no longer bills")
        intent = await _intent(h, cluster_id)
    assert len(received) == 17 and intent.attempts == 5  # 4 × (1 + 3 retries), then it took
    assert f"after {len(received)} terminate requests" in h.text_of(done), h.text_of(done)
    assert "attempts" not in h.text_of(done)
    assert "refused 12 terminate requests" in h.text_of(still), h.text_of(still)


async def test_a_failed_terminate_survives_a_restart(tmp_path, database_url):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as first:
            cluster_id = await first.running_cluster()
            await first.sim_admin("faults", {"route": DELETE, "status": 503, "count": 10})
            await first.click(await first.top(cluster_id), Action.TERMINATE, user=ALICE)
            assert "keep trying" in first.text_of(first.slack.ephemerals(ALICE)[-1])
        await first.sim_admin("faults", {}, method="DELETE")

        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as second:
            second.clock.advance(300)
            await second.rt.services.termination.finish()
            await second.advance(60)
            await second.rt.services.termination.finish()
            assert sim.engine.get_cluster(cluster_id).status.value == "terminated"
            assert len(_dms(second, "no longer bills")) == 1


@pytest.mark.procs(lane="restarts")
async def test_real_process_retries_a_failing_terminate_across_a_kill(tmp_path, database_url):
    async with world(tmp_path, database_url=database_url) as w:
        bot_process = await w.bot()
        await _launch_running(w, bot_process)
        await w.sim.fault(DELETE, status=500, count=3)
        top = await _terminate_button(w)
        await bot_process.requests.click(top, Action.TERMINATE, user_id=ALICE)
        await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)
                                if "keep trying" in w.text_of(m)], what="the private answer")

        assert await bot_process.kill() < 0  # a crash between attempts
        await bot_process.start()

        async def ended() -> bool:
            await w.advance(20)  # time passes: backoff, then AI Reserve's own terminating
            return any("no longer bills" in w.text_of(m) for m in w.slack.dms(ALICE))

        await wait_for(ended, within=60, interval=0.5, what="the terminated DM")
        assert [c["status"] for c in await w.sim.clusters()] == ["terminated"]
        assert not await w.sim.faults()  # all three failures were met, then it took
        told = [m for m in w.slack.dms(ALICE) if "no longer bills" in w.text_of(m)]
        assert len(told) == 1 and "after 4 terminate requests" in w.text_of(told[0])
        assert len([m for m in w.slack.dms(ALICE) if "still billing" in w.text_of(m)]) == 1


async def _launch_running(w, bot_process):
    """Request a launch, approve it, and wait until the owner has the SSH details."""
    card = await w.request_launch(bot_process)
    await bot_process.requests.click(card, Action.APPROVE, user_id="U0BOB")
    await wait_for(w.sim.clusters, what="the launch")
    await w.advance(120)
    # A poll sees it running; its message is shown so (one refresh of the request's messages,
    # behind at most the one running and one folded: bot/slack/notifier.py), then the DM.
    await wait_for(lambda: any("ssh -p" in w.text_of(m) for m in w.slack.dms(ALICE)),
                   what="the cluster running: the owner's SSH details DM")


async def _terminate_button(w):
    """The cluster's message once it shows it running: the delivery sweep edits it (queued
    with the observation), a moment after the SSH details DM."""
    found = await wait_for(lambda: [m for m in w.slack.messages(GENERAL)
                                    if Action.TERMINATE in w.text_of(m)],
                           what="the Terminate button")
    return found[-1]


@pytest.mark.procs(lane="restarts")
async def test_two_replicas_make_each_attempt_once_and_tell_once(tmp_path, database_url):
    async with world(tmp_path, database_url=database_url) as w:
        first = await w.bot()
        await _launch_running(w, first)
        second = await w.bot()
        await w.sim.fault(DELETE, status=500, count=3)
        await w.sim.fault(DELETE, delay_seconds=0.0, count=1000)  # counts the calls after
        await second.requests.click(await _terminate_button(w), Action.TERMINATE,
                                    user_id=ALICE)

        async def ended() -> bool:
            await w.advance(20)
            return any("no longer bills" in w.text_of(m) for m in w.slack.dms(ALICE))

        await wait_for(ended, within=60, interval=0.5, what="the terminated DM")
        await w.advance(60)  # more sweeps on both replicas: nothing more happens
        await w.sim.fault("GET /v1/clusters", delay_seconds=0.0, count=1000)

        async def swept() -> bool:  # both replicas' sweeps listed a few times meanwhile
            lists = next(f for f in await w.sim.faults() if f["route"].startswith("GET"))
            return lists["remaining"] <= 1000 - 6

        await wait_for(swept, what="more sweeps")
        counter = next(f for f in await w.sim.faults() if f["route"].startswith("DELETE"))
        assert counter["remaining"] == 999  # after the 3 failures, exactly one more DELETE
        dms = [w.text_of(m) for m in w.slack.dms(ALICE)]
        assert len([t for t in dms if "no longer bills" in t]) == 1
        assert len([t for t in dms if "still billing" in t]) == 1


async def test_terminating_again_while_it_still_fails_says_so(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.sim_admin("faults", {"route": DELETE, "status": 502, "count": 10})
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)  # not due yet
        answers = [h.text_of(m) for m in h.slack.ephemerals(ALICE) if "keep trying" in
                   h.text_of(m)]
        assert len(answers) == 2 and all("still billing" in a for a in answers)
        assert (await _intent(h, cluster_id)).attempts == 1  # the backoff held


async def test_a_terminate_that_needed_retries_is_audited_asked_retried_done(tmp_path):
    """Issue 27.2: not "terminate · ⛔ refused" and no row for the success — the trail says
    what happened: asked (AI Reserve failed, the bot retries), then done on attempt 4."""
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.sim_admin("faults", {"route": DELETE, "status": 500, "count": 3})
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        terminate = h.rt.services.termination
        for attempt in (2, 3, 4):
            h.clock.advance(retry_delay(attempt - 1).total_seconds())
            await terminate.finish()
        async with h.rt.db.transaction() as repos:
            trail = [e for e in reversed(await repos.audit.list(subject_id=cluster_id))
                     if e.action == "terminate"]
        assert [(e.actor_id, e.outcome) for e in trail] == [(ALICE, "failed"), (ALICE, "ok")]
        asked, done = trail
        assert "keep trying" in asked.detail
        assert "attempt 4, after 3 failed attempts (last: internal error" in done.detail
        await h.slash(f"audit {cluster_id}", user=BOB)
        shown = h.text_of(h.slack.ephemerals(BOB)[-1])
        assert "⛔ refused" not in shown, shown
