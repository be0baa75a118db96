"""A real `python -m bot serve` process in Socket Mode: SLACK_APP_TOKEN set, no signing secret,
connected to FakeSlack's WebSocket through SLACK_API_URL; it launches a cluster over envelopes
through a connection refresh, and a SIGTERM closes the connection and exits 0."""

from __future__ import annotations

import re
import signal

import pytest

from bot.slack.ids import Action
from devslack.socketrequests import SocketRequests
from tests.e2e.harness import launch_without_ssh
from tests.procs import ALICE, APPROVALS, BOB, GENERAL, wait_for, world

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)


async def test_a_bot_process_in_socket_mode_launches_through_a_refresh(tmp_path):
    async with world(tmp_path) as w:
        socket = w.slack.socket
        bot = await w.bot(env={"SLACK_APP_TOKEN": w.slack.app_token,
                               "SLACK_SIGNING_SECRET": None}, wait=False)
        await wait_for(lambda: socket.connected, within=60, what="a Socket Mode connection")
        async with SocketRequests(slack=w.slack) as requests:
            reply = await requests.slash(text="quote h100x8 nodes=2", user_id=ALICE,
                                         channel_id=GENERAL)
            assert reply.status == 200 and reply.json["text"].startswith("Pricing 2 × h100x8")
            quote = await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)
                                            if Action.QUOTE_REQUEST_LAUNCH in w.text_of(m)],
                                   what="the quote")
            await requests.click(quote[-1], Action.QUOTE_REQUEST_LAUNCH, user_id=ALICE)
            modal = await wait_for(lambda: w.slack.last_view(ALICE), what="the modal")

            await socket.disconnect("refresh_requested", within=30)

            reply = await requests.submit_view(modal, user_id=ALICE, values=launch_without_ssh())
            assert reply.status == 200 and reply.body == ""
            [card] = await wait_for(lambda: w.slack.messages(APPROVALS), what="the card")
            await requests.click(card, Action.APPROVE, user_id=BOB)
            await wait_for(w.sim.clusters, what="a cluster at AI Reserve")

        assert await bot.stop(signal.SIGTERM) == 0
        await wait_for(lambda: not socket.connected, what="the connection closed")
        assert len(await w.sim.clusters()) == 1
        assert [c.token for c in w.slack.calls_to("apps.connections.open")] == [
            w.slack.app_token] * 2
        assert len(socket.acks) == len(socket.envelopes) == 4
        assert w.slack.app_token not in bot.logs()


async def test_readyz_is_red_while_the_socket_mode_connection_is_down(tmp_path):
    """The WebSocket drops and Slack won't hand out a new one for a while: past
    SOCKET_BUDGET_SECONDS /readyz says so; reconnected, it is green again."""
    async with world(tmp_path) as w:
        socket = w.slack.socket
        bot = await w.bot(env={"SLACK_APP_TOKEN": w.slack.app_token, "SLACK_SIGNING_SECRET": None,
                               "SOCKET_BUDGET_SECONDS": "1"}, wait=False)
        await wait_for(lambda: socket.connected, within=60, what="a Socket Mode connection")
        line = await wait_for(lambda: re.search(r"health and metrics on \S+ \(this host: "
                                                r"(http://\S+)/readyz\)", bot.logs()),
                              what="the internal port in the log")
        bot.internal_url = line[1]
        await wait_for(bot.ready, within=30, what="/readyz 200 while connected")

        # The link drops and Slack's WebSocket end refuses the next try (503): the client tries
        # again a ping interval later (~10 s), far past the 1 s budget.
        socket.refuse(1)
        await socket.close()

        async def socket_reason() -> list[str]:
            status, body = await bot.get("/readyz")
            return [r for r in body.get("reasons", []) if "Socket Mode" in r] if status == 503 \
                else []
        [reason] = await wait_for(socket_reason, within=30, what="/readyz red for the socket")
        assert reason.startswith("slack: the Socket Mode connection is down for ")
        assert (await bot.get("/healthz"))[0] == 200  # alive: only not ready

        await wait_for(lambda: socket.connected, within=60, what="the reconnection")
        await wait_for(bot.ready, within=30, what="/readyz 200 once reconnected")
        assert await bot.stop(signal.SIGTERM) == 0
