"""A thousand clusters without a stall (issue 12): every figure against a baseline measured in
the same run, with the bot, the AI Reserve simulator and Slack each in a process of its own.

- start-up: `python -m bot serve` exec → first HTTP answer, vs a bare Bolt AsyncApp
  (benchmarks/barebolt.py) started the same way;
- sweep wall and CPU at 100 / 1,000 / 5,000 live clusters, read from the bot's own log line
  per sweep (the production scheduler, `POLL_INTERVAL_SECONDS`), vs a raw aiohttp client doing
  the same list calls (statuses that can bill, 200 a page) right after each sweep; and the
  provider calls each sweep made (from the bot's request log);
- ack p50/p99 of signed `/cluster list` bursts at concurrency 10 and 50 while the bot sweeps
  1,000 clusters, vs the bare Bolt app on the same signed requests;
- RSS of the bot process idle and after sweeping 1,000 / 5,000 clusters (and its peak);
- detection: a node fails at AI Reserve → Slack first shows it, at 1,000 clusters, once the bot
  has worked off the ack load: whatever a person sees first — a post, a thread reply, a DM or
  an edit naming the cluster (sixteen failures in 13 s are a storm: one digest, edited as it
  grows, speaks for the channel first; each cluster's own line goes last, paced).
  `SCALE_ONLY=detection` measures this alone (~1 min).

The clusters are seeded at the simulator (`POST /_sim/clusters/seed`) and recorded in the bot's
database already observed, as a bot that has watched them for a while has them: every sweep
measured is a quiet one unless a node was failed on purpose.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.report import Table, percentile
from benchmarks.world import (
    LISTENING,
    POLL_SECONDS,
    SWEPT,
    Child,
    World,
    child_env,
    open_world,
    rss_mib,
    signed,
)
from tests.storm import DIGEST

SIZES = (100, 1000, 5000)
SWEEPS = 3  # measured per size, after one warm-up sweep
STARTS = 5  # start-ups per program
BURST_EVERY = 0.25  # seconds between two bursts of signed slash commands
# Per (mix, program, concurrency, round): two poll intervals, so every window holds sweeps (a
# shorter one may or may not, and its p99 says more about luck than about the bot).
LOAD_SECONDS = 2.0 * POLL_SECONDS
ROUNDS = 3
CONCURRENCY = (10, 50)
# What the bursts ask: every command a `/cluster list` (the bot renders a page of 25 of the
# 1,000 clusters after each ack: ~200 lists/s at concurrency 50), or one in five.
MIXES = {"list": ("list",), "1 list : 4 help": ("list", "help", "help", "help", "help")}
FAILURES = 16  # nodes failed for the detection figure, one every FAIL_EVERY seconds
FAIL_EVERY = 0.8
DETECT_WITHIN = 12.0 * POLL_SECONDS  # after the last failure: later is "not shown"
# `SCALE_ONLY=detection python -m benchmarks scale`: only the detection figure (~1 min) —
# 1,000 clusters, two quiet sweeps (so the sweep holds pages read before), then the failures.
ONLY = ("detection",)
# Before the failures, the bot has done the work the ack load left it (every acked `/cluster
# list` is rendered and posted after its ack, a few at a time): two sweeps in a row whose
# process CPU is at most this many times a quiet sweep's. Within DRAIN_WITHIN s, or measured
# busy.
DRAINED = 2.0
DRAIN_WITHIN = 180.0


@dataclass
class Sweeps:
    n: int
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    raw_wall: list[float] = field(default_factory=list)
    raw_cpu: list[float] = field(default_factory=list)
    lists: list[int] = field(default_factory=list)
    gets: list[int] = field(default_factory=list)
    raw_calls: int = 0
    rss: tuple[float, float] = (0.0, 0.0)


async def _sweeps(w: World, n: int) -> Sweeps:
    """Wait for a warm-up sweep and SWEEPS more; after each, the raw client's listing."""
    assert w.bot is not None
    figures = Sweeps(n)
    offset = len(w.bot.text())
    for i in range(SWEEPS + 1):
        found = await w.bot.wait_for(SWEPT, offset=offset, within=POLL_SECONDS * 6)
        between = w.bot.text()[offset:found.start()]
        offset = found.end()
        if i == 0:
            continue  # warm-up
        figures.wall.append(float(found[2]))
        figures.cpu.append(float(found[3]))
        figures.lists.append(between.count("GET /clusters -> "))
        figures.gets.append(len(re.findall(r"GET /clusters/clu_\S+ -> ", between)))
        wall, cpu = time.perf_counter(), time.process_time()
        _, figures.raw_calls = await w.list_raw()
        figures.raw_wall.append(time.perf_counter() - wall)
        figures.raw_cpu.append(time.process_time() - cpu)
    figures.rss = rss_mib(w.bot.pid)
    return figures


