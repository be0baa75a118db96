"""FakeSlack's Socket Mode, spoken to with a bare WebSocket client: the frames on the wire."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from devslack import FakeSlack


async def _url(slack: FakeSlack) -> str:
    client = AsyncWebClient(token=slack.app_token, base_url=slack.api_url)
    return str((await client.apps_connections_open(app_token=slack.app_token))["url"])


async def test_only_the_app_level_token_opens_connections(slack: FakeSlack):
    bot = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    app = AsyncWebClient(token=slack.app_token, base_url=slack.api_url)
    for call in (bot.apps_connections_open(app_token=slack.bot_token),
                 app.chat_postMessage(channel="C0GENERAL", text="hi")):
        with pytest.raises(SlackApiError) as refused:
            await call
        assert refused.value.response["error"] == "not_allowed_token_type"
    url = await _url(slack)
    assert url.startswith("ws://127.0.0.1:") and "/link/?ticket=" in url


async def test_hello_envelopes_acks_and_a_refresh(slack: FakeSlack):
    socket = slack.socket
    url = await _url(slack)
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(url)
        hello = json.loads((await ws.receive()).data)
        assert hello["type"] == "hello" and hello["connection_info"] == {"app_id": "A0001"}
        with pytest.raises(aiohttp.WSServerHandshakeError):  # a ticket works once
            await session.ws_connect(url)

        async def app() -> None:  # acks the command with an answer, the event without
            async for frame in ws:
                envelope = json.loads(frame.data)
                if envelope.get("type") == "disconnect":
                    return
                ack: dict[str, object] = {"envelope_id": envelope["envelope_id"]}
                if envelope["accepts_response_payload"]:
                    ack["payload"] = {"text": "Pricing…"}
                await ws.send_str(json.dumps(ack))

        listening = asyncio.create_task(app())
        command = await socket.deliver("slash_commands", {"command": "/cluster"},
                                       accepts_response_payload=True)
        event = await socket.deliver("events_api", {"type": "event_callback"},
                                     accepts_response_payload=False, retry_attempt=2,
                                     retry_reason="timeout")
        assert command.ack is not None and command.ack.payload == {"text": "Pricing…"}
        assert event.ack is not None and event.ack.payload is None
        assert (event.envelope["retry_attempt"], event.envelope["retry_reason"]) == (2,
                                                                                     "timeout")
        await ws.send_str("{}")  # not an ack
        await ws.send_str(json.dumps({"envelope_id": "x", "payload": "text"}))

        async def reconnect() -> aiohttp.ClientWebSocketResponse:
            await listening  # returns on `disconnect`
            second = await session.ws_connect(await _url(slack))
            assert json.loads((await second.receive()).data)["num_connections"] == 2
            await ws.close()  # as slack_sdk does, once the new connection is up
            return second

        reconnecting = asyncio.create_task(reconnect())
        await socket.disconnect("refresh_requested", within=5)
        second = await reconnecting
        assert socket.connections_opened == 2 and socket.connected and not second.closed
        assert len(socket.problems) == 2


async def test_an_envelope_nobody_acks_times_out(slack: FakeSlack):
    url = await _url(slack)
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        await ws.receive()  # hello
        delivery = await slack.socket.deliver("interactive", {"type": "block_actions"},
                                              accepts_response_payload=False, within=0.2)
        assert delivery.ack is None and delivery.elapsed >= 0.2
