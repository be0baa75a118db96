"""The ack tail (issues 24.6 and 28.4): one replica on PostgreSQL, sweeping 1,000 clusters, and a
bare Bolt app (benchmarks/barebolt.py) answering the same signed requests in the same run.

- the burst: 200 concurrent requests — 160 slash commands (`/cluster list`, `help`, `status
  <id>`, `waiting` in turn) and 40 clicks (a cluster's Status button) — sent all at once,
  BURSTS times to each program, alternately; ack p50/p99 per kind, and the bot's p99 as a
  ratio of the bare app's for the same kind;
  and the CPU each program used from sending a burst to its last ack (what the wall time
  follows on a busy machine, where the wall times scatter with the load);
- list-only traffic: bursts of 50 concurrent `/cluster list` every 0.25 s for LOAD_SECONDS,
  bot and bare Bolt alternately, ROUNDS times: ack p99 ratio (the target: ≤ 1.5×).

Each process on its own (the bot, the simulator, FakeSlack, the bare app, PostgreSQL); where no
PostgreSQL can start, SQLite, and the table says so. The acks are measured here, from sending
the request to reading the whole answer: what Slack's 3-second clock sees. A request refused,
answered other than 200 or not within 60 s counts as failed (and as infinitely slow).
"""

from __future__ import annotations

import asyncio
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp

from benchmarks.report import Table, percentile
from benchmarks.world import (
    LISTENING,
    POLL_SECONDS,
    Child,
    World,
    cpu_seconds,
    open_world,
    signed,
    signed_click,
)
from tests.pg import PgServer, PgUnavailable

CLUSTERS = 1000
BURSTS = 5  # per program, alternately
COMMANDS, CLICKS = 160, 40
COMMAND_TEXTS = ("list", "help", "status {cluster}", "waiting")
SETTLE_SECONDS = 1.0  # after a burst: the bot's work after its acks, before the next burst
LIST_CONCURRENCY = 50
BURST_EVERY = 0.25
LOAD_SECONDS = 2.0 * POLL_SECONDS  # each window holds sweeps
ROUNDS = 2

Acks = dict[str, list[float]]  # kind → ack seconds; CPU → the program's CPU seconds per burst
CPU = "cpu"


async def _post(w: World, url: str, body: bytes, headers: dict[str, str]) -> float:
    """The ack's seconds; infinity when it never came, or not as a 200 (counted as failed)."""
    began = time.perf_counter()
    try:
        async with w.session.post(url, data=body, headers=headers,
                                  timeout=aiohttp.ClientTimeout(total=60)) as r:
            await r.read()
            if r.status != 200:
                return math.inf
    except (aiohttp.ClientError, TimeoutError):
        return math.inf
    return time.perf_counter() - began