async def _load(w: World, url: str, concurrency: int, texts: Sequence[str]) -> list[float]:
    """Bursts of `concurrency` signed `/cluster <text>` (cycling through `texts`) every
    BURST_EVERY s: each ack's time."""
    acks: list[float] = []
    refused = 0

    async def one() -> None:
        nonlocal refused
        w.counter += 1
        body, headers = signed(texts[w.counter % len(texts)], w.counter,
                                w.slack["inspect_url"])
        began = time.perf_counter()
        async with w.session.post(url, data=body, headers=headers) as r:
            await r.read()
            refused += r.status != 200
        acks.append(time.perf_counter() - began)

    loop = asyncio.get_running_loop()
    end = loop.time() + LOAD_SECONDS
    pending: set[asyncio.Task[None]] = set()
    while loop.time() < end:
        pending |= {asyncio.create_task(one()) for _ in range(concurrency)}
        await asyncio.sleep(BURST_EVERY)
        pending = {t for t in pending if not t.done()}
    await asyncio.gather(*pending)
    assert refused == 0, f"{refused} requests refused"
    return acks


@dataclass
class Detection:
    """When each failed node was first visible in Slack, and as what."""

    delays: list[float] = field(default_factory=list)  # of the clusters shown, in order failed
    shown_as: Counter[str] = field(default_factory=Counter)  # what showed each first
    missed: list[str] = field(default_factory=list)  # not shown within DETECT_WITHIN
    own: list[float] = field(default_factory=list)  # a post of its own (not the digest): after
    by_post_text: int = 0  # the measure before 3 Dec: a post naming it, within 4 polls
    drained: float | None = None  # how long the bot worked off the ack load first


def _shown_as(post: dict[str, str]) -> str:
    """What a person sees: a new post in a channel, a reply in a thread, a DM, or an edit of a
    message already there (a storm's digest grows by edits) — a digest named as one."""
    args = json.loads(post["text"])
    return ("digest " if DIGEST.search(post["text"]) else "") + (
        "edit" if post["method"] == "chat.update"
        else "DM" if str(args.get("channel", "")).startswith(("D", "U"))
        else "thread reply" if args.get("thread_ts") else "channel post")


async def _detection(w: World, clusters: Sequence[str]) -> Detection:
    """Fail node 1 of clusters one by one; for each, the time until Slack first shows it — a
    post, a thread reply, a DM or an edit (a storm's digest) that names the cluster — and until
    a post of its own names it (a storm's per-cluster lines go last)."""
    failed: dict[str, float] = {}
    url = f"{w.slack['inspect_url']}/posts"
    async with w.session.get(url) as r:
        since = len((await r.json())["posts"])
    for cluster_id in clusters:
        await w.sim.fail_node(cluster_id, 1)
        failed[cluster_id] = time.time()
        await asyncio.sleep(FAIL_EVERY * random.uniform(0.5, 1.5))
    seen: dict[str, tuple[float, str]] = {}
    own: dict[str, float] = {}
    by_post_text: set[str] = set()
    began, deadline = time.time(), time.perf_counter() + DETECT_WITHIN
    while len(own) < len(failed) and time.perf_counter() < deadline:
        async with w.session.get(url, params={"since": str(since)}) as r:
            posts = (await r.json())["posts"]
        since += len(posts)
        for post in posts:
            named = [c for c in failed if c in post["text"]]
            how = _shown_as(post) if named else ""
            for cluster_id in named:
                seen.setdefault(cluster_id, (post["t"], how))
                if post["method"] == "chat.postMessage" and post["t"] < began + 4 * POLL_SECONDS:
                    by_post_text.add(cluster_id)
            if len(named) == 1 and how in ("channel post", "thread reply"):
                own.setdefault(named[0], post["t"])
        await asyncio.sleep(0.1)
    found = Detection(by_post_text=len(by_post_text))
    for cluster_id, at in failed.items():
        if cluster_id in seen:
            found.delays.append(seen[cluster_id][0] - at)
            found.shown_as[seen[cluster_id][1]] += 1
        else:
            found.missed.append(cluster_id)
        if cluster_id in own:
            found.own.append(own[cluster_id] - at)
    return found


