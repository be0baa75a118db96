"""`serve` picks Socket Mode when an app token is set, HTTP otherwise (no Slack needed)."""

import slack_bolt.adapter.socket_mode.aiohttp as socket_mode

from bot import runtime
from bot.config import load_settings

ENV = {"SLACK_BOT_TOKEN": "xoxb-test", "APPROVALS_CHANNEL": "C0APPROVALS",
       "APPROVERS": "U0BOB", "SLACK_API_URL": "http://127.0.0.1:9/api/"}


async def test_socket_mode_when_an_app_token_is_set(tmp_path, monkeypatch):
    import asyncio

    import aiohttp

    started, health = [], []
    stop = asyncio.Event()

    class Handler:
        def __init__(self, app, app_token):
            started.append((app, app_token))

        async def connect_async(self):
            # Connected: the health endpoints answer on PORT meanwhile.
            async with aiohttp.ClientSession() as session, \
                    session.get(f"{rt.http_url}/healthz") as response:
                health.append(response.status)
            stop.set()

        async def close_async(self):
            started.append("closed")

    monkeypatch.setattr(socket_mode, "AsyncSocketModeHandler", Handler)
    settings = load_settings({**ENV, "SLACK_APP_TOKEN": "xapp-1-test", "PORT": "0",
                              "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    settings.require_slack()  # no signing secret needed in Socket Mode
    async with runtime.start(settings, scheduler=False) as rt:
        await runtime.serve(rt, stop=stop)
    assert started == [(rt.bolt, "xapp-1-test"), "closed"]
    assert health == [200]


async def test_http_mode_serves_slack_events_and_health(tmp_path):
    import aiohttp

    settings = load_settings({**ENV, "SLACK_SIGNING_SECRET": "s",
                              "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    async with runtime.start(settings, scheduler=False) as rt, \
            runtime.http_site(rt, host="127.0.0.1", port=0) as url, \
            aiohttp.ClientSession() as session:
        async with session.get(f"{url}/healthz") as response:
            assert response.status == 200
        async with session.post(f"{url}/slack/events", data=b"command=/cluster") as response:
            assert response.status == 401  # unsigned


async def test_socket_mode_keeps_trying_while_slack_is_down(tmp_path, monkeypatch):
    import asyncio

    from slack_sdk.errors import SlackApiError

    tries = []
    stop = asyncio.Event()

    class Handler:
        def __init__(self, app, app_token):
            pass

        async def connect_async(self):
            tries.append("try")
            if len(tries) < 3:  # apps.connections.open answers 503 twice
                raise SlackApiError("service_unavailable", {"ok": False})
            stop.set()

        async def close_async(self):
            pass

    monkeypatch.setattr(socket_mode, "AsyncSocketModeHandler", Handler)
    monkeypatch.setattr(runtime, "FIRST_RETRY_SECONDS", 0.01)
    settings = load_settings({**ENV, "SLACK_APP_TOKEN": "xapp-1-test", "PORT": "0",
                              "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    async with runtime.start(settings, scheduler=False) as rt:
        await asyncio.wait_for(runtime.serve(rt, stop=stop), 10)
    assert tries == ["try", "try", "try"]


async def test_serve_turns_the_collector_back_on(tmp_path, monkeypatch):
    """`cluster-bot serve` starts with the cyclic collector off (bot/__main__.py); serving
    freezes the start-up heap and turns it on, before the first request is answered."""
    import asyncio
    import gc

    import slack_bolt.adapter.socket_mode.aiohttp as socket_mode_adapter

    stop = asyncio.Event()
    seen: list[bool] = []

    class Handler:
        def __init__(self, app, app_token):
            pass

        async def connect_async(self):
            seen.append(gc.isenabled())
            stop.set()

        async def close_async(self):
            pass

    monkeypatch.setattr(socket_mode_adapter, "AsyncSocketModeHandler", Handler)
    settings = load_settings({**ENV, "SLACK_APP_TOKEN": "xapp-1-test", "PORT": "0",
                              "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    gc.disable()
    try:
        async with runtime.start(settings, scheduler=False) as rt:
            assert not gc.isenabled()
            await runtime.serve(rt, stop=stop)
    finally:
        gc.enable()
    assert seen == [True]


def test_every_other_command_turns_the_collector_on_at_once(tmp_path, monkeypatch, capsys):
    import gc

    from bot import cli

    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    gc.disable()
    try:
        assert cli.main(["migrate"]) == 0
        assert gc.isenabled()
    finally:
        gc.enable()
