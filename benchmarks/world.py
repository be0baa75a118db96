"""The processes of the scale benchmark (benchmarks/scale.py): the bot and the bare Bolt app as
children whose log we read as it grows, the simulator (tests/procs/), FakeSlack
(benchmarks/slackproc.py), and the database the bot's clusters are recorded in."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import signal
import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import sqlalchemy as sa

from bot.reserve.schemas import Cluster
from bot.services.observing import observe, record_from_wire
from bot.slack.ids import Action, ClusterRef
from storage.db import Database
from storage.rows import row_values
from storage.tables.clusters import CLUSTERS
from tests.e2e.harness import ALICE, GENERAL, SECRET
from tests.procs import REPO, SimProcess

POLL_SECONDS = 5

LISTED = "provisioning,running,degraded,terminating"
LISTENING = re.compile(r"listening for Slack on .*?(http://\S+)/slack/events")
SWEPT = re.compile(r"swept (\d+) live clusters in ([\d.]+) s wall, ([\d.]+) s CPU")


def child_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    return {k: os.environ[k] for k in keep if k in os.environ} | {
        "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


class Child:
    """A child process whose output goes to a file we read as it grows."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, cwd: Path) -> None:
        self.argv, self.env, self.log, self.cwd = argv, env, log, cwd
        self.proc: asyncio.subprocess.Process | None = None
        self.started = 0.0

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.started = time.perf_counter()
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, cwd=self.cwd, env=self.env, stdin=asyncio.subprocess.DEVNULL,
                stdout=out, stderr=asyncio.subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_for(self, pattern: re.Pattern[str], *, offset: int = 0,
                       within: float = 60.0) -> re.Match[str]:
        deadline = time.perf_counter() + within
        while True:
            found = pattern.search(self.text(), offset)
            if found:
                return found
            assert self.proc is not None and self.proc.returncode is None, self.text()[-2000:]
            assert time.perf_counter() < deadline, f"no {pattern.pattern!r}: {self.text()[-2000:]}"
            await asyncio.sleep(0.005)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def cpu_seconds(pid: int) -> float:
    """The CPU `pid` has used so far (user + system, all threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of `pid` in MiB: now, and the peak."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def signed(text: str, n: int, sink: str) -> tuple[bytes, dict[str, str]]:
    """A slash command exactly as Slack signs it (v0 HMAC-SHA256 of `v0:ts:body`)."""
    body = urlencode({
        "token": "legacy", "team_id": "T0001", "team_domain": "devslack",
        "channel_id": GENERAL, "channel_name": "general", "user_id": ALICE,
        "user_name": "alice", "command": "/cluster", "text": text, "api_app_id": "A0001",
        "is_enterprise_install": "false", "response_url": f"{sink}/sink/{n}",
        "trigger_id": f"{n}.bench",
    }).encode()
    return _signed(body)


def signed_click(cluster_id: str, n: int, sink: str) -> tuple[bytes, dict[str, str]]:
    """A click on a cluster's Status button, signed as Slack signs an interactive payload."""
    payload = {
        "type": "block_actions", "api_app_id": "A0001", "token": "legacy",
        "user": {"id": ALICE, "username": "alice", "name": "alice", "team_id": "T0001"},
        "team": {"id": "T0001", "domain": "devslack"}, "trigger_id": f"{n}.bench",
        "container": {"type": "message", "message_ts": "1.000001", "channel_id": GENERAL},
        "channel": {"id": GENERAL, "name": "general"}, "response_url": f"{sink}/sink/{n}",
        "actions": [{"type": "button", "action_id": Action.CLUSTER_STATUS, "block_id": "b",
                     "value": ClusterRef(cluster_id=cluster_id).pack(),
                     "action_ts": f"{time.time():.6f}"}],
    }
    return _signed(urlencode({"payload": json.dumps(payload)}).encode())


def _signed(body: bytes) -> tuple[bytes, dict[str, str]]:
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return body, {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}",
                  "Content-Type": "application/x-www-form-urlencoded"}


