"""`python -m bot serve` as a child process: its URLs read from its log, signed Slack requests to
it, its health and metrics, signals, exits and restarts."""

from __future__ import annotations

import json
import re
import signal as signals
import sys
from pathlib import Path
from typing import Any

import aiohttp

from devslack.requests import SlackRequests
from devslack.webapi import FakeSlack
from tests.e2e.harness import SECRET
from tests.procs.child import START_TIMEOUT, STOP_TIMEOUT, Child, wait_for

_LISTENING = re.compile(r"listening for Slack on .*?(http://\S+)/slack/events")
_INTERNAL = re.compile(r"health and metrics on \S+ \(this host: (http://\S+)/readyz\)")


class BotProcess:
    """`python -m bot serve` against the world's FakeSlack, simulator and database."""

    def __init__(self, *, name: str, env: dict[str, str], directory: Path,
                 slack: FakeSlack, argv: list[str] | None = None) -> None:
        self.name = name
        self.env = env
        self._slack = slack
        # `argv`: another way to start the same bot (tests/test_image.py: the container image)
        self._proc = Child(argv=argv or [sys.executable, "-m", "bot", "serve"], env=env,
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

    async def ready(self) -> bool:
        """Whether its /readyz answers 200 (a check for `wait_for`)."""
        return (await self.get("/readyz"))[0] == 200

    async def close(self) -> None:
        if self.running:
            await self.kill()
        if self._requests is not None:
            await self._requests.aclose()
        if self._session is not None:
            await self._session.close()

