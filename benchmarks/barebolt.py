"""`python -m benchmarks.barebolt`: the baseline — a bare Bolt AsyncApp whose `/cluster`
listener and button listener only ack, served by Bolt's own aiohttp server. Same signing secret
and Slack API URL as the bot (env SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN, SLACK_API_URL);
prints the same "listening for Slack on <url>/slack/events" line the bot logs, then serves until
SIGTERM."""

from __future__ import annotations

import asyncio
import os
import re

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from benchmarks.serving import serve_until_sigterm


def bare_app(client: AsyncWebClient, signing_secret: str) -> AsyncApp:
    """The baseline app: one `/cluster` listener and one for every button, each only acking
    (benchmarks/ackcpu.py measures it in process too)."""
    app = AsyncApp(client=client, signing_secret=signing_secret)

    @app.command("/cluster")
    async def command(ack: AsyncAck) -> None:
        await ack()

    @app.action(re.compile(".*"))
    async def click(ack: AsyncAck) -> None:
        await ack()

    return app


async def main() -> None:
    client = AsyncWebClient(token=os.environ["SLACK_BOT_TOKEN"],
                            base_url=os.environ["SLACK_API_URL"])
    app = bare_app(client, os.environ["SLACK_SIGNING_SECRET"])
    await serve_until_sigterm(
        app.web_app(path="/slack/events"),
        lambda port: f"listening for Slack on http://127.0.0.1:{port}/slack/events")


if __name__ == "__main__":
    asyncio.run(main())
