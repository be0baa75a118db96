"""Real processes for tests: the AI Reserve simulator and bots as subprocesses, FakeSlack in here.

    async with procs.world(tmp_path, database_url=url) as w:   # simulator + FakeSlack, no bot yet
        bot = await w.bot()                  # `python -m bot serve`; returns once it serves HTTP
        reply = await bot.requests.slash(text="quote h100x8 nodes=2", user_id=ALICE,
                                         channel_id=GENERAL)      # signed exactly as Slack does
        await w.sim.fault("DELETE /v1/clusters/{id}", status=500, count=3)
        await w.advance(60)                  # the simulator's virtual clock AND every bot's clock
        msg = await wait_for(lambda: w.slack.dms(ALICE), what="a DM to alice")
        rc = await bot.stop(signal.SIGTERM)  # signal, wait (bounded) and return the exit code
        await bot.start()                    # the same bot again: same env, same database
        bot.logs()                           # everything this bot printed, all its runs

- `world(tmp_path, database_url=None, profile="fast")`: the simulator (`python -m bot simulator
  --port 0 --virtual-clock --start-at now`, its URL read from its banner) and a FakeSlack on
  127.0.0.1:0 recording every Web API call (`w.slack`: `messages`, `dms`, `ephemerals`,
  `calls_to`, `fail_next` …). `database_url` defaults to a SQLite file in `tmp_path`; pass the
  `pg_url` fixture's URL for the throwaway PostgreSQL. On exit every bot still running is
  SIGKILLed, the simulator stopped, and FakeSlack must have seen no protocol violation.
- `w.bot(name="bot", env=None, policy=None)` starts a bot (several may share the world: replicas).
  Its env: FakeSlack, the simulator, the database, APPROVALS_CHANNEL/APPROVERS (bob, carol),
  POLL_INTERVAL_SECONDS=1, PORT=0 and INTERNAL_PORT=0 (the bound URLs are read from its log),
  CLOCK_OFFSET_FILE;
  `env` adds or overrides (a value None removes). The process runs with cwd=`tmp_path` (no
  stray `.env`) and PYTHONPATH=this repository, so the worktree's code is what runs.
- `BotProcess`: `url`, `internal_url`, `requests` (SlackRequests on this bot), `pid`,
  `running`, `get(path, public=False)` → (status, body) from the internal port (or the
  public), `signal(sig)`, `wait(within)` → rc, `stop(sig, within)` → rc, `kill()` (SIGKILL +
  wait), `start()` (again, after an exit), `logs()`, `wait_for_log(text)`.
- `SimProcess` (`w.sim`): `base_url`, `api_key`, `admin(path, body, method)` on `/_sim`,
  `advance(seconds)`, `fault(route, status=…, count=…, delay_seconds=…, retry_after_seconds=…)`,
  `clear_faults()`, `fail_node(cluster_id, rank, mode)`, `clusters()` (the provider's view).
- `w.advance(seconds)`: moves the simulator's virtual clock and the offset every bot adds to
  its wall clock, so quotes expire and reminders come due without waiting.
- `w.request_launch(bot, text=…, user=ALICE)`: quote, Request launch, submit → the approval card.
- `w.database()`: a `storage.db.Database` on the bots' database, to read rows (dispose is done).
- `wait_for(check, within=…, what=…)`: poll `check` (sync or async) until it returns something
  truthy, which it returns; AssertionError naming `what` at the deadline. Never sleep instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import signal as signals
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from bot.slack.ids import Action
from devslack.models import DEFAULT_USERS, Message, SlackUser
from devslack.requests import SlackRequests
from devslack.webapi import FakeSlack
from storage.db import Database
from tests.e2e.harness import (
    ALICE,
    APPROVALS,
    BOB,
    CAROL,
    DAVE,
    GENERAL,
    LEADS,
    SECRET,
    launch_without_ssh,
)

__all__ = ["ALICE", "APPROVALS", "BOB", "CAROL", "DAVE", "GENERAL", "SECRET", "BotProcess",
           "SimProcess", "World", "wait_for", "world"]

REPO = Path(__file__).resolve().parent.parent
API_KEY = "test-key"
START_TIMEOUT = 60.0  # a cold interpreter importing Bolt + SQLAlchemy on a busy 2-core machine
STOP_TIMEOUT = 30.0
_LISTENING = re.compile(r"listening for Slack on .*?(http://\S+)/slack/events")
_INTERNAL = re.compile(r"health and metrics on \S+ \(this host: (http://\S+)/readyz\)")
_SIM_BANNER = re.compile(r"listening on (http://\S+) .* controls at (http://\S+) with")
T = TypeVar("T")
# Whether the running test may start real processes: tests/conftest.py sets it for each test, true
# only for a `boundary` one (`make test-boundary`: tests/conftest.py's BOUNDARIES), so that none
# hides among the in-process ones of `make test`. True outside pytest (the benchmarks use this
# module too).
STARTS_PROCESSES = True


async def wait_for(check: Callable[[], T | Awaitable[T]], *, within: float = 20.0,
                   interval: float = 0.05, what: str = "the condition") -> T:
    """Poll `check` until it returns something truthy (returned); fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline, began = loop.time() + within, datetime.now()
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:  # from when to when: to read the processes' logs against
            raise AssertionError(f"timed out after {within:.0f} s waiting for {what} "
                                 f"({_hms(began)} to {_hms(datetime.now())})")
        await asyncio.sleep(interval)


