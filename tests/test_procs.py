"""The real-process harness (tests/procs/) itself: a bot process and a simulator process launch
a cluster end to end, survive a SIGKILL and a restart, on SQLite and on PostgreSQL."""

from __future__ import annotations

import signal

import pytest

from bot.slack.ids import Action
from tests.procs import ALICE, BOB, wait_for, world

pytestmark = pytest.mark.procs(lane="restarts")  # kills and restarts: tests/conftest.py


async def test_a_bot_process_launches_survives_sigkill_and_restarts(tmp_path, empty_database_url):
    async with world(tmp_path, database_url=empty_database_url) as w:
        bot = await w.bot()
        assert (await bot.get("/healthz"))[0] == 200

        card = await w.request_launch(bot)
        await bot.requests.click(card, Action.APPROVE, user_id=BOB)
        [cluster] = await wait_for(w.sim.clusters, what="a cluster at AI Reserve")
        await w.advance(120)  # the fast profile boots a node in seconds of virtual time
        await wait_for(lambda: any("ssh" in w.text_of(m).lower() for m in w.slack.dms(ALICE)),
                       what="the SSH details DM")

        assert await bot.kill() == -signal.SIGKILL
        await w.sim.fault("GET /v1/clusters", status=500, count=1)  # the controls answer
        await bot.start()

        async def fault_used() -> bool:
            return not await w.sim.faults()

        await wait_for(fault_used, what="the restarted bot's sweep to meet the fault")
        async with w.database() as db, db.transaction() as repos:
            record = await repos.clusters.get(cluster["id"])
        assert record is not None and record.owner_id == ALICE
        assert len(await w.sim.clusters()) == 1
        assert "listening for Slack" in bot.logs()
