"""The bot's two HTTP listeners and the watchers that keep /readyz truthful.

The public port (PORT) serves Slack only: `/slack/events` in HTTP mode, nothing in Socket Mode.
The internal port (INTERNAL_PORT, default 3001; INTERNAL_HOST, else the public host) serves
`/healthz`, `/readyz` and `/metrics` — burn rate and month spend are nobody's business on the
internet, and a probe or a scrape never competes with Slack's 3-second acks for the port.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

from bot.app.process import Runtime
from bot.config.settings import CannotListen
from bot.observability.reachability import Connection, Prober

log = logging.getLogger(__name__)

HTTP_SHUTDOWN_SECONDS = 5.0  # an ack takes milliseconds; the work after it is drained apart
SOCKET_CHECK_SECONDS = 1.0  # how often the Socket Mode connection's state is read (no I/O)


def this_host(host: str) -> str:
    """Where a client on this host reaches a listener bound to `host`."""
    return "127.0.0.1" if host in ("0.0.0.0", "") else host


@asynccontextmanager
async def site(app: web.Application, *, host: str, port: int, setting: str
               ) -> AsyncIterator[tuple[str, str]]:
    """Serve `app` on host:port; yields (the bound address as given, a URL from this host).

    A port that can't be bound is one line naming `setting` (CannotListen: exit 2)."""
    # No access log: a line per Slack request costs ~10 % of an ack's CPU under load, and what
    # matters is logged where it happens (refusals in bot/slack/app.py, work by the listeners).
    runner = web.AppRunner(app, shutdown_timeout=HTTP_SHUTDOWN_SECONDS, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, host, port)
    try:
        await tcp.start()
    except OSError as exc:
        await runner.cleanup()
        raise CannotListen(f"{setting}: can't listen on {host}:{port}: "
                           f"{exc.strerror or exc} (another process has it? set {setting})"
                           ) from None
    try:
        bound = runner.addresses[0][1]
        yield f"{host}:{bound}", f"http://{this_host(host)}:{bound}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def internal_site(runtime: Runtime, *, host: str = "0.0.0.0",
                        port: int | None = None) -> AsyncIterator[str]:
    """`/healthz`, `/readyz` and `/metrics` on the internal port; yields its URL (this host).

    `host`: the public host, used unless INTERNAL_HOST is set."""
    settings = runtime.settings
    app = runtime.health.app()
    runtime.metrics.add_routes(app)
    wanted = settings.internal_port if port is None else port
    async with site(app, host=settings.internal_host or host, port=wanted,
                    setting="INTERNAL_PORT") as (bound, url):
        runtime.internal_bound, runtime.internal_url = bound, url
        yield url


def watch_connection(connection: Connection, is_connected: Callable[[], Awaitable[bool]]
                     ) -> asyncio.Task[None]:
    """Follow the Socket Mode client's own idea of its WebSocket (a local read, no I/O)."""

    async def watch() -> None:
        while True:
            try:
                up = await is_connected()
            except Exception:  # a half-built client: not connected yet
                up = False
            if up:
                connection.up()
            else:
                connection.down()
            await asyncio.sleep(SOCKET_CHECK_SECONDS)

    return asyncio.create_task(watch(), name="watch the Socket Mode connection")


def start_prober(runtime: Runtime) -> asyncio.Task[None]:
    """One cheap call to Slack (`auth.test`) or AI Reserve (`GET /health`) when a third of the
    budget passed without any call to it, so an idle bot still knows whether they answer."""
    slack, provider = runtime.health.reaches
    prober = Prober(probes={"slack": (slack, runtime.slack.auth_test),
                            "AI Reserve": (provider, runtime.provider.health)},
                    every_seconds=max(runtime.settings.unreachable_budget_seconds / 3, 0.5))
    return asyncio.create_task(prober.run(), name="probe Slack and AI Reserve when idle")
