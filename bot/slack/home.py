"""The App Home tab: published when opened, and again when something on it changes."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.services.container import Services
from bot.slack.blocks import home as home_blocks
from bot.slack.errors import answering

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
    @app.event("app_home_opened")
    @answering
    async def home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        await publish(services, client, event["user"])


async def publish(services: Services, client: AsyncWebClient, user_id: str) -> None:
    facts = await services.home.facts(user_id)
    await client.views_publish(
        user_id=facts.user_id, view=home_blocks.home_payload(facts, now=services.clock.now()))


def pressed_in_home(body: dict[str, Any]) -> bool:
    """A block_actions payload from the Home tab: no response_url, `view.type == "home"`."""
    return (body.get("container") or {}).get("type") == "view" \
        and (body.get("view") or {}).get("type") == "home"


async def refresh_after_press(services: Services, client: AsyncWebClient,
                              body: dict[str, Any]) -> None:
    """After a press in the Home tab, whatever it did: the presser sees the state it left."""
    if not pressed_in_home(body):
        return
    try:
        await publish(services, client, body["user"]["id"])
    except SlackApiError as exc:  # best effort: a home is not a record
        log.warning("could not refresh a home after a press: %s", exc.response.get("error"))