async def _burst(w: World, url: str, clusters: Sequence[str], into: Acks) -> None:
    """COMMANDS slash commands and CLICKS clicks, interleaved, all in flight at once."""
    requests: list[tuple[str, bytes, dict[str, str]]] = []
    for i in range(COMMANDS + CLICKS):
        w.counter += 1
        cluster = clusters[i % len(clusters)]
        if i % ((COMMANDS + CLICKS) // CLICKS) == 0:
            requests.append(("click", *signed_click(cluster, w.counter, w.slack["inspect_url"])))
        else:
            text = COMMAND_TEXTS[i % len(COMMAND_TEXTS)].format(cluster=cluster)
            requests.append(("command", *signed(text, w.counter, w.slack["inspect_url"])))
    acks = await asyncio.gather(*(_post(w, url, body, headers)
                                  for _, body, headers in requests))
    for (kind, _, _), seconds in zip(requests, acks, strict=True):
        into.setdefault(kind, []).append(seconds)


async def _lists(w: World, url: str) -> list[float]:
    """Bursts of LIST_CONCURRENCY `/cluster list` every BURST_EVERY s for LOAD_SECONDS."""
    loop = asyncio.get_running_loop()
    end = loop.time() + LOAD_SECONDS
    pending: list[asyncio.Task[float]] = []
    while loop.time() < end:
        for _ in range(LIST_CONCURRENCY):
            w.counter += 1
            body, headers = signed("list", w.counter, w.slack["inspect_url"])
            pending.append(asyncio.create_task(_post(w, url, body, headers)))
        await asyncio.sleep(BURST_EVERY)  # the load's pace
    return list(await asyncio.gather(*pending))


async def measure(w: World, bot_url: str, bare_url: str, clusters: Sequence[str],
                  pids: dict[str, int]) -> tuple[dict[str, Acks], dict[str, list[float]]]:
    bursts: dict[str, Acks] = {"bot": {}, "bare Bolt": {}}
    lists: dict[str, list[float]] = {"bot": [], "bare Bolt": []}
    targets = {"bot": f"{bot_url}/slack/events", "bare Bolt": f"{bare_url}/slack/events"}
    for _ in range(BURSTS):
        for name, url in targets.items():
            used = cpu_seconds(pids[name])
            await _burst(w, url, clusters, bursts[name])
            bursts[name].setdefault(CPU, []).append(cpu_seconds(pids[name]) - used)
            await asyncio.sleep(SETTLE_SECONDS)  # the work after the acks, between bursts
    for _ in range(ROUNDS):
        for name, url in targets.items():
            lists[name] += await _lists(w, url)
    return bursts, lists


async def run() -> list[Table]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        async with AsyncExitStack() as stack:
            try:
                server: PgServer | None = PgServer.start()
                stack.callback(server.stop)
                database_url = server.url(server.create_database())
            except PgUnavailable:
                server, database_url = None, f"sqlite:///{tmp / 'bot.db'}"
            w = await open_world(stack, tmp, database_url, log_level="INFO")
            await w.grow_to(CLUSTERS)
            clusters = [c["id"] for c in (await w.list_raw())[0]]
            bot_url = await w.start_bot()
            bare = Child([sys.executable, "-m", "benchmarks.barebolt"], w.bot_env(),
                         tmp / "bare.log", tmp)
            await bare.start()
            stack.push_async_callback(bare.stop)
            bare_url = (await bare.wait_for(LISTENING))[1]
            await asyncio.sleep(2 * POLL_SECONDS)  # the bot has swept the clusters: warm
            await _burst(w, f"{bot_url}/slack/events", clusters, {})  # warm-up, not counted
            await _burst(w, f"{bare_url}/slack/events", clusters, {})
            assert w.bot is not None
            bursts, lists = await measure(w, bot_url, bare_url, clusters,
                                          {"bot": w.bot.pid, "bare Bolt": bare.pid})
    return _tables(bursts, lists, database="PostgreSQL" if server else "SQLite")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def _tables(bursts: dict[str, Acks], lists: dict[str, list[float]], *,
            database: str) -> list[Table]:
    burst = Table(
        f"13a. A burst of {COMMANDS + CLICKS} concurrent requests ({COMMANDS} slash commands, "
        f"{CLICKS} clicks) to one replica on {database} sweeping {CLUSTERS:,} clusters every "
        f"{POLL_SECONDS} s, {BURSTS}× each, vs a bare Bolt app (ms)",
        ["kind", "program", "acks", "p50", "p99", "max", ">3 s", "failed", "p99 vs bare"])
    for kind in ("command", "click"):
        for name in ("bot", "bare Bolt"):
            got, bare = bursts[name][kind], bursts["bare Bolt"][kind]
            burst.rows.append([
                kind, name, str(len(got)), _ms(percentile(got, 50)), _ms(percentile(got, 99)),
                _ms(max(got)), str(sum(1 for a in got if a > 3.0)),
                str(sum(1 for a in got if a == math.inf)),
                f"{percentile(got, 99) / percentile(bare, 99):.2f}×"])
    cpu = {name: sum(bursts[name][CPU]) / len(bursts[name][CPU]) for name in bursts}
    burst.notes.append(f"CPU per burst, from sending it to its last ack: bot {_ms(cpu['bot'])} "
                       f"ms, bare Bolt {_ms(cpu['bare Bolt'])} ms "
                       f"({cpu['bot'] / cpu['bare Bolt']:.2f}×)")
    command, click = bursts["bot"]["command"], bursts["bot"]["click"]
    burst.notes.append(f"the bot's command p99 / its click p99: "
                       f"{percentile(command, 99) / percentile(click, 99):.2f}× "
                       "(1.0: a command costs no more before its ack than a click)")
    burst.notes.append(f"commands: {', '.join(COMMAND_TEXTS)} in turn; clicks: a cluster's "
                       "Status button; the ack is the whole HTTP answer as Slack reads it")
    listing = Table(
        f"13b. List-only: {LIST_CONCURRENCY} concurrent `/cluster list` every {BURST_EVERY} s "
        f"for {LOAD_SECONDS:g} s, {ROUNDS} rounds each, same replica and run (ms)",
        ["program", "acks", "p50", "p99", "max", "failed", "p99 vs bare"])
    for name in ("bot", "bare Bolt"):
        got = lists[name]
        listing.rows.append([name, str(len(got)), _ms(percentile(got, 50)),
                             _ms(percentile(got, 99)), _ms(max(got)),
                             str(sum(1 for a in got if a == math.inf)),
                             f"{percentile(got, 99) / percentile(lists['bare Bolt'], 99):.2f}×"])
    listing.notes.append("target: the bot's p99 ≤ 1.5× the bare app's (issue 28.4)")
    return [burst, listing]
