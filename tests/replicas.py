"""The replica scenario, as real processes (tests/procs/): N bots on one database through a
launch, a degrade and a recovery, hours of reminders (the simulator's virtual clock), a `kill -9`
of the sweeping replica while a reminder it claimed is on its way to Slack (the post is dropped:
it never reaches Slack), a SIGTERM of its successor and a terminate. Then every post FakeSlack
recorded is counted per logical notice. Used by tests/test_replicas.py (which asserts 0 and 0)
and by `python -m benchmarks replicas` (which prints the figures).

AI Reserve is reached through `CountingProxy`, which forwards every request unchanged and counts
it, so the scenario also measures provider calls per sweep while nothing happens.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import sqlalchemy as sa
from aiohttp import web

from bot.slack.ids import Action
from storage.replica import wall_clock
from tests.procs import ALICE, BOB, GENERAL, BotProcess, World, wait_for, world

POLL_SECONDS = 1  # the harness's POLL_INTERVAL_SECONDS
QUIET_WINDOW = 6.0  # seconds of real time over which provider calls per sweep are counted
SLACK_LATENCY = {"chat.postMessage": 0.3, "conversations.open": 0.1}
_HOP = {"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive"}


@dataclass
class Held:
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False


class CountingProxy:
    """A loopback reverse proxy that counts requests by time and can hold some of them (a real
    Slack takes ~100-300 ms to post: the window in which replicas race)."""

    def __init__(self, upstream: str, *, delays: dict[str, float] | None = None) -> None:
        parts = urlsplit(upstream)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._prefix = parts.path.rstrip("/")
        self._delays = delays or {}
        self._held: Held | None = None
        self.calls: list[tuple[float, str, str]] = []  # (monotonic time, method, path)
        self.url = ""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[CountingProxy]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}{self._prefix}"
        async with aiohttp.ClientSession(auto_decompress=False) as self._session:
            try:
                yield self
            finally:
                await runner.cleanup()

    async def _forward(self, request: web.Request) -> web.Response:
        self.calls.append((time.monotonic(), request.method, request.path))
        method = request.path.rsplit("/", 1)[-1]
        delay = self._delays.get(method)
        if delay:
            await asyncio.sleep(delay)  # the upstream's latency, in real time
        held = self._held if method == "chat.postMessage" else None
        if held is not None:
            self._held = None
            held.arrived.set()
            await held.release.wait()
            if request.transport is None or request.transport.is_closing():
                held.dropped = True  # its sender died meanwhile: it never reaches upstream
                return web.Response(status=502)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in {"host", *_HOP}}
        async with self._session.request(request.method, self._origin + request.path_qs,
                                         headers=headers, data=await request.read()) as reply:
            body = await reply.read()
            out = {k: v for k, v in reply.headers.items() if k.lower() not in _HOP}
            if "content-encoding" in {k.lower() for k in reply.headers}:
                out["Content-Encoding"] = reply.headers["Content-Encoding"]
            return web.Response(status=reply.status, body=body, headers=out)

    def hold_next_post(self) -> Held:
        """Hold the next chat.postMessage until `release` is set; drop it if its sender died."""
        self._held = Held()
        return self._held

    def between(self, start: float, end: float) -> int:
        return sum(1 for at, _, _ in self.calls if start <= at < end)

    def listings_since(self, start: float) -> int:
        """Cluster listings (one per watch sweep) that arrived at or after `start`."""
        return sum(1 for at, method, path in self.calls
                   if at >= start and method == "GET" and path.endswith("/clusters"))


@dataclass
class Figures:
    replicas: int
    logical: int  # posts the scenario must produce: notices, their DMs, cards, SSH details
    posts: int  # chat.postMessage calls Slack accepted
    duplicates: int  # accepted posts beyond the first of the same (channel, thread, text)
    missed: int  # logical posts never made
    provider_calls_per_sweep: float  # while quiet: all AI Reserve calls / poll intervals
    takeover_seconds: float | None  # kill -9 of the sweeping replica → another holds the lease
    reminders: int
    duplicated: list[str]  # what was posted twice, for the failure message


def _text(message: Any) -> str:
    return str(message.text) + str(message.blocks)


async def _sweeper(w: World) -> str | None:
    async with w.database() as db, db.transaction() as repos:
        return await repos.leases.holder("sweeps", now=wall_clock())


def _bot_of(bots: list[BotProcess], holder: str) -> BotProcess:
    pid = int(holder.rsplit(":", 2)[1])
    [bot] = [b for b in bots if b.running and b.pid == pid]
    return bot


async def run(tmp_path: Path, *, database_url: str | None, replicas: int = 3,
              hours: int = 4) -> Figures:
    """The whole scenario; returns what FakeSlack and the database saw."""
    async with world(tmp_path, database_url=database_url) as w, \
            CountingProxy(w.sim.base_url).running() as proxy, \
            CountingProxy(w.slack.api_url, delays=SLACK_LATENCY).running() as slack:
        env = {"AIRESERVE_API_URL": proxy.url, "SLACK_API_URL": slack.url + "/",
               "OUTBOX_CLAIM_SECONDS": "5"}
        bots = list(await asyncio.gather(*(w.bot(f"replica{n + 1}", env=env)
                                           for n in range(replicas))))

        def pick(n: int) -> BotProcess:
            alive = [b for b in bots if b.running]
            return alive[n % len(alive)]

        card = await w.request_launch(pick(0))
        await pick(1).requests.click(card, Action.APPROVE, user_id=BOB)
        await wait_for(w.sim.clusters, what="the cluster at AI Reserve")
        await w.advance(120)
        await wait_for(lambda: any("ssh -p" in _text(m) for m in w.slack.dms(ALICE)),
                       what="the SSH details")
        await wait_for(lambda: w.slack.messages(GENERAL), what="the progress message")

        def thread(containing: str) -> list[Any]:
            """Replies under the progress message(s): a second one would be a duplicate."""
            return [m for t in w.slack.messages(GENERAL) if not t.thread_ts
                    for m in w.slack.thread(GENERAL, t.ts)[1:] if containing in _text(m)]

        # Provider calls per sweep, while nothing changes.
        await wait_for(lambda: _sweeper(w), what="a sweeping replica")
        began = time.monotonic()
        await asyncio.sleep(QUIET_WINDOW)  # real time: counting what the replicas do in it
        per_sweep = proxy.between(began, began + QUIET_WINDOW) / (QUIET_WINDOW / POLL_SECONDS)

        # Degrade, recover (the button pressed on another replica).
        cluster_id = (await w.sim.clusters())[0]["id"]
        await w.sim.fail_node(cluster_id, rank=1)
        await w.advance(30)
        degraded = (await wait_for(lambda: thread("degraded"), what="the degraded notice"))[0]
        await pick(2).requests.click(degraded, Action.RECOVER, user_id=ALICE)
        await _advance_until(w, proxy, 15, "recovered")

        def reminder_dms() -> list[Any]:
            return [m for m in w.slack.dms(ALICE) if Action.KEEP_RUNNING in _text(m)]

        async def an_hour(n: int) -> None:
            seen = len(reminder_dms())
            await w.advance(3600)
            await wait_for(lambda: len(reminder_dms()) > seen, within=30,
                           what=f"reminder after hour {n}")

        for n in range(hours):
            await an_hour(n)

        takeover = None
        if replicas > 1:
            # kill -9 the sweeping replica while its reminder post is on the way to Slack (it
            # has claimed it; Slack never gets it): another replica takes the sweeps over and,
            # once the claim expires, posts that reminder.
            holder = await wait_for(lambda: _sweeper(w), what="a sweeping replica")
            killed = _bot_of(bots, holder)
            seen = len(reminder_dms())
            held = slack.hold_next_post()
            await w.advance(3600)
            await asyncio.wait_for(held.arrived.wait(), 30)
            assert await killed.kill() == -signal.SIGKILL
            began = time.monotonic()
            held.release.set()
            await wait_for(lambda: _new_sweeper(w, holder), within=30, what="a takeover")
            takeover = time.monotonic() - began
            await wait_for(lambda: len(reminder_dms()) > seen, within=30,
                           what="the reminder the killed replica had claimed")
            assert held.dropped, "the killed replica's post reached Slack"
            await killed.start()  # it comes back as one replica among others
            leader = await wait_for(lambda: _sweeper(w), what="a sweeping replica")
            successor = _bot_of(bots, leader)
            await successor.stop(signal.SIGTERM)  # a deploy
            await an_hour(hours + 1)

        [*_, shown] = [m for m in w.slack.messages(GENERAL) if Action.TERMINATE in _text(m)]
        await pick(0).requests.click(shown, Action.TERMINATE, user_id=ALICE)
        await _advance_until(w, proxy, 30, "receipt")
        await asyncio.sleep(3 * POLL_SECONDS)  # a straggler would post now (real time)
        return await _count(w, replicas=replicas, per_sweep=per_sweep, takeover=takeover,
                            thread_replies=thread(""),
                            reminders=len(reminder_dms()))


async def _advance_until(w: World, proxy: CountingProxy, seconds: float, kind: str) -> None:
    """Move time in steps until a `kind` notice is stored and everything is delivered. After
    each step: until that holds, or a whole sweep has run on the new time (the provider saw the
    listing after the first one that began after the step), then the next step."""
    async def delivered() -> bool:
        async with w.database() as db, db.transaction() as repos:
            kinds = {k for k, _ in (await repos.session.execute(_NOTICES)).all()}
        return kind in kinds and await _all_delivered(w)

    for _ in range(30):
        await w.advance(seconds)
        stepped = time.monotonic()

        async def settled(stepped: float = stepped) -> bool:
            return await delivered() or proxy.listings_since(stepped) >= 2

        await wait_for(settled, within=30, interval=0.1, what=f"a sweep after a step ({kind})")
        if await delivered():
            return
    raise AssertionError(f"no {kind} notice delivered")


async def _new_sweeper(w: World, old: str) -> bool:
    holder = await _sweeper(w)
    return holder is not None and holder != old


async def _all_delivered(w: World) -> bool:
    async with w.database() as db, db.transaction() as repos:
        found = await repos.session.execute(_UNDELIVERED)
        return found.scalar_one() == 0


async def _count(w: World, *, replicas: int, per_sweep: float, takeover: float | None,
                 thread_replies: list[Any], reminders: int) -> Figures:
    accepted = [c for c in w.slack.calls_to("chat.postMessage") if c.ok]
    keys = Counter((c.response.get("channel"), c.args.get("thread_ts"), c.args.get("text"))
                   for c in accepted)
    duplicated = [f"{n}× {text}" for (_, _, text), n in keys.items() if n > 1]
    async with w.database() as db, db.transaction() as repos:
        rows = (await repos.session.execute(_NOTICES)).all()
        undelivered = (await repos.session.execute(_UNDELIVERED)).scalar_one()
    kinds = Counter(kind for kind, _ in rows)
    in_thread = sum(n for kind, n in kinds.items() if kind != "reminder")
    distinct_thread = len({_text(m) for m in thread_replies})
    ssh = sum(1 for m in w.slack.dms(ALICE) if "ssh -p" in _text(m))
    cards = len(w.slack.messages(GENERAL)) + len(w.slack.messages("C0APPROVALS"))
    logical = len(rows) + 1 + 2  # the notices, the SSH details, the card and progress message
    expected_kinds = {"degraded", "recovery_started", "recovered", "reminder", "receipt"}
    missed = (undelivered + max(0, kinds["reminder"] - reminders)
              + max(0, in_thread - distinct_thread) + (ssh == 0) + max(0, 2 - cards)
              + len(expected_kinds - set(kinds)))
    return Figures(replicas=replicas, logical=logical, posts=len(accepted),
                   duplicates=sum(n - 1 for n in keys.values()), missed=missed,
                   provider_calls_per_sweep=per_sweep, takeover_seconds=takeover,
                   reminders=reminders, duplicated=duplicated)


_NOTICES = sa.text("SELECT kind, delivered_at FROM notices")
_UNDELIVERED = sa.text("SELECT (SELECT count(*) FROM notices WHERE delivered_at IS NULL)"
                    " + (SELECT count(*) FROM outbox WHERE delivered_at IS NULL)")
