"""Before the ack, a request is parsed once, Bolt builds no arguments for the bot's middleware
and matchers (bot/slack/direct.py, bot/slack/inbound.py) — the same functions answer the same —
and the help is not serialised again for every ack."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.middleware.async_custom_middleware import AsyncCustomMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.slack import inbound
from bot.slack.app import AckingApp
from bot.slack.blocks.common import help_message
from bot.slack.commands import help_answer
from bot.slack.direct import BodyMatcher, DirectMiddleware
from bot.slack.inflight import AckFirst

FORM = "application/x-www-form-urlencoded"
COMMAND = urlencode({"command": "/cluster", "text": "list", "user_id": "U1", "team_id": "T1",
                     "channel_id": "C1", "response_url": "https://hooks.example/1",
                     "trigger_id": "1.2"}).encode()
CLICK = urlencode({"payload": json.dumps({
    "type": "block_actions", "user": {"id": "U1", "team_id": "T1"}, "team": {"id": "T1"},
    "trigger_id": "1.2", "response_url": "https://hooks.example/1",
    "actions": [{"action_id": "a29", "block_id": "b", "value": "v"}]})}).encode()
EVENT = json.dumps({"type": "event_callback", "team_id": "T1", "event_id": "Ev1",
                    "event": {"type": "app_home_opened", "user": "U1"}}).encode()
TOKEN = "xoxb-test"  # never used: nothing here is dispatched to Slack
BODIES = [(COMMAND, FORM), (CLICK, FORM), (EVENT, "application/json")]


def _apps() -> tuple[AckingApp, AsyncApp]:
    """The bot's app and Bolt's own, the same listeners and middleware registered on each."""
    apps = (AckingApp(name="bot", token=TOKEN, request_verification_enabled=False),
            AsyncApp(name="bolt", token=TOKEN, request_verification_enabled=False))
    for app in apps:
        @app.middleware
        async def request_context(req: AsyncBoltRequest, resp: BoltResponse, next: Any) -> None:
            req.context["seen"] = req.body
            await next()

        @app.middleware
        async def by_name(body: dict[str, Any], next: Any) -> None:  # Bolt's way: named args
            await next()

        async def listener(ack: Any) -> None:
            await ack()

        app.command("/cluster")(listener)
        for i in range(30):
            app.action(f"a{i}")(listener)
        app.action(re.compile("^b"))(listener)
        app.event("app_home_opened")(listener)
        app.view("form")(listener)
    return apps


async def _next() -> BoltResponse:
    return BoltResponse(status=200)


async def test_matchers_and_middleware_are_called_directly_and_answer_as_bolts() -> None:
    bot, bolt = _apps()
    mine = [m for m in bot._async_middleware_list if isinstance(m, AsyncCustomMiddleware)]
    assert [type(m) for m in mine] == [DirectMiddleware, AsyncCustomMiddleware]
    assert {type(listener.matchers[0]) for listener in bot._async_listeners} == {BodyMatcher}
    for raw, content_type in BODIES:
        body = inbound.parsed(raw, content_type)
        for ours, theirs in zip(bot._async_listeners, bolt._async_listeners, strict=True):
            req = AsyncBoltRequest(body=raw.decode(), headers={"content-type": content_type})
            resp = BoltResponse(status=200)
            assert await ours.async_matches(req=req, resp=resp) \
                == await theirs.async_matches(req=req, resp=resp)
        req = AsyncBoltRequest(body=raw.decode(), headers={"content-type": content_type})
        await mine[0].async_process(req=req, resp=BoltResponse(status=200), next=_next)
        assert req.context["seen"] == body
    # a click on the 30th button matches that one listener only
    req = AsyncBoltRequest(body=CLICK.decode(), headers={"content-type": FORM})
    matched = [i for i, listener in enumerate(bot._async_listeners)
               if await listener.async_matches(req=req, resp=BoltResponse(status=200))]
    assert matched == [30]


@pytest.mark.parametrize(("raw", "content_type"), BODIES)
def test_the_request_bolt_gets_is_the_one_it_would_make(raw: bytes, content_type: str) -> None:
    headers = {"Content-Type": content_type, "X-Slack-Retry-Num": "1"}
    ours = inbound.bolt_request(raw, inbound.parsed(raw, content_type), query="a=1",
                                headers=dict(headers))
    theirs = AsyncBoltRequest(body=raw.decode(), query="a=1", headers=dict(headers))
    for name in ("body", "raw_body", "query", "headers", "content_type", "mode", "lazy_only",
                 "lazy_function_name"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert dict(ours.context) == dict(theirs.context)
    assert ours.to_copyable().body == theirs.body


def test_depth_is_counted_only_when_the_brackets_could_reach_the_limit() -> None:
    shallow = json.dumps({"type": "event_callback", "event": {"type": "x", "user": "U1"},
                          "list": [[1]] * 200}).encode()
    assert inbound.parsed(shallow, "application/json")["list"] == [[1]] * 200
    deep = b'{"a":' + b"[" * 65 + b"]" * 65 + b"}"
    with pytest.raises(inbound.Malformed, match="nested too deeply"):
        inbound.parsed(deep, "application/json")
    inside_a_string = json.dumps({"type": "event_callback", "event": {"type": "x", "user": "U"},
                                  "text": "[" * 100}).encode()
    assert inbound.parsed(inside_a_string, "application/json")["text"] == "[" * 100


async def test_the_help_is_acked_as_bolt_would_serialise_it() -> None:
    bolts = await AsyncAck()(**help_message().as_kwargs(), response_type="ephemeral")
    ours = await AckFirst(AsyncAck(), None).answer(help_answer())
    assert json.loads(ours.body) == json.loads(bolts.body)
    assert (ours.status, ours.headers) == (bolts.status, bolts.headers)
    assert help_answer() is help_answer()  # serialised once
