"""Slack calls paced per channel and method, by lane, with one shared pause per 429
(bot/slack/pacing.py) — against FakeSlack enforcing Slack's limits (devslack/limits.py).
Real time, fast limits: a tenth of a second per post keeps each test under two seconds."""

from __future__ import annotations

import asyncio

import pytest
from slack_sdk.errors import SlackApiError

from bot.domain.lanes import Lane, lane
from bot.slack.pacing import PacedWebClient, Pacer, parse_limits
from devslack.webapi import FakeSlack

CHANNELS = {"C1": "one", "C2": "two"}
FAST = "chat.postMessage=10/s/channel"


def _client(slack: FakeSlack, limits: str) -> PacedWebClient:
    client = PacedWebClient(token=slack.bot_token, base_url=slack.api_url, retry_handlers=[])
    client.pacer = Pacer(parse_limits(limits))
    return client


def _refused(slack: FakeSlack) -> int:
    return sum(1 for c in slack.calls if c.status == 429)


async def test_the_fake_enforces_per_channel_and_per_method_limits_with_retry_after():
    async with FakeSlack(channels=CHANNELS,
                         rate_limits="chat.postMessage=1/s/channel,chat.update=2/min") as slack:
        bare = PacedWebClient(token=slack.bot_token, base_url=slack.api_url, retry_handlers=[])
        first = await bare.chat_postMessage(channel="C1", text="a")
        with pytest.raises(SlackApiError) as refused:
            await bare.chat_postMessage(channel="C1", text="b")
        assert refused.value.response.status_code == 429
        assert refused.value.response.headers["Retry-After"] == "1"
        await bare.chat_postMessage(channel="C2", text="c")  # another channel: its own window
        for text in ("d", "e"):
            await bare.chat_update(channel="C1", ts=first["ts"], text=text)
        with pytest.raises(SlackApiError) as tier:
            await bare.chat_update(channel="C2", ts=first["ts"], text="f")  # per method
        assert tier.value.response.status_code == 429
        assert 1 <= int(tier.value.response.headers["Retry-After"]) <= 60
        assert [m.text for m in slack.messages("C1")] == ["e"]


async def test_calls_on_one_channel_are_spaced_to_the_limit_and_none_is_refused():
    async with FakeSlack(channels=CHANNELS, rate_limits=FAST) as slack:
        client = _client(slack, FAST)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.gather(*(client.chat_postMessage(channel="C1", text=str(n))
                               for n in range(6)))
        assert loop.time() - began >= 5 * 0.1
        assert _refused(slack) == 0 and len(slack.messages("C1")) == 6
        assert client.pacer is not None and client.pacer.stats.held == 5


async def test_an_answer_waits_only_for_the_call_on_the_wire_not_for_the_storm():
    async with FakeSlack(channels=CHANNELS, rate_limits=FAST) as slack:
        client = _client(slack, FAST)

        async def post(text: str, which: Lane) -> None:
            with lane(which):
                await client.chat_postMessage(channel="C1", text=text)

        storm = [asyncio.create_task(post(f"degraded {n}", Lane.HEALTH)) for n in range(6)]
        reminder = asyncio.create_task(post("reminder", Lane.REMINDER))
        await asyncio.sleep(0)  # they queue up (no time passes for the test)
        card = asyncio.create_task(post("approval card", Lane.ANSWER))
        await asyncio.gather(*storm, reminder, card)
        order = [m.text for m in slack.messages("C1")]
        assert order.index("approval card") <= 1  # at most the one already sent goes first
        assert order[-1] == "reminder"


async def test_a_429_pauses_the_channel_once_for_every_waiting_call():
    async with FakeSlack(channels=CHANNELS) as slack:
        client = _client(slack, FAST)
        # Slack refuses once, then keeps refusing the method for Retry-After (1 s).
        slack.fail_next("chat.postMessage", error="ratelimited", retry_after=1, count=1)
        await asyncio.gather(*(client.chat_postMessage(channel="C1", text=str(n))
                               for n in range(5)))
        assert _refused(slack) == 1  # the others waited out the one pause, not each its own
        assert client.pacer is not None and client.pacer.stats.pauses == 1
        assert sorted(m.text for m in slack.messages("C1")) == [str(n) for n in range(5)]


def test_limits_that_dont_parse_name_the_bad_part():
    assert parse_limits("off") == ()
    with pytest.raises(ValueError, match="chat.update=fast"):
        parse_limits("chat.postMessage=1/s/channel,chat.update=fast")
