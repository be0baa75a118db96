"""`serve` picks Socket Mode when an app token is set, HTTP otherwise (no Slack needed)."""

import slack_bolt.adapter.socket_mode.aiohttp as socket_mode

from bot.app import runtime
from bot.config.settings import load_settings
from tests.procs import wait_for

ENV = {"SLACK_BOT_TOKEN": "xoxb-test", "APPROVALS_CHANNEL": "C0APPROVALS",
       "APPROVERS": "U0BOB", "SLACK_API_URL": "http://127.0.0.1:9/api/"}
PORTS = {"PORT": "0", "INTERNAL_PORT": "0",  # any free ones: never 3000/3001 on a shared host
         "LISTENER_DRAIN_SECONDS": "0"}


async def test_socket_mode_when_an_app_token_is_set(tmp_path, monkeypatch):
    import asyncio

    import aiohttp

    started, health = [], []
    stop = asyncio.Event()

    class Handler:
        def __init__(self, app, app_token):
            started.append((app, app_token))

        async def connect_async(self):
            # Connected: the health endpoints answer on the internal port meanwhile.
            async with aiohttp.ClientSession() as session, \
                    session.get(f"{rt.internal_url}/healthz") as response:
                health.append(response.status)
            stop.set()

        async def close_async(self):
            started.append("closed")

    monkeypatch.setattr(socket_mode, "AsyncSocketModeHandler", Handler)
    settings = load_settings({**ENV, "SLACK_APP_TOKEN": "xapp-1-test", **PORTS,
                              "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    settings.require_slack()  # no signing secret needed in Socket Mode
    async with runtime.start(settings, scheduler=False) as rt:
        await runtime.serve(rt, stop=stop)
    assert started == [(rt.bolt, "xapp-1-test"), "closed"]
    assert health == [200]
    assert rt.http_url is None  # Socket Mode: no public port at all


async def test_the_public_port_serves_slack_only_and_the_internal_one_the_rest(tmp_path, caplog):
    import asyncio
    import logging

    import aiohttp

    settings = load_settings({**ENV, "SLACK_SIGNING_SECRET": "s", "PORT": "0",
                              "INTERNAL_PORT": "0",
                              "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}"})
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="bot.app.runtime")
    async with runtime.start(settings, scheduler=False) as rt, aiohttp.ClientSession() as http:
        serving = asyncio.create_task(runtime.serve(rt, stop=stop, host="127.0.0.1"))
        await wait_for(lambda: rt.http_url and rt.internal_url, what="both listeners")
        assert rt.http_url != rt.internal_url
        for path in ("/healthz", "/readyz", "/metrics"):
            async with http.get(f"{rt.http_url}{path}") as response:
                assert response.status == 404, path  # not on the port Slack reaches
        async with http.post(f"{rt.http_url}/slack/events", data=b"command=/cluster") as r:
            assert r.status == 401  # Slack's endpoint is there (unsigned: refused)
        async with http.get(f"{rt.internal_url}/healthz") as response:
            assert response.status == 200
        async with http.get(f"{rt.internal_url}/metrics") as response:
            assert response.status == 200 and "clusterbot_build_info" in await response.text()
        async with http.post(f"{rt.internal_url}/slack/events", data=b"") as response:
            assert response.status in (404, 405)  # and Slack's isn't on the internal one
        stop.set()
        await serving
    [line] = [r.getMessage() for r in caplog.records if "listening for Slack" in r.getMessage()]
    # The line names both bind addresses as bound (port 0 resolved).
    assert line.startswith(f"listening for Slack on {rt.bound} ") and rt.bound != "127.0.0.1:0"
    assert f"health and metrics on {rt.internal_bound} " in line
    assert rt.internal_bound != "127.0.0.1:0"


def test_the_internal_port_is_its_own():
    import pytest

    from bot.config.settings import ConfigError

    assert load_settings(ENV).internal_port == 3001
    assert load_settings({**ENV, "INTERNAL_HOST": "127.0.0.1"}).internal_host == "127.0.0.1"
    with pytest.raises(ConfigError) as caught:
        load_settings({**ENV, "PORT": "3005", "INTERNAL_PORT": "3005"})
    [problem] = caught.value.problems
    assert "INTERNAL_PORT and PORT are both 3005" in problem


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
    settings = load_settings({**ENV, "SLACK_APP_TOKEN": "xapp-1-test", **PORTS,
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
    settings = load_settings({**ENV, "SLACK_APP_TOKEN": "xapp-1-test", **PORTS,
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

    from bot.app import cli

    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    gc.disable()
    try:
        assert cli.main(["migrate"]) == 0
        assert gc.isenabled()
    finally:
        gc.enable()