# What the bot's dependencies alone cost to import (no code of ours): the floor under its
# start-up on this machine.
DEPENDENCIES = ("slack_bolt.async_app, aiohttp.web, slack_sdk.web.async_client, "
                "sqlalchemy.ext.asyncio, aiosqlite, sqlmodel, pydantic_settings, "
                "apscheduler.schedulers.asyncio, yaml")


async def _startups(w: World, *, runs: int) -> tuple[list[float], list[float], list[float]]:
    """exec → first HTTP answer, alternately the bot and the bare Bolt app; and exec → exit
    of an interpreter importing the bot's dependencies."""
    bot: list[float] = []
    bare: list[float] = []
    floor: list[float] = []
    for i in range(runs):
        began = time.perf_counter()
        deps = await asyncio.create_subprocess_exec(
            sys.executable, "-c", f"import {DEPENDENCIES}", env=child_env(), cwd=w.tmp)
        assert await deps.wait() == 0
        floor.append(time.perf_counter() - began)
        for program, into in (("bot", bot), ("bare", bare)):
            argv = [sys.executable, "-m", "bot", "serve"] if program == "bot" else \
                [sys.executable, "-m", "benchmarks.barebolt"]
            child = Child(argv, w.bot_env(),
                          w.tmp / f"start-{program}-{i}.log", w.tmp)
            await child.start()
            url = (await child.wait_for(LISTENING))[1]
            async with w.session.post(f"{url}/slack/events", data=b"") as r:
                await r.read()
            into.append(time.perf_counter() - child.started)
            await child.stop()
    return bot, bare, floor


def _spread(samples: Sequence[float], scale: float = 1.0, unit: str = "") -> str:
    """median [min–max] (n)."""
    return (f"{statistics.median(samples) * scale:.3g}{unit} "
            f"[{min(samples) * scale:.3g}–{max(samples) * scale:.3g}] n={len(samples)}")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "n/a"


async def _drained(w: World, quiet_cpu: float) -> float:
    """Seconds until two sweeps in a row cost at most DRAINED × `quiet_cpu` of CPU (the bot's
    process, all threads, over the sweep), at most DRAIN_WITHIN."""
    assert w.bot is not None
    began = time.perf_counter()
    offset, calm = len(w.bot.text()), 0
    while calm < 2 and time.perf_counter() - began < DRAIN_WITHIN:
        found = await w.bot.wait_for(SWEPT, offset=offset, within=DRAIN_WITHIN)
        offset = found.end()
        calm = calm + 1 if float(found[3]) <= DRAINED * quiet_cpu else 0
    return time.perf_counter() - began


async def _failing(w: World, quiet_cpu: float | None = None) -> Detection:
    """FAILURES clusters of those live, chosen at random, fail a node each (`_detection`) —
    once the bot is done with earlier work, if a quiet sweep's CPU is given."""
    drained = await _drained(w, quiet_cpu) if quiet_cpu is not None else None
    wires, _ = await w.list_raw()
    found = await _detection(w, random.sample([c["id"] for c in wires], FAILURES))
    found.drained = drained
    return found


