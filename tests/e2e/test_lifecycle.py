"""Graceful stop and a start that never dies, with real processes (tests/procs/).

SIGTERM/SIGINT: the bot stops taking work, finishes what is in flight (a launch included, within
20 s), stops its scheduler, closes the database and exits 0. A start while Slack answers 503 and
AI Reserve fails still serves, and the work left over goes on once they are back."""

from __future__ import annotations

import signal
import time

import aiohttp
import pytest

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.procs import BOB, wait_for, world

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)

HELD = 8.0  # seconds AI Reserve holds a launch's answer (real time): SIGTERM lands within it
SLACK_WRITES = ("chat.postMessage", "chat.update", "chat.postEphemeral", "conversations.open",
                "views.publish")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_an_idle_bot_cleanly(tmp_path, sig):
    async with world(tmp_path) as w:
        bot = await w.bot()
        assert await bot.stop(sig, within=25) == 0
        assert "no new work" in bot.logs() and "bot.app.cli: stopped" in bot.logs()
        assert " ERROR " not in bot.logs()


@pytest.mark.procs(lane="restarts")  # a kill-and-restart lane test (tests/conftest.py)
async def test_sigterm_mid_launch_finishes_the_launch_then_exits_0(tmp_path, database_url):
    async with world(tmp_path, database_url=database_url) as w:
        bot = await w.bot()
        card = await w.request_launch(bot)
        # AI Reserve carries the launch out, then holds its answer back for HELD seconds.
        await w.sim.fault("POST /v1/clusters", delay_seconds=HELD)
        await bot.requests.click(card, Action.APPROVE, user_id=BOB)
        # In flight: AI Reserve has made the cluster and not answered the launch yet. (Not the
        # request seen `launching`: a watch sweep may link the listed cluster to it by its quote
        # first, and a poll that came after that waited 20 s for a state already gone.)
        await wait_for(w.sim.clusters, within=60, what="the launch at AI Reserve")
        began = time.monotonic()
        bot.signal(signal.SIGTERM)

        async def refused() -> bool:  # no new work: the port is closed while the launch ends
            try:
                await bot.get("/healthz")
            except aiohttp.ClientConnectionError:
                return True
            return False

        await wait_for(refused, what="the listener closed")
        assert bot.running  # still finishing the launch
        assert await bot.wait(within=30) == 0
        took = time.monotonic() - began
        [request] = await w.requests()
        assert request.status is RequestStatus.LAUNCHED and request.cluster_id is not None
        assert [c["id"] for c in await w.sim.clusters()] == [request.cluster_id]
        assert took < 20 + 5, took
        assert "with work unfinished" not in bot.logs()


async def test_start_while_slack_and_ai_reserve_fail_still_serves(tmp_path):
    async with world(tmp_path) as w:
        bot = await w.bot()
        card = await w.request_launch(bot)
        # AI Reserve refuses the launch (503) while the bot retries it; killed meanwhile, the
        # bot leaves a launch that never reached AI Reserve, for the next start to resume.
        await w.sim.fault("POST /v1/clusters", status=503, count=1000)
        await bot.requests.click(card, Action.APPROVE, user_id=BOB)

        async def launching() -> bool:
            return any(r.status is RequestStatus.LAUNCHING for r in await w.requests())

        await wait_for(launching, what="the launch in flight")
        await bot.kill()
        for method in SLACK_WRITES:
            w.slack.fail_next(method, error="service_unavailable", status=503, count=1000)
        await w.sim.clear_faults()
        await w.sim.fault("POST /v1/clusters", status=503, count=3)

        await bot.start()  # returns once it serves: Slack and AI Reserve down didn't stop it
        assert (await bot.get("/healthz"))[0] == 200
        # Slack refusing doesn't hold the resumed launch up: its messages are queued for later.
        await bot.wait_for_log("queued until Slack takes it")
        assert bot.running

        began = time.monotonic()  # a stop doesn't wait for the retries to succeed
        assert await bot.stop(signal.SIGTERM) == 0
        assert time.monotonic() - began < 10

        w.slack._faults.clear()  # Slack is back
        await bot.start()

        async def launched() -> bool:
            return all(r.status is RequestStatus.LAUNCHED for r in await w.requests())

        await wait_for(launched, within=60, what="the resumed launch")
        assert len(await w.sim.clusters()) == 1


async def test_a_launch_longer_than_the_bound_does_not_hold_the_exit(tmp_path):
    async with world(tmp_path) as w:
        bot = await w.bot()
        card = await w.request_launch(bot)
        await w.sim.fault("POST /v1/clusters", delay_seconds=30)  # longer than the 20 s bound
        await bot.requests.click(card, Action.APPROVE, user_id=BOB)
        # In flight: AI Reserve has made the cluster and holds its answer 30 s. (Not the request
        # seen `launching`: the watch sweep may link the listed cluster to it by its quote within
        # a poll, and a test poll that came after that waited 20 s for a state already gone.)
        await wait_for(w.sim.clusters, what="the launch at AI Reserve")
        began = time.monotonic()
        assert await bot.stop(signal.SIGTERM, within=30) == 0
        assert 19 < time.monotonic() - began < 26
        assert "with work unfinished" in bot.logs()  # the next start resumes it
