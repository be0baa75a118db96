"""Slack over one HTTP session: Web API calls and response_url replies reuse connections
instead of opening a session (a TCP connection, a TLS handshake at Slack) per call."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from bot.app import runtime
from bot.config.settings import load_settings
from bot.slack.app import SessionRespond

ENV = {"SLACK_BOT_TOKEN": "xoxb-test", "APPROVALS_CHANNEL": "C0APPROVALS",
       "APPROVERS": "U0BOB", "SLACK_API_URL": "http://127.0.0.1:9/api/",
       "SLACK_SIGNING_SECRET": "s"}


async def test_replies_through_response_urls_share_one_connection():
    got: list[dict] = []

    async def hook(request: web.Request) -> web.Response:
        got.append(await request.json())
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook/{n}", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    opened: list[object] = []

    async def on_open(session, ctx, params) -> None:
        opened.append(params)

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(on_open)
    try:
        async with aiohttp.ClientSession(trace_configs=[trace]) as session:
            for n in range(3):
                respond = SessionRespond(response_url=f"http://127.0.0.1:{port}/hook/{n}",
                                         session=session)
                response = await respond(text=f"reply {n}", response_type="ephemeral")
                assert response.status_code == 200
            await SessionRespond(response_url=f"http://127.0.0.1:{port}/hook/3",
                                 session=session)({"text": "whole", "replace_original": True})
    finally:
        await runner.cleanup()
    assert [g["text"] for g in got] == ["reply 0", "reply 1", "reply 2", "whole"]
    assert got[0]["response_type"] == "ephemeral" and got[3]["replace_original"] is True
    assert len(opened) == 1  # Bolt's own respond would have opened 4


async def test_the_runtime_gives_slack_one_session_and_closes_it(tmp_path):
    settings = load_settings({**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    async with runtime.start(settings, scheduler=False) as rt:
        session = rt.slack.session
        assert session is not None and not session.closed
        assert rt.bolt.client.session is session  # Bolt's per-request clients are given it too
    assert session.closed