@dataclass
class World:
    tmp: Path
    session: aiohttp.ClientSession
    sim: SimProcess
    slack: dict[str, str]
    database_url: str
    bot: Child | None = None
    seeded: int = 0
    counter: int = 0
    log_level: str = "DEBUG"  # the scale benchmark reads each sweep's DEBUG line

    def bot_env(self) -> dict[str, str]:
        return child_env() | {
            "SLACK_BOT_TOKEN": self.slack["bot_token"], "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": self.slack["api_url"], "DATABASE_URL": self.database_url,
            "AIRESERVE_API_URL": self.sim.base_url, "AIRESERVE_API_KEY": self.sim.api_key,
            "APPROVALS_CHANNEL": "C0APPROVALS", "APPROVERS": "U0BOB,U0CAROL",
            "POLL_INTERVAL_SECONDS": str(POLL_SECONDS), "PORT": "0", "INTERNAL_PORT": "0",
            "LOG_LEVEL": self.log_level}

    async def start_bot(self) -> str:
        self.bot = Child([sys.executable, "-m", "bot", "serve"], self.bot_env(),
                         self.tmp / "bot.log", self.tmp)
        offset = len(self.bot.text()) if self.bot.log.exists() else 0
        await self.bot.start()
        return (await self.bot.wait_for(LISTENING, offset=offset))[1]

    async def stop_bot(self) -> None:
        if self.bot is not None:
            await self.bot.stop()
            self.bot = None

    async def list_raw(self, status: str | None = LISTED) -> tuple[list[dict[str, Any]], int]:
        """Every listed cluster through a raw aiohttp client: (clusters, list calls)."""
        found: list[dict[str, Any]] = []
        params = {"limit": "200"} | ({"status": status} if status else {})
        calls = 0
        while True:
            async with self.session.get(f"{self.sim.base_url}/clusters", params=params,
                                        headers={"Authorization": f"Bearer {self.sim.api_key}"}
                                        ) as r:
                page = await r.json()
            calls += 1
            found += page["data"]
            if not page.get("nextCursor"):
                return found, calls
            params["cursor"] = page["nextCursor"]

    async def grow_to(self, n: int) -> None:
        """`n` running clusters at AI Reserve, each recorded and observed in the database."""
        await self.sim.admin("clusters/seed", {"count": n - self.seeded})
        await self.sim.advance(120)  # the fast profile boots a node in seconds
        wires = [Cluster.model_validate(c) for c in (await self.list_raw(None))[0]]
        db = Database(self.database_url)
        try:
            await db.migrate()
            async with db.transaction() as repos:
                known = await repos.clusters.ids([w.id for w in wires])
            now = max(w.created_at for w in wires)
            rows = [row_values(record_from_wire(
                w, owner_id=ALICE, channel_id=GENERAL, request_id=None,
                accelerator_name="NVIDIA H100 SXM 80GB", now=now).model_copy(
                    update={"observed": observe(w), "connection_sent_at": now}))
                for w in wires if w.id not in known]
            for start in range(0, len(rows), 500):
                async with db.transaction() as repos:
                    await repos.session.execute(sa.insert(CLUSTERS), rows[start:start + 500])
        finally:
            await db.dispose()
        self.seeded = n


async def open_world(stack: AsyncExitStack, tmp: Path, database_url: str,
                     log_level: str = "DEBUG") -> World:
    """FakeSlack and the simulator (its account funded) in processes of their own, a session
    without a connection limit, and a World whose bot, like the rest, stops with `stack`."""
    slack_child = Child([sys.executable, "-m", "benchmarks.slackproc"], child_env(),
                        tmp / "slack.log", tmp)
    await slack_child.start()
    stack.push_async_callback(slack_child.stop)
    slack = json.loads((await slack_child.wait_for(re.compile(r"\{.*\}")))[0])
    sim = SimProcess(tmp, profile="fast")
    stack.push_async_callback(sim.stop)
    await sim.start()
    await sim.admin("account", {"balanceCents": 10**12})
    session = await stack.enter_async_context(aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0)))
    w = World(tmp=tmp, session=session, sim=sim, slack=slack, database_url=database_url,
              log_level=log_level)
    stack.push_async_callback(w.stop_bot)
    return w