async def run() -> list[Table]:
    only = os.environ.get("SCALE_ONLY", "")
    if only and only not in ONLY:
        raise SystemExit(f"SCALE_ONLY={only!r}: choose from {', '.join(ONLY)}, or leave it "
                         "unset for every figure")
    random.seed(12)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        async with AsyncExitStack() as stack:
            w = await open_world(stack, tmp, f"sqlite:///{tmp / 'bot.db'}")
            if only == "detection":
                await w.grow_to(1000)
                await w.start_bot()
                assert w.bot is not None
                offset = 0
                for _ in range(2):  # the second holds the pages the first read
                    offset = (await w.bot.wait_for(SWEPT, offset=offset)).end()
                return [_detect_table(await _failing(w))]

            first = time.perf_counter()
            await w.start_bot()  # the first start migrates a new database
            first = time.perf_counter() - first
            await w.stop_bot()
            starts = await _startups(w, runs=STARTS)

            await w.start_bot()
            assert w.bot is not None
            await w.bot.wait_for(SWEPT)
            idle = rss_mib(w.bot.pid)
            await w.stop_bot()

            sweeps: list[Sweeps] = []
            acks: dict[tuple[str, str, int], list[float]] = {}
            p99s: dict[tuple[str, str, int], list[float]] = {}
            detection = Detection()
            for n in SIZES:
                await w.grow_to(n)
                url = await w.start_bot()
                sweeps.append(await _sweeps(w, n))
                if n == 1000:
                    bare = Child([sys.executable, "-m", "benchmarks.barebolt"], w.bot_env(),
                                 tmp / "bare.log", tmp)
                    await bare.start()
                    stack.push_async_callback(bare.stop)
                    bare_url = (await bare.wait_for(LISTENING))[1]
                    for _ in range(ROUNDS):
                        for mix, texts in MIXES.items():
                            for c in CONCURRENCY:
                                for name, target in (("bot", url), ("bare Bolt", bare_url)):
                                    got = await _load(w, f"{target}/slack/events", c, texts)
                                    key = (mix, name, c)
                                    acks.setdefault(key, []).extend(got)
                                    p99s.setdefault(key, []).append(percentile(got, 99))
                    await bare.stop()
                    detection = await _failing(w, statistics.median(sweeps[-1].cpu))
                await w.stop_bot()
    return _tables(first=first, starts=starts, idle=idle, sweeps=sweeps, acks=acks,
                   p99s=p99s, detection=detection)