def _hms(at: datetime) -> str:
    """`18:55:40.361` in local time, as the processes' log lines say it."""
    at = at.astimezone()
    return f"{at:%H:%M:%S}.{at.microsecond // 1000:03d}"


def _base_env() -> dict[str, str]:
    """What any child needs from ours, and nothing the bot would read as a setting."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PG_BINDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class _Proc:
    """One child process at a time, its output appended to one log file."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: Path
    proc: asyncio.subprocess.Process | None = None

    async def spawn(self) -> None:
        assert self.proc is None or self.proc.returncode is not None, "already running"
        assert STARTS_PROCESSES, ("this test starts real processes: mark it @pytest.mark.procs "
                                  "(tests/conftest.py)")
        with self.log_path.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, cwd=self.cwd, env=self.env, stdin=asyncio.subprocess.DEVNULL,
                stdout=out, stderr=asyncio.subprocess.STDOUT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    async def wait(self, within: float = STOP_TIMEOUT) -> int:
        """The exit code (negative: killed by that signal); SIGKILL + AssertionError on timeout."""
        assert self.proc is not None, "never started"
        try:
            return await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"{self.argv[2:4]} did not exit within {within} s; "
                                 f"log tail:\n{self.logs()[-3000:]}") from None

    async def wait_for_log(self, pattern: re.Pattern[str], *, offset: int = 0,
                           within: float = START_TIMEOUT) -> re.Match[str]:
        def seen() -> re.Match[str] | None:
            if not self.running:
                code = self.proc and self.proc.returncode
                raise AssertionError(f"{self.argv[2:4]} exited ({code}) before serving; "
                                     f"log:\n{self.logs()[-3000:]}")
            return pattern.search(self.logs(), offset)
        return await wait_for(seen, within=within, what=f"{pattern.pattern!r} in the log")


