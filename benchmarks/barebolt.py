"""`python -m benchmarks.barebolt`: the baseline — a bare Bolt AsyncApp whose `/cluster`
listener only acks, served by Bolt's own aiohttp server. Same signing secret and Slack API URL
as the bot (env SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN, SLACK_API_URL); prints the same
"listening for Slack on <url>/slack/events" line the bot logs, then serves until SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal

from aiohttp import web
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient


async def main() -> None:
    client = AsyncWebClient(token=os.environ["SLACK_BOT_TOKEN"],
                            base_url=os.environ["SLACK_API_URL"])
    app = AsyncApp(client=client, signing_secret=os.environ["SLACK_SIGNING_SECRET"])

    @app.command("/cluster")
    async def command(ack: AsyncAck) -> None:
        await ack()

    runner = web.AppRunner(app.web_app(path="/slack/events"), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"listening for Slack on http://127.0.0.1:{port}/slack/events", flush=True)  # noqa: T201
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