def _tables(*, first: float, starts: tuple[list[float], list[float], list[float]],
            idle: tuple[float, float], sweeps: list[Sweeps],
            acks: dict[tuple[str, str, int], list[float]],
            p99s: dict[tuple[str, str, int], list[float]],
            detection: Detection) -> list[Table]:
    bot_s, bare_s, floor = starts
    start = Table("12a. Start-up: exec → first HTTP answer (s; median [min–max] n)",
                  ["program", "start-up", "vs bare Bolt"])
    start.rows += [["bot (`python -m bot serve`)", _spread(bot_s, unit=" s"),
                    _ratio(statistics.median(bot_s), statistics.median(bare_s))],
                   ["bare Bolt AsyncApp", _spread(bare_s, unit=" s"), "1.00×"],
                   ["importing the bot's dependencies", _spread(floor, unit=" s"),
                    _ratio(statistics.median(floor), statistics.median(bare_s))]]
    start.notes.append(f"dependencies: {DEPENDENCIES} (exec → exit)")
    start.notes.append(f"the bot's very first start (migrating a new SQLite database): "
                       f"{first:.2f} s; the runs above reopen a database at head")

    sweep = Table(
        f"12b. Quiet sweep, production path (bot log per sweep; median [min–max] of {SWEEPS} "
        "after a warm-up) vs a raw aiohttp client listing the same",
        ["clusters", "sweep wall", "sweep CPU", "raw wall", "raw CPU", "wall ×raw",
         "CPU ×raw", "list calls", "GETs", "RSS MiB (peak)"])
    for f in sweeps:
        sweep.rows.append([
            str(f.n), _spread(f.wall, 1000, " ms"), _spread(f.cpu, 1000, " ms"),
            _spread(f.raw_wall, 1000, " ms"), _spread(f.raw_cpu, 1000, " ms"),
            _ratio(statistics.median(f.wall), statistics.median(f.raw_wall)),
            _ratio(statistics.median(f.cpu), statistics.median(f.raw_cpu)),
            f"{max(f.lists)} (raw {f.raw_calls})", str(max(f.gets)),
            f"{f.rss[0]:.0f} ({f.rss[1]:.0f})"])
    sweep.notes.append(f"RSS idle (no cluster, after one sweep): {idle[0]:.0f} MiB "
                       f"(peak {idle[1]:.0f})")
    sweep.notes.append("sweep CPU is the bot process's (all threads) from the sweep's start to "
                       "its end; raw CPU is this process's for the same list calls + JSON")

    ack = Table(
        f"12c. Ack of signed `/cluster …` bursts every {BURST_EVERY} s, while the bot sweeps "
        f"1,000 clusters every {POLL_SECONDS} s (ms; {ROUNDS} rounds of {LOAD_SECONDS:g} s)",
        ["commands", "program", "concurrency", "acks", "p50", "p99", "p99 per round", "max",
         "p99 vs bare", "per round"])
    for mix in MIXES:
        for c in CONCURRENCY:
            for name in ("bot", "bare Bolt"):
                got = acks[(mix, name, c)]
                bare = acks[(mix, "bare Bolt", c)]
                ack.rows.append([
                    mix, name, str(c), str(len(got)), f"{percentile(got, 50) * 1000:.1f}",
                    f"{percentile(got, 99) * 1000:.1f}",
                    "/".join(f"{p * 1000:.0f}" for p in p99s[(mix, name, c)]),
                    f"{max(got) * 1000:.1f}", _ratio(percentile(got, 99), percentile(bare, 99)),
                    "/".join(_ratio(a, b).rstrip("×") for a, b in zip(
                        p99s[(mix, name, c)], p99s[(mix, "bare Bolt", c)], strict=True))])

    return [start, sweep, ack, _detect_table(detection)]


def _detect_table(found: Detection) -> Table:
    detect = Table(f"12d. Detection at 1,000 clusters, {POLL_SECONDS} s poll: node fails at AI "
                   "Reserve → Slack first shows it: a post, thread reply, DM or edit naming the "
                   "cluster (s)",
                   ["failures", "shown", "p50", "p95", "max", "p95 vs poll", "first shown as"])
    d = found.delays
    detect.rows.append([
        str(len(d) + len(found.missed)), str(len(d)), f"{percentile(d, 50):.2f}",
        f"{percentile(d, 95):.2f}", f"{max(d, default=math.nan):.2f}",
        _ratio(percentile(d, 95), POLL_SECONDS),
        ", ".join(f"{what} {n}" for what, n in found.shown_as.most_common())])
    n = len(d) + len(found.missed)
    if found.drained is not None:
        detect.notes.append(f"after the ack load, the bot first worked off its backlog: "
                            f"{found.drained:.0f} s until two sweeps in a row cost <= "
                            f"{DRAINED:g}× a quiet sweep's CPU")
    detect.notes.append(f"failures spread over {FAILURES * FAIL_EVERY:.0f} s, not aligned with "
                        "the poll; with this few, p95 is the largest sample")
    if found.missed:
        detect.notes.append(f"NOT shown within {DETECT_WITHIN:g} s of the last failure: "
                            + ", ".join(found.missed))
    detect.notes.append(f"a post of its own (its notice or card; a storm's per-cluster lines go "
                        f"last): {len(found.own)} of {n}, p50 {percentile(found.own, 50):.2f} s, "
                        f"max {max(found.own, default=math.nan):.2f} s")
    detect.notes.append(f"the measure before 3 Dec (a post naming it within {4 * POLL_SECONDS} s "
                        f"of the last failure; blind to the digest's edits): "
                        f"{found.by_post_text} of {n}")
    return detect
