"""The launch saga with real processes (tests/procs/): a bot killed with SIGKILL, or stopped
with SIGTERM, in the middle of a launch, restarted on the same database against the same
simulator process → exactly one cluster, linked to its request and owner, SSH details sent once.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.procs import ALICE, APPROVALS, BOB, BotProcess, World, wait_for, world

pytestmark = pytest.mark.procs(lane="restarts")  # kills and restarts: tests/conftest.py

SLOW = 6.0  # seconds AI Reserve holds the launch's answer (real time)


async def _launched(w: World) -> Any:
    found = [r for r in await w.requests() if r.status is RequestStatus.LAUNCHED]
    return found[0] if found else None


async def _sweeps_pass(w: World, times: int = 2) -> None:
    """Wait until the bot's sweep has run `times` more times (each meets one armed fault)."""
    for _ in range(times):
        await w.sim.fault("GET /v1/clusters", status=503, count=1)

        async def used() -> bool:
            return not await w.sim.faults()

        await wait_for(used, what="a sweep")


async def _settled(w: World, bot: BotProcess) -> None:
    """After the restart: one cluster, linked to the request and alice, one SSH DM."""
    request = await wait_for(lambda: _launched(w), within=60, what="the launch resolved")
    [cluster] = await w.sim.clusters()
    assert request.cluster_id == cluster["id"]
    async with w.database() as db, db.transaction() as repos:
        record = await repos.clusters.get(cluster["id"])
    assert record is not None
    assert (record.owner_id, record.request_id, record.adopted) == (ALICE, request.id, False)
    await w.advance(120)  # the cluster boots
    await wait_for(lambda: [m for m in w.slack.dms(ALICE) if "ssh -p" in w.text_of(m)],
                   within=60, what="the SSH details DM")
    await _sweeps_pass(w)
    assert len([m for m in w.slack.dms(ALICE) if "ssh -p" in w.text_of(m)]) == 1
    assert len(await w.sim.clusters()) == 1
    assert not [m for m in w.slack.messages(APPROVALS) if "ntracked" in w.text_of(m)]
    assert bot.running


async def _approve_slowly(w: World, bot: BotProcess, *, status: int | None = None) -> None:
    card = await w.request_launch(bot)
    await w.sim.fault("POST /v1/clusters", status=status, delay_seconds=SLOW)
    await bot.requests.click(card, Action.APPROVE, user_id=BOB)


async def _mid_launch(w: World) -> BotProcess:
    """A bot whose approved launch AI Reserve has carried out but not yet answered (SLOW)."""
    bot = await w.bot()
    await _approve_slowly(w, bot)
    await wait_for(w.sim.clusters, what="AI Reserve to carry the launch out")
    return bot


@pytest.mark.parametrize("expired", [False, True], ids=["quote-valid", "quote-expired"])
async def test_sigkill_while_the_provider_holds_the_answer(tmp_path, expired):
    async with world(tmp_path) as w:
        bot = await _mid_launch(w)
        assert await bot.kill() == -signal.SIGKILL
        if expired:
            await w.advance(16 * 60)
        await bot.start()
        await _settled(w, bot)
        assert len(await w.requests()) == 1 and len(w.slack.messages(APPROVALS)) == 1


@pytest.mark.postgres
async def test_sigkill_mid_launch_on_postgresql(tmp_path, pg_url):
    async with world(tmp_path, database_url=pg_url) as w:
        bot = await _mid_launch(w)
        assert await bot.kill() == -signal.SIGKILL
        await w.advance(16 * 60)
        await bot.start()
        await _settled(w, bot)


async def test_sigkill_before_the_launch_ran_and_the_quote_expired(tmp_path):
    # AI Reserve holds the call and then refuses it before running anything: nothing was made.
    async with world(tmp_path) as w:
        bot = await w.bot()
        await _approve_slowly(w, bot, status=503)

        async def launching() -> bool:
            return any(r.status is RequestStatus.LAUNCHING for r in await w.requests())

        await wait_for(launching, what="the claim and its intent")
        assert await bot.kill() == -signal.SIGKILL
        await w.advance(16 * 60)
        await bot.start()
        # The stored launch is resolved first: the quote expired and no cluster came of it,
        # so — only then — the request is priced again and goes back to the approvers.
        cards = await wait_for(lambda: len(w.slack.messages(APPROVALS)) == 2 and
                               w.slack.messages(APPROVALS), within=60, what="a new card")
        assert await w.sim.clusters() == []
        await bot.requests.click(cards[-1], Action.APPROVE, user_id=BOB)
        await _settled(w, bot)


async def test_sigterm_mid_launch_then_restart_completes_the_launch_linked(tmp_path):
    async with world(tmp_path) as w:
        bot = await _mid_launch(w)
        await bot.stop(signal.SIGTERM)
        await bot.start()
        await _settled(w, bot)


async def test_sigterm_mid_launch_exits_0(tmp_path):
    async with world(tmp_path) as w:
        bot = await _mid_launch(w)
        assert await bot.stop(signal.SIGTERM) == 0
