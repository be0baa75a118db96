"""Slack calls that meet a broken connection or a 5xx go again after a backoff, waited with the
sleep the runtime is given (bot/slack/retry.py): tests pass one that records the wait instead of
spending it; a post is never sent again blindly."""

from __future__ import annotations

import socket

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.retry import retry_handlers
from devslack import FakeSlack

CHANNELS = {"C1": "one"}


class Waits:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def _closed_port() -> int:
    """A loopback port nothing listens on (the OS chose it, then it was closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_a_broken_connection_is_tried_again_after_the_given_sleep():
    waits = Waits()
    client = AsyncWebClient(token="xoxb-test", base_url=f"http://127.0.0.1:{_closed_port()}/api/",
                            retry_handlers=retry_handlers(waits))
    with pytest.raises(OSError):
        await client.auth_test()
    assert len(waits.seconds) == 2 and all(0 < s < 10 for s in waits.seconds), waits.seconds


async def test_a_5xx_is_tried_again_after_the_given_sleep_and_a_post_is_not():
    waits = Waits()
    async with FakeSlack(channels=CHANNELS) as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url,
                                retry_handlers=retry_handlers(waits))
        slack.fail_next("auth.test", error="service_unavailable", status=503)
        assert (await client.auth_test())["ok"]
        assert len(waits.seconds) == 1 and len(slack.calls_to("auth.test")) == 2

        slack.fail_next("chat.postMessage", error="service_unavailable", status=503)
        with pytest.raises(SlackApiError):
            await client.chat_postMessage(channel="C1", text="once")
        assert len(waits.seconds) == 1 and len(slack.calls_to("chat.postMessage")) == 1
