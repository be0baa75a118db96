"""One child process (the simulator's or a bot's), its output in one log file read as it grows,
and `wait_for`, the poll every real-process test waits with."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from tests.procs.note import hms

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0  # a cold interpreter importing Bolt + SQLAlchemy on a busy 2-core machine
STOP_TIMEOUT = 30.0
# Whether the running test may start real processes: tests/conftest.py sets it for each test, true
# only for a `boundary` one (`make test-boundary`: tests/conftest.py's BOUNDARIES), so that none
# hides among the in-process ones of `make test`. True outside pytest (the benchmarks use this
# package too). Child.spawn reads it at each spawn.
STARTS_PROCESSES = True
T = TypeVar("T")


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
                                 f"({hms(began)} to {hms(datetime.now())})")
        await asyncio.sleep(interval)


def base_env() -> dict[str, str]:
    """What any child needs from ours, and nothing the bot would read as a setting."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PG_BINDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Child:
    """One child process at a time, its output appended to one log file."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: Path
    proc: asyncio.subprocess.Process | None = None

    async def spawn(self) -> None:
        assert self.proc is None or self.proc.returncode is not None, "already running"
        assert STARTS_PROCESSES, ("this test starts real processes: mark it "
                                        "@pytest.mark.procs (tests/conftest.py)")
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

    def _gone(self, what: str) -> AssertionError:
        return AssertionError(f"{self.argv[2:4]} {what}; log tail:\n{self.logs()[-3000:]}")

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
            raise self._gone(f"did not exit within {within} s") from None

    async def wait_for_log(self, pattern: re.Pattern[str], *, offset: int = 0,
                           within: float = START_TIMEOUT) -> re.Match[str]:
        def seen() -> re.Match[str] | None:
            if not self.running:
                raise self._gone(f"exited ({self.proc and self.proc.returncode}) before serving")
            return pattern.search(self.logs(), offset)
        return await wait_for(seen, within=within, what=f"{pattern.pattern!r} in the log")
