"""`python -m benchmarks.slackproc`: FakeSlack in a process of its own, as Slack is to the bot.

Prints one JSON line — `{"api_url", "bot_token", "inspect_url"}` — then serves until SIGTERM.
Besides Slack's Web API (for the bot), it serves the benchmark:

    GET  {inspect_url}/posts?since=N   what the bot put in Slack (chat.postMessage, and the
                                       chat.update edits of what it posted: a storm's digest
                                       grows by edits), Slack's answer ok, from the N-th on:
                                       {"posts": [{"t": unix seconds, "method": its method,
                                                   "text": args as JSON}]}
    POST {inspect_url}/sink/{any}      a response_url that answers 200 and keeps nothing (the
                                       load generator's slash commands point there)
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from aiohttp import web

from benchmarks.serving import serve_until_sigterm
from devslack.models import DEFAULT_USERS, ApiCall, SlackUser
from devslack.webapi import FakeSlack
from tests.e2e.harness import APPROVALS, DAVE, GENERAL, LEADS

SHOWN = ("chat.postMessage", "chat.update")  # what a person sees appear or change


async def main() -> None:
    posts: list[dict[str, object]] = []

    def on_call(call: ApiCall) -> None:
        if call.method in SHOWN and call.ok:
            posts.append({"t": time.time(), "method": call.method,
                          "text": json.dumps(call.args, default=str)})

    async def read_posts(request: web.Request) -> web.Response:
        since = int(request.query.get("since", "0"))
        return web.json_response({"posts": posts[since:]})

    async def sink(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    users = (*DEFAULT_USERS, SlackUser(DAVE, "dave", "Dave Diaz"))
    async with FakeSlack(channels={GENERAL: "general", APPROVALS: "approvals",
                                   "C0RANDOM": "random"}, users=users,
                         usergroups={LEADS: ["U0CAROL"]}) as slack:
        slack.subscribe(on_call)
        app = web.Application()
        app.router.add_get("/posts", read_posts)
        app.router.add_post("/sink/{any}", sink)
        await serve_until_sigterm(app, lambda port: json.dumps({
            "api_url": slack.api_url, "bot_token": slack.bot_token,
            "inspect_url": f"http://127.0.0.1:{port}"}))

if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
