"""A tiny Bolt app served on 127.0.0.1:0, driven through FakeSlack and SlackRequests.

The demo app stands in for the real bot (written elsewhere): /demo acks and posts a card with
two buttons; "Open form" opens a modal; the submission is validated in the ack, then answered
with a DM and a thread reply; "Dismiss" (with a confirm dialog) edits the card in place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import ManualClock
from devslack import FakeSlack, SlackRequests

SECRET = "devslack-test-signing-secret"
ALICE, BOB, CAROL = "U0ALICE", "U0BOB", "U0CAROL"


@dataclass
class Demo:
    """The demo app and what it saw."""

    app: AsyncApp
    bodies: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def card_blocks(user_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "header", "text": {"type": "plain_text", "text": "Demo card"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"Hello <@{user_id}>, pick one."}},
        {
            "type": "actions",
            "block_id": "card_actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": "open_form",
                    "text": {"type": "plain_text", "text": "Open form"},
                    "value": "form-1",
                    "style": "primary",
                },
                {
                    "type": "button",
                    "action_id": "dismiss",
                    "text": {"type": "plain_text", "text": "Dismiss"},
                    "value": "dismiss-1",
                    "style": "danger",
                    "confirm": {
                        "title": {"type": "plain_text", "text": "Dismiss the card?"},
                        "text": {"type": "plain_text", "text": "It cannot come back."},
                        "confirm": {"type": "plain_text", "text": "Dismiss"},
                        "deny": {"type": "plain_text", "text": "Keep"},
                    },
                },
            ],
        },
    ]


def options(*values: str) -> list[dict[str, Any]]:
    return [{"text": plain(v.title()), "value": v} for v in values]


def plain(text: str) -> dict[str, str]:
    return {"type": "plain_text", "text": text}


def input_block(block_id: str, label: str, element: dict[str, Any]) -> dict[str, Any]:
    return {"type": "input", "block_id": block_id, "label": plain(label), "element": element}


def form_view(private_metadata: str) -> dict[str, Any]:
    size_options = options("small", "large")
    return {
        "type": "modal",
        "callback_id": "demo_form",
        "private_metadata": private_metadata,
        "title": plain("Demo form"),
        "submit": plain("Send"),
        "close": plain("Cancel"),
        "blocks": [
            input_block("name", "Name", {"type": "plain_text_input", "action_id": "value",
                                         "initial_value": "Ada"}),
            input_block("size", "Size", {"type": "static_select", "action_id": "value",
                                         "options": size_options,
                                         "initial_option": size_options[0]}),
        ],
    }


def small_modal(title: str = "Stacked", **extra: Any) -> dict[str, Any]:
    """A valid one-input modal (radio buttons `pick`/`choice`, callback_id `stacked`)."""
    return {
        "type": "modal",
        "callback_id": "stacked",
        "title": plain(title),
        "submit": plain("OK"),
        "blocks": [input_block("pick", "Pick", {"type": "radio_buttons", "action_id": "choice",
                                                "options": options("one", "two")})],
        **extra,
    }


def build_demo(client: AsyncWebClient) -> Demo:
    app = AsyncApp(signing_secret=SECRET, client=client)
    demo = Demo(app)

    @app.middleware
    async def remember(body: dict[str, Any], next: Any) -> None:
        demo.bodies.append(body)
        await next()

    @app.command("/demo")
    async def card(ack: Any, say: Any, command: dict[str, Any]) -> None:
        await ack()
        await say(text="Demo card", blocks=card_blocks(command["user_id"]))

    @app.command("/echo")
    async def echo(ack: Any, command: dict[str, Any]) -> None:
        await ack(f"echo: {command['text']}")

    @app.action("open_form")
    async def open_form(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        origin = f"{body['container']['channel_id']}|{body['container']['message_ts']}"
        await client.views_open(trigger_id=body["trigger_id"], view=form_view(origin))

    @app.action("dismiss")
    async def dismiss(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        await client.chat_update(
            channel=body["container"]["channel_id"],
            ts=body["container"]["message_ts"],
            text="Dismissed",
            blocks=[
                {
                    "type": "context",
                    "elements": [
                        {"type": "mrkdwn", "text": f"Dismissed by <@{body['user']['id']}>"}
                    ],
                }
            ],
        )

    @app.view("demo_form")
    async def submitted(
        ack: Any, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        values = view["state"]["values"]
        name = values["name"]["value"]["value"] or ""
        if name.strip().lower() == "bad":
            await ack(response_action="errors", errors={"name": "Name cannot be bad"})
            return
        await ack()
        size = values["size"]["value"]["selected_option"]["value"]
        user_id = body["user"]["id"]
        await client.chat_postMessage(channel=user_id, text=f"Thanks {name}: {size}")
        channel, ts = view["private_metadata"].split("|")
        await client.chat_postMessage(
            channel=channel, thread_ts=ts, text=f"Form sent by <@{user_id}>"
        )

    @app.event("app_home_opened")
    async def home(event: dict[str, Any], client: AsyncWebClient) -> None:
        await client.views_publish(
            user_id=event["user"],
            view={
                "type": "home",
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": "Your clusters: none"}},
                    {
                        "type": "actions",
                        "elements": [
                            {
                                "type": "button",
                                "action_id": "refresh",
                                "text": {"type": "plain_text", "text": "Refresh"},
                            }
                        ],
                    },
                ],
            },
        )

    @app.action("refresh")
    async def refresh(ack: Any) -> None:
        await ack()

    return demo


@asynccontextmanager
async def serve_bolt(app: AsyncApp) -> AsyncIterator[str]:
    """Serve `app` at /slack/events on 127.0.0.1:<free port>; yields the events URL."""

    async def events(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.router.add_post("/slack/events", events)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}/slack/events"
    finally:
        await runner.cleanup()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest_asyncio.fixture
async def slack(clock: ManualClock) -> AsyncIterator[FakeSlack]:
    async with FakeSlack(clock=clock) as fake:
        yield fake
        await fake.settle()
        assert fake.violations == [], "tests that expect violations clear them"


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


@pytest.fixture
def demo(client: AsyncWebClient) -> Demo:
    return build_demo(client)


@pytest_asyncio.fixture
async def events_url(demo: Demo) -> AsyncIterator[str]:
    async with serve_bolt(demo.app) as url:
        yield url


@pytest_asyncio.fixture
async def requests(slack: FakeSlack, events_url: str) -> AsyncIterator[SlackRequests]:
    async with SlackRequests(events_url=events_url, signing_secret=SECRET, slack=slack) as sender:
        yield sender
        await slack.settle()  # let the bot's follow-ups land before its server stops
