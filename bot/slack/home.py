"""The App Home tab: what the bot can do and the user's live clusters."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bot.services.container import Services
from bot.slack.blocks import cluster as cluster_blocks
from bot.slack.blocks import common
from bot.slack.errors import answering


def register(app: AsyncApp, services: Services) -> None:
    @app.event("app_home_opened")
    @answering
    async def home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        user = event["user"]
        mine = [c for c in await services.clusters.live() if c.owner_id == user]
        blocks = [*common.help_message().blocks,
                  *cluster_blocks.cluster_list(mine, now=services.clock.now()).blocks]
        await client.views_publish(user_id=user, view=View(type="home", blocks=blocks[:100]))
