"""Restarts drop no requests (issue 24, item 5), with a real process.

Before, SIGTERM closed the Slack listener at once: 2.0–3.3 s of refused connections per replica
restart, and Slack retries neither slash commands nor clicks. Now /readyz turns 503 at once (a
load balancer or kube-proxy stops routing here) while the listener keeps answering for
LISTENER_DRAIN_SECONDS; then work in flight finishes and the process exits 0. A steady stream
of signed commands through the drain: every one answered, none refused."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import pytest

from tests.procs import ALICE, GENERAL, wait_for, world

pytestmark = pytest.mark.procs

DRAIN = 3.0


async def test_sigterm_turns_readyz_503_at_once_and_keeps_answering_through_the_drain(
        tmp_path):
    async with world(tmp_path) as w:
        bot = await w.bot(env={"LISTENER_DRAIN_SECONDS": str(DRAIN)})
        await wait_for(bot.ready, within=60, what="/readyz 200")
        answered: list[int] = []
        refused: list[str] = []
        stop = asyncio.Event()

        async def stream() -> None:
            while not stop.is_set():
                try:
                    reply = await bot.requests.slash(text="help", user_id=ALICE,
                                                     channel_id=GENERAL)
                    answered.append(reply.status)
                except aiohttp.ClientConnectionError as exc:
                    refused.append(type(exc).__name__)
                await asyncio.sleep(0.05)  # a steady stream, ~20 commands a second

        streaming = asyncio.create_task(stream())
        await wait_for(lambda: len(answered) >= 5, what="the stream flowing")
        bot.signal(signal.SIGTERM)
        status, body = await wait_for(lambda: _readyz_503(bot), within=2,
                                      what="/readyz 503 right after SIGTERM")
        assert body["reasons"] == ["draining: finishing in-flight work before exit"], body
        during = len(answered)
        await wait_for(lambda: len(answered) >= during + 3, within=DRAIN,
                       what="commands still answered while draining")
        refused_while_draining = list(refused)
        rc = await bot.wait(within=30)
        stop.set()
        await streaming
        assert rc == 0
        assert refused_while_draining == [], refused_while_draining
        assert all(s == 200 for s in answered), answered


async def _readyz_503(bot):
    try:
        status, body = await bot.get("/readyz")
    except aiohttp.ClientConnectionError:
        return None
    return (status, body) if status == 503 else None
