"""What the benchmark's child processes share: serve an aiohttp app on 127.0.0.1 (a port of the
system's choosing), say where on stdout, and run until SIGTERM. Imports nothing heavy: the bare
Bolt baseline's start-up is measured with it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from aiohttp import web


async def serve_until_sigterm(app: web.Application, announce: Callable[[int], str]) -> None:
    """Serve `app` until SIGTERM; `announce(port)` is printed once it listens."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    print(announce(runner.addresses[0][1]), flush=True)  # noqa: T201
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()
