"""Is Slack / AI Reserve / the Socket Mode WebSocket reachable? From real call outcomes.

Every Slack Web API call (`CountingWebClient`) and every AI Reserve request (the transport's
`observe`) reports its outcome here: an answer — any answer, a 429 included — means the service
is reachable; no answer (a connection error, a timeout) or a 5xx means it is not. A Slack backlog
(429s, `Retry-After` pauses) is not unreachability: it has its own metric and alert
(`clusterbot_outbox_oldest_seconds`). `/readyz` reads the state, never calls out: when nothing
has called a service for a while, `Prober` sends one cheap call (`auth.test`, AI Reserve's
`GET /health`) so an idle bot still finds out, and its outcome is recorded like any other.
A service is unreachable only once it has been failing for longer than its budget: one lost
connection is a blip. Even then it is not this replica's fitness to serve (bot/app/health.py
lists it under "degraded", never as a readiness reason): it is a metric
(`clusterbot_reachable`, `clusterbot_unreachable_seconds`) with its alert, and one log line
per change of state — a WARNING when the budget is passed, an INFO when it answers again —
never a line per failed call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

Now = Callable[[], float]


@dataclass
class Reachability:
    """One service's recent outcomes; `problem()` is its /readyz reason, if any."""

    name: str
    budget_seconds: float
    now: Now = time.monotonic
    failing_since: float | None = None
    last_failure: str = ""
    last_outcome_at: float | None = None
    said_unreachable: bool = False  # the WARNING for this outage was logged

    def answered(self) -> None:
        """It answered (2xx, 4xx, 429 …): reachable."""
        at = self.now()
        if self.said_unreachable and self.failing_since is not None:
            log.info("%s answers again after %.0f s unreachable", self.name,
                     at - self.failing_since)
        self.failing_since = None
        self.said_unreachable = False
        self.last_outcome_at = at

    def failed(self, what: str) -> None:
        """No answer, or a 5xx: unreachable since the first such outcome in a row."""
        at = self.now()
        if self.failing_since is None:
            self.failing_since = at
        self.last_failure = what
        self.last_outcome_at = at
        if not self.said_unreachable and (problem := self.problem()) is not None:
            self.said_unreachable = True
            log.warning("%s; Slack's requests are still taken, and what needs %s is told "
                        "it isn't answering (said once, until it answers again)", problem,
                        self.name)

    def failing_for(self) -> float:
        """Seconds it has failed in a row (0 while it answers)."""
        return 0.0 if self.failing_since is None else max(0.0, self.now() - self.failing_since)

    def reachable(self) -> bool:
        """Not failing for longer than its budget."""
        return self.problem() is None

    def idle_for(self) -> float:
        """Seconds since the last outcome (infinite before the first)."""
        return float("inf") if self.last_outcome_at is None else self.now() - self.last_outcome_at

    def problem(self) -> str | None:
        if self.failing_since is None:
            return None
        failing = self.now() - self.failing_since
        if failing <= self.budget_seconds:
            return None
        return (f"{self.name}: unreachable for {failing:.0f} s (last: {self.last_failure}; "
                f"budget {self.budget_seconds:g} s)")


def provider_outcome(reach: Reachability, status: str) -> None:
    """An AI Reserve request's outcome as the transport reports it: an HTTP status, "error"
    (no answer) or "paused" (refused locally under a Retry-After: says nothing)."""
    if status == "paused":
        return
    if status == "error":
        reach.failed("no answer")
    elif status.isdigit() and int(status) >= 500:
        reach.failed(f"HTTP {status}")
    else:
        reach.answered()


def slack_outcome(reach: Reachability, *, status: int | None, error: str | None) -> None:
    """A Slack Web API call's outcome: `status` None is no answer at all."""
    if status is None:
        reach.failed(f"no answer ({error})" if error else "no answer")
    elif status >= 500:
        reach.failed(f"HTTP {status}")
    else:
        reach.answered()


@dataclass
class Connection:
    """The Socket Mode WebSocket: red when it has been down longer than its budget."""

    budget_seconds: float
    now: Now = time.monotonic
    down_since: float | None = None  # None: connected (or never asked to connect)

    def up(self) -> None:
        self.down_since = None

    def down(self) -> None:
        if self.down_since is None:
            self.down_since = self.now()

    def problem(self) -> str | None:
        if self.down_since is None:
            return None
        down = self.now() - self.down_since
        if down <= self.budget_seconds:
            return None
        return (f"slack: the Socket Mode connection is down for {down:.0f} s (budget "
                f"{self.budget_seconds:g} s)")


@dataclass
class Prober:
    """Sends one cheap call to each idle service, so reachability stays known without traffic.

    `probes` maps each service to its probe call; a probe that raises has already recorded its
    outcome through the client that made it (this only keeps the loop going)."""

    probes: dict[str, tuple[Reachability, Callable[[], Awaitable[object]]]]
    every_seconds: float
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    sent: list[str] = field(default_factory=list)

    async def once(self) -> None:
        for name, (reach, probe) in self.probes.items():
            if reach.idle_for() < self.every_seconds:
                continue  # real calls answered lately: no probe needed
            self.sent.append(name)
            try:
                await probe()
            except Exception as exc:  # recorded by the client; a probe never stops the loop
                log.debug("%s probe failed (%s)", name, type(exc).__name__)

    async def run(self) -> None:
        while True:
            await self.once()
            await self.sleep(self.every_seconds)
