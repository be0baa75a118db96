"""CPU per ack (issue 28.4): what a request costs the program before Slack has its answer.

The burst benchmark (benchmarks/burst.py) measures wall time, which follows the machine's load;
this measures the cause. In one process, the bot (the e2e harness's, on SQLite) and a bare Bolt
app (benchmarks/barebolt.py) take the same signed requests — the burst's kinds: `/cluster list`,
`help`, `status <id>`, `waiting` and a cluster's Status button — one at a time, through their
aiohttp route handlers (no socket: the HTTP parsing and writing, the same for both, is left
out). The CPU (`time.process_time`) from the request to its answer is counted; the bot's work
after the ack is let finish between requests and not counted. PROFILE=1 (PROFILE=bare) prints
the bot's (the bare app's) top functions over those requests.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import os
import pstats
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from unittest import mock

from aiohttp import streams, web
from aiohttp.test_utils import make_mocked_request
from slack_sdk.web.async_client import AsyncWebClient

from benchmarks.barebolt import bare_app
from benchmarks.report import Table, percentile
from benchmarks.world import signed, signed_click
from bot.slack.app import EVENTS_PATH, http_app
from tests.e2e.harness import SECRET, Harness, bot

REQUESTS = 300  # per kind and program
KINDS = ("list", "help", "status C-0001", "waiting", "click")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _handler(app: web.Application) -> Handler:
    for route in app.router.routes():
        if route.method == "POST" and route.resource is not None \
                and route.resource.canonical == EVENTS_PATH:
            return route.handler
    raise LookupError(EVENTS_PATH)


def _request(kind: str, n: int, sink: str) -> web.Request:
    body, headers = (signed_click("C-0001", n, sink) if kind == "click"
                     else signed(kind, n, sink))
    payload = streams.StreamReader(mock.Mock(_reading_paused=False), 2 ** 16,
                                   loop=asyncio.get_running_loop())
    payload.feed_data(body)
    payload.feed_eof()
    return make_mocked_request("POST", EVENTS_PATH, headers=headers, payload=payload)


async def _cpu_per_ack(handler: Handler, kind: str, sink: str,
                       settle: Callable[[], Awaitable[None]], count: int,
                       profile: cProfile.Profile | None = None) -> list[float]:
    """CPU seconds from each request to its answer, one request at a time."""
    spent: list[float] = []
    for n in range(count):
        request = _request(kind, n, sink)
        if profile is not None:
            profile.enable()
        began = time.process_time()
        response = await handler(request)
        spent.append(time.process_time() - began)
        if profile is not None:
            profile.disable()
        assert response.status == 200, (kind, response.status)
        await settle()
    return spent


async def _sink_site() -> tuple[web.AppRunner, str]:
    async def sink(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/sink/{any}", sink)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def _measure(h: Harness, sink: str) -> tuple[dict[str, dict[str, list[float]]], str]:
    bot_handler = _handler(http_app(h.rt.bolt, signing_secrets=[SECRET]))
    bare = bare_app(AsyncWebClient(token=h.slack.bot_token, base_url=h.slack.api_url), SECRET)
    bare_handler = _handler(bare.web_app(path=EVENTS_PATH))

    async def nothing() -> None:
        return None

    programs = {"bot": (bot_handler, h.rt.settle), "bare Bolt": (bare_handler, nothing)}
    for handler, settle in programs.values():  # warm-up: auth.test, caches, first imports
        for kind in KINDS:
            await _cpu_per_ack(handler, kind, sink, settle, 20)
    profiled = os.environ.get("PROFILE", "")  # "1": the bot's; "bare": the bare app's
    profile = cProfile.Profile() if profiled else None
    profiled_name = "bare Bolt" if profiled == "bare" else "bot"
    got: dict[str, dict[str, list[float]]] = {name: {} for name in programs}
    gc.collect()
    for kind in KINDS:  # alternately, kind by kind
        for name, (handler, settle) in programs.items():
            got[name][kind] = await _cpu_per_ack(
                handler, kind, sink, settle, REQUESTS,
                profile if name == profiled_name else None)
    text = ""
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(45)
        out.write("\n")
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(60)
        text = out.getvalue()
    return got, text


async def run() -> list[Table]:
    with tempfile.TemporaryDirectory() as tmp:
        runner, sink = await _sink_site()
        try:
            async with bot(Path(tmp)) as h:
                got, profile = await _measure(h, sink)
        finally:
            await runner.cleanup()
    table = Table(
        f"13c. CPU per ack (µs), in process, one request at a time, {REQUESTS} of each kind "
        "per program: bot vs a bare Bolt app",
        ["kind", "bot p50", "bot mean", "bare p50", "bare mean", "bot / bare (mean)"])
    for kind in KINDS:
        mine, theirs = got["bot"][kind], got["bare Bolt"][kind]
        mean, bare_mean = sum(mine) / len(mine), sum(theirs) / len(theirs)
        table.rows.append([kind, f"{percentile(mine, 50) * 1e6:.0f}", f"{mean * 1e6:.0f}",
                           f"{percentile(theirs, 50) * 1e6:.0f}", f"{bare_mean * 1e6:.0f}",
                           f"{mean / bare_mean:.2f}×"])
    every = [s for kinds in got["bot"].values() for s in kinds]
    bare_every = [s for kinds in got["bare Bolt"].values() for s in kinds]
    table.rows.append(["all", f"{percentile(every, 50) * 1e6:.0f}",
                       f"{sum(every) / len(every) * 1e6:.0f}",
                       f"{percentile(bare_every, 50) * 1e6:.0f}",
                       f"{sum(bare_every) / len(bare_every) * 1e6:.0f}",
                       f"{sum(every) / sum(bare_every):.2f}×"])
    table.notes.append("the route handler's CPU from the signed request to the answer "
                       "(HTTP parsing and writing, the same for both, left out)")
    if profile:
        table.notes.append("a profile over the measured requests:\n" + profile)
    return [table]
