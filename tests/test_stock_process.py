"""Waiting for stock in real processes (tests/procs/): the scheduled stock sweep of a bot
process looks for stock; the process is SIGKILLed; the simulator's capacity returns; a new
process on the same database launches the request exactly once."""

from __future__ import annotations

import signal

import pytest

from bot.domain.models import RequestStatus
from bot.slack.blocks.launch_modal import FIELD_WAIT_HOURS
from bot.slack.ids import Action
from tests.e2e.harness import launch_without_ssh
from tests.procs import ALICE, APPROVALS, BOB, GENERAL, World, wait_for, world

pytestmark = pytest.mark.procs(lane="restarts")  # kills and restarts: tests/conftest.py

STOCK = {"accelerator": "h100-sxm-80gb", "location": "us-tx"}


async def test_a_wait_survives_sigkill_and_launches_once(tmp_path, empty_database_url):
    async with world(tmp_path, database_url=empty_database_url) as w:
        await w.sim.admin("capacity", {**STOCK, "availability": "none", "placeableNodes": 0})
        first = await w.bot("first")
        await first.requests.slash(text="quote h100x8 nodes=2 location=us-tx", user_id=ALICE,
                                   channel_id=GENERAL)
        quote = await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)
                                        if Action.QUOTE_WAIT_FOR_STOCK in w.text_of(m)],
                               what="the no-stock quote with Wait for stock")
        await first.requests.click(quote[-1], Action.QUOTE_WAIT_FOR_STOCK, user_id=ALICE)
        form = await wait_for(lambda: w.slack.last_view(ALICE), what="the launch form")
        reply = await first.requests.submit_view(form, user_id=ALICE, values={
            **launch_without_ssh(), FIELD_WAIT_HOURS: {FIELD_WAIT_HOURS: "12"}})
        assert reply.status == 200 and not reply.body, reply.body
        card = await wait_for(lambda: w.slack.messages(APPROVALS), what="the approval card")
        await first.requests.click(card[-1], Action.APPROVE, user_id=BOB)

        async def waited(looks: int) -> bool:
            [request] = await w.requests()
            return request.status is RequestStatus.WAITING and request.wait_checks >= looks

        await wait_for(lambda: waited(0), what="the request waiting for stock")
        await w.advance(61)  # the scheduled sweep looks (and finds none)
        await wait_for(lambda: waited(1), what="the scheduled stock sweep's first look")
        assert await first.kill() == -signal.SIGKILL

        await w.sim.admin("capacity", {**STOCK, "availability": "high", "placeableNodes": 8})
        await w.advance(180)
        second = await w.bot("second")  # a new process on the same database
        await wait_for(w.sim.clusters, within=30, what="the cluster launched")
        await wait_for(lambda: launched(w), within=30, what="the request marked launched")
        await w.advance(900)  # the sweeps go on: the cluster runs, nothing more launches
        await wait_for(lambda: running(w), within=30, what="the cluster running")
        assert len(await w.sim.clusters()) == 1
        assert any("Stock is back" in w.text_of(m) for m in w.slack.dms(ALICE))
        assert second.running


async def launched(w: World) -> bool:
    [request] = await w.requests()
    return request.status is RequestStatus.LAUNCHED and request.cluster_id is not None


async def running(w: World) -> bool:
    async with w.database() as db, db.transaction() as repos:
        return any(c.status.value == "running" for c in await repos.clusters.list_live())