class SimProcess:
    """`python -m bot simulator` on a virtual clock that starts at the real now."""

    def __init__(self, directory: Path, *, profile: str = "fast") -> None:
        self._proc = _Proc(
            argv=[sys.executable, "-m", "bot", "simulator", "--host", "127.0.0.1", "--port",
                  "0", "--virtual-clock", "--start-at", "now", "--profile", profile],
            env=_base_env(), log_path=directory / "simulator.log", cwd=directory)
        self.base_url = ""
        self.admin_url = ""
        self.api_key = API_KEY
        self._session: aiohttp.ClientSession | None = None

    async def start(self, *, port: int = 0) -> None:
        """Start it (`port`: again where it was, after a `stop()`: the bots' URL still holds;
        its state starts afresh)."""
        self._proc.argv[self._proc.argv.index("--port") + 1] = str(port)
        offset = len(self._proc.logs())
        await self._proc.spawn()
        match = await self._proc.wait_for_log(_SIM_BANNER, offset=offset)
        self.base_url, self.admin_url = match[1], match[2]
        self._session = aiohttp.ClientSession()

    @property
    def port(self) -> int:
        return int(self.base_url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._proc.signal(signals.SIGTERM)
        if self._proc.proc is not None:
            await self._proc.wait()

    def logs(self) -> str:
        return self._proc.logs()

    async def admin(self, path: str, body: Mapping[str, Any] | None = None, *,
                    method: str = "POST") -> Any:
        """A `/_sim/<path>` control call; fails the test on a non-2xx answer."""
        assert self._session is not None
        async with self._session.request(method, f"{self.admin_url}/{path}",
                                          json=None if body is None else dict(body),
                                          headers={"X-Sim-Admin": "1"}) as response:
            text = await response.text()
            assert response.status < 300, f"/_sim/{path} → {response.status}: {text}"
            return json.loads(text) if text else None

    async def advance(self, seconds: float) -> Any:
        return await self.admin("clock/advance", {"seconds": float(seconds)})

    async def fault(self, route: str, *, status: int | None = None, count: int = 1,
                    delay_seconds: float | None = None,
                    retry_after_seconds: int | None = None) -> Any:
        """Arm a fault (`route` like "DELETE /v1/clusters/{id}"); see simulator/faults.py."""
        body: dict[str, Any] = {"route": route, "count": count}
        if status is not None:
            body["status"] = status
        if delay_seconds is not None:
            body["delaySeconds"] = float(delay_seconds)
        if retry_after_seconds is not None:
            body["retryAfterSeconds"] = retry_after_seconds
        return await self.admin("faults", body)

    async def faults(self) -> list[dict[str, Any]]:
        """The armed faults (a rule disappears once its `count` is used up)."""
        found: list[dict[str, Any]] = (await self.admin("faults", method="GET"))["data"]
        return found

    async def clear_faults(self) -> None:
        await self.admin("faults", method="DELETE")

    async def fail_node(self, cluster_id: str, rank: int = 1, mode: str = "unhealthy") -> Any:
        return await self.admin(f"clusters/{cluster_id}/nodes/{rank}/fail", {"mode": mode})

    async def clusters(self) -> list[dict[str, Any]]:
        """Every cluster the provider lists (wire JSON), newest first; faults apply."""
        assert self._session is not None
        found: list[dict[str, Any]] = []
        params = {"limit": "200"}
        while True:
            async with self._session.get(f"{self.base_url}/clusters", params=params,
                                         headers={"Authorization": f"Bearer {API_KEY}"}) as r:
                assert r.status == 200, await r.text()
                page = await r.json()
            found += page["data"]
            if not page.get("nextCursor"):
                return found
            params["cursor"] = page["nextCursor"]


class BotProcess:
    """`python -m bot serve` against the world's FakeSlack, simulator and database."""

    def __init__(self, *, name: str, env: dict[str, str], directory: Path,
                 slack: FakeSlack, argv: list[str] | None = None) -> None:
        self.name = name
        self.env = env
        self._slack = slack
        # `argv`: another way to start the same bot (tests/test_image.py: the container image)
        self._proc = _Proc(argv=argv or [sys.executable, "-m", "bot", "serve"], env=env,
                           log_path=directory / f"{name}.log", cwd=directory)
        self.url = ""  # the public port: Slack's requests
        self.internal_url = ""  # the internal port: /healthz, /readyz, /metrics
        self._requests: SlackRequests | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def pid(self) -> int:
        assert self._proc.proc is not None
        return self._proc.proc.pid

    @property
    def running(self) -> bool:
        return self._proc.running

    @property
    def returncode(self) -> int | None:
        return None if self._proc.proc is None else self._proc.proc.returncode

    async def start(self, *, wait: bool = True) -> None:
        """Spawn the bot; with `wait`, return once it serves HTTP (its URL read from its log)."""
        offset = len(self._proc.logs())
        await self._proc.spawn()
        if wait:
            await self.wait_until_serving(offset=offset)

    async def wait_until_serving(self, *, offset: int = 0,
                                 within: float = START_TIMEOUT) -> None:
        match = await self._proc.wait_for_log(_LISTENING, offset=offset, within=within)
        self.url = match[1]
        internal = _INTERNAL.search(self.logs(), offset)
        assert internal is not None, "the listening line names the internal port"
        self.internal_url = internal[1]
        if self._requests is not None:
            await self._requests.aclose()
        self._requests = SlackRequests(events_url=f"{self.url}/slack/events",
                                      signing_secret=SECRET, slack=self._slack)

    @property
    def requests(self) -> SlackRequests:
        """Signed Slack requests to this bot's `/slack/events` (its latest run)."""
        assert self._requests is not None, "the bot has not served yet"
        return self._requests

    def logs(self) -> str:
        return self._proc.logs()

    async def wait_for_log(self, text: str, *, within: float = 20.0) -> None:
        await wait_for(lambda: text in self.logs(), within=within, what=f"{text!r} in "
                       f"{self.name}'s log")

    def signal(self, sig: int) -> None:
        self._proc.signal(sig)

    async def wait(self, within: float = STOP_TIMEOUT) -> int:
        return await self._proc.wait(within)

    async def stop(self, sig: int = signals.SIGTERM, *, within: float = STOP_TIMEOUT) -> int:
        """Send `sig` and wait for the exit; returns the exit code (-9: SIGKILLed)."""
        self.signal(sig)
        return await self.wait(within)

    async def kill(self) -> int:
        return await self.stop(signals.SIGKILL)

    async def get(self, path: str, *, public: bool = False) -> tuple[int, Any]:
        """GET `path` on the bot's internal port (health, metrics), or with `public` on the
        port Slack reaches: (status, parsed JSON or text)."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        async with self._session.get(f"{self.url if public else self.internal_url}{path}"
                                     ) as response:
            text = await response.text()
            try:
                return response.status, json.loads(text)
            except ValueError:
                return response.status, text

    async def close(self) -> None:
        if self.running:
            await self.kill()
        if self._requests is not None:
            await self._requests.aclose()
        if self._session is not None:
            await self._session.close()


@dataclass
class World:
    """The simulator, FakeSlack, a database and the bots started in it."""

    directory: Path
    database_url: str
    sim: SimProcess
    slack: FakeSlack
    bots: list[BotProcess] = field(default_factory=list)
    advanced: float = 0.0

    @property
    def clock_file(self) -> Path:
        return self.directory / "clock-offset"

    async def bot(self, name: str | None = None, *, env: Mapping[str, str | None] | None = None,
                  policy: str | None = None, wait: bool = True) -> BotProcess:
        """Start a bot (one more replica if others run); returns once it serves (`wait`)."""
        name = name or f"bot{len(self.bots) + 1}"
        full = _base_env() | {
            "SLACK_BOT_TOKEN": self.slack.bot_token,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": self.slack.api_url,
            "DATABASE_URL": self.database_url,
            "AIRESERVE_API_URL": self.sim.base_url,
            "AIRESERVE_API_KEY": self.sim.api_key,
            "APPROVALS_CHANNEL": APPROVALS,
            "APPROVERS": f"{BOB},{CAROL}",
            "POLL_INTERVAL_SECONDS": "1",
            "PORT": "0",
            "INTERNAL_PORT": "0",
            "LOG_LEVEL": os.environ.get("PROCS_LOG_LEVEL", "INFO"),  # DEBUG: each AI Reserve call
            "CLOCK_OFFSET_FILE": str(self.clock_file),
            "LISTENER_DRAIN_SECONDS": "0",  # a test that drains says how long
        }
        if policy is not None:
            path = self.directory / f"{name}-policy.yaml"
            path.write_text(policy)
            full["POLICY_FILE"] = str(path)
        for key, value in (env or {}).items():
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        bot = BotProcess(name=name, env=full, directory=self.directory, slack=self.slack)
        self.bots.append(bot)
        await bot.start(wait=wait)
        return bot

    async def advance(self, seconds: float) -> None:
        """Time passes: on the simulator's virtual clock and on every bot's clock."""
        await self.sim.advance(seconds)
        self.advanced += seconds
        tmp = self.clock_file.with_suffix(".tmp")
        tmp.write_text(repr(self.advanced))
        tmp.replace(self.clock_file)  # atomic: a bot never reads half a number

    def text_of(self, message: Message) -> str:
        return message.text + json.dumps(message.blocks)

    async def request_launch(self, bot: BotProcess, *, text: str = "quote h100x8 nodes=2",
                             user: str = ALICE) -> Message:
        """Quote, press Request launch and submit the modal as `user`; returns the approval
        card (posted in APPROVALS). Click it with `bot.requests.click(card, Action.APPROVE,
        user_id=BOB)`."""
        cards = len(self.slack.messages(APPROVALS))
        await bot.requests.slash(text=text, user_id=user, channel_id=GENERAL)
        quote = await wait_for(lambda: [m for m in self.slack.ephemerals(user)
                                        if Action.QUOTE_REQUEST_LAUNCH in self.text_of(m)],
                               what="the quote")
        await bot.requests.click(quote[-1], Action.QUOTE_REQUEST_LAUNCH, user_id=user)
        modal = await wait_for(lambda: self.slack.last_view(user), what="the request modal")
        reply = await bot.requests.submit_view(modal, user_id=user, values=launch_without_ssh())
        assert reply.status == 200 and not reply.body, reply.body
        found = await wait_for(lambda: self.slack.messages(APPROVALS)[cards:],
                               what="the approval card")
        return found[-1]

    @asynccontextmanager
    async def database(self) -> AsyncIterator[Database]:
        """The bots' database, to read (a bot migrates it when it starts)."""
        db = Database(self.database_url)
        try:
            yield db
        finally:
            await db.dispose()


@asynccontextmanager
async def world(tmp_path: Path, *, database_url: str | None = None,
                profile: str = "fast", slack_limits: str = "") -> AsyncIterator[World]:
    """`slack_limits`: Slack's rate limits FakeSlack enforces (devslack/limits.py)."""
    async with AsyncExitStack() as stack:
        users = (*DEFAULT_USERS, SlackUser(DAVE, "dave", "Dave Diaz"))
        slack = await stack.enter_async_context(FakeSlack(
            channels={GENERAL: "general", APPROVALS: "approvals", "C0RANDOM": "random"},
            users=users, usergroups={LEADS: [CAROL]}, rate_limits=slack_limits))
        sim = SimProcess(tmp_path, profile=profile)
        stack.push_async_callback(sim.stop)
        await sim.start()
        w = World(directory=tmp_path, sim=sim, slack=slack,
                  database_url=database_url or f"sqlite:///{tmp_path / 'bot.db'}")

        async def close_bots() -> None:
            for bot in w.bots:
                with contextlib.suppress(AssertionError):
                    await bot.close()

        stack.push_async_callback(close_bots)
        try:
            yield w
        except Exception as failed:
            failed.add_note(_what_happened(w))  # the report shows the processes' side too
            raise
        assert slack.violations == [], slack.violations


def _what_happened(w: World, lines: int = 80, calls: int = 40) -> str:
    """For a failed test's report: the Slack calls FakeSlack refused, the last ones it answered
    (when the bot told Slack what: paced per channel, they show where its seconds went) and the
    end of each process's log (a bot's view of a modal that never opened, an answer that never
    came). `PROCS_LOG_LEVEL=DEBUG` on a rerun logs each AI Reserve call too."""
    refused = [f"{c.at:%H:%M:%S} {c.method} -> {c.status} {c.error}" for c in w.slack.calls
               if c.status != 200 or c.error]
    told = [f"{_hms(c.at)} {c.method} {c.args.get('channel') or ''}".rstrip()
            for c in w.slack.calls[-calls:]]
    parts = ["Slack calls refused: " + ("; ".join(refused) or "none"),
             f"--- the last {len(told)} Slack calls ---\n" + "\n".join(told)]
    procs: list[tuple[str, SimProcess | BotProcess]] = [("simulator", w.sim)]
    for name, proc in procs + [(bot.name, bot) for bot in w.bots]:
        tail = proc.logs().splitlines()[-lines:]
        parts.append(f"--- the end of {name}'s log ---\n" + "\n".join(tail))
    return "\n".join(parts)
