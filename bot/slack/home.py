"""The App Home tab: published when opened, and again when something on it changes."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.services.container import Services
from bot.slack.blocks import home as home_blocks
from bot.slack.errors import answering


def register(app: AsyncApp, services: Services) -> None:
    @app.event("app_home_opened")
    @answering
    async def home_opened(event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("tab", "home") != "home":
            return
        facts = await services.home.facts(event["user"])
        view = home_blocks.home_view(
            user_id=facts.user_id, clusters=facts.clusters, pending=facts.pending,
            is_approver=facts.is_approver, month_spent_cents=facts.month_spent_cents,
            budget_cents=facts.budget_cents, month=facts.month, now=services.clock.now())
        await client.views_publish(user_id=facts.user_id, view=view)
