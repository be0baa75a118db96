"""Health that tells the truth: `GET /healthz` (liveness) and `GET /readyz` (readiness).

`/healthz` answers 200 while the process serves HTTP at all. `/readyz` answers "can this replica
take Slack's requests now": 200 when the database answers, its schema is at the newest migration
(or ahead by revisions this build runs on), it takes a write (a probe row inserted and deleted,
committed: a full disk or a read-only file still answers reads), the process isn't draining
(SIGTERM: 503 at once, while the listener keeps answering for DRAIN_SECONDS) and, in Socket
Mode, the WebSocket is connected (or was, within a short budget); otherwise 503 with
`{"ready": false, "reasons": [...]}` naming each failed check.

What other parties do is not this replica's fitness to serve, so it never turns readiness red:
Slack or AI Reserve failing for longer than their budget (bot/observability/reachability.py,
from real calls' outcomes), the scheduler stopped, or — on the replica holding the sweeps lease
— no watch sweep completed within 3 poll intervals (AI Reserve down fails every sweep). Pulling
every replica out of the load balancer for those would refuse the commands that can still be
answered (list, help, Home, withdrawals, approvals that queue). They are listed under
`"degraded"` in the body (200 or 503 alike), exported as metrics and alerted on
(ops/alerts.yaml). Either body may also carry `"notes"`: what the operator should know that
doesn't stop the replica serving (a bot token Slack refuses). Both endpoints are served on the
internal port (INTERNAL_PORT, with `/metrics`), never on the public one Slack reaches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from aiohttp import web

from bot.domain.errors import StorageUnavailable
from bot.jobs.tracker import Sweeps
from bot.observability.reachability import Connection, Reachability
from storage.db import Database

DB_TIMEOUT_SECONDS = 3.0
STALE_AFTER_POLLS = 3
WATCH_SWEEP = "watch_clusters"


@cache
def migration_head() -> str | None:
    """The newest migration this code ships (read once)."""
    from alembic.script import ScriptDirectory

    from storage.migrations import alembic_config

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@dataclass
class Health:
    db: Database
    poll_interval_seconds: int
    sweeps: Sweeps
    scheduler_running: Callable[[], bool]
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    replica: str = "bot"  # names this replica's probe row (replicas probe side by side)
    reaches: list[Reachability] = field(default_factory=list)  # Slack, AI Reserve
    connection: Connection | None = None  # the Socket Mode WebSocket (None: HTTP mode)
    # What the operator should know that doesn't stop this replica taking Slack's requests
    # (a bot token Slack refuses: bot/slack/tokens.py): said in the body, under "notes".
    notes: list[Callable[[], str | None]] = field(default_factory=list)

    async def reasons(self) -> list[str]:
        """Every readiness check that fails, in words; empty when ready."""
        reasons = []
        if self.stopping.is_set():
            reasons.append("draining: finishing in-flight work before exit")
        reasons += await self._database()
        problem = self.connection.problem() if self.connection is not None else None
        if problem is not None:  # Socket Mode: the connection is how Slack's requests arrive
            reasons.append(problem)
        return reasons

    def degraded(self) -> list[str]:
        """What is wrong around this replica that doesn't stop it taking Slack's requests."""
        degraded = []
        if not self.scheduler_running():
            degraded.append("scheduler: not running")
        age = self.sweeps.age(WATCH_SWEEP)
        if self.sweeps.holder and age > STALE_AFTER_POLLS * self.poll_interval_seconds:
            degraded.append(f"sweep: the last watch sweep "
                            f"completed {age:.0f} s ago (more than "
                            f"{STALE_AFTER_POLLS} poll intervals of "
                            f"{self.poll_interval_seconds} s)")
        # Read, never probed here: a /readyz hit costs no call to Slack or AI Reserve.
        for watched in self.reaches:
            problem = watched.problem()
            if problem is not None:
                degraded.append(problem)
        return degraded

    async def _database(self) -> list[str]:
        try:
            async with asyncio.timeout(DB_TIMEOUT_SECONDS):
                versions = await self.db.schema_versions()
        except Exception as exc:  # any failure to answer is "not ready", never a 500
            return [f"database: not answering ({type(exc).__name__})"]
        head = migration_head()
        if versions != [head] and not await self._runs_ahead():
            return [f"migrations: the database is at {', '.join(versions) or 'none'}, "
                    f"this code needs {head}"]
        try:
            async with asyncio.timeout(DB_TIMEOUT_SECONDS):  # the probe never hangs /readyz
                await self.db.probe(name=self.replica)
        except StorageUnavailable as exc:
            return [f"database: can't be written ({exc.trouble.value}: {exc.detail})"]
        except Exception as exc:
            return [f"database: can't be written ({type(exc).__name__})"]
        return []

    async def _runs_ahead(self) -> bool:
        """A database ahead of this build by revisions it runs on (a rolling update's newer
        replica migrated it, storage/schema.py) is as good as one at this build's head."""
        try:
            async with asyncio.timeout(DB_TIMEOUT_SECONDS):
                status = await self.db.schema_status()
        except Exception:
            return False
        return status.ahead and status.runnable

    async def live(self, _: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def ready(self, _: web.Request) -> web.Response:
        reasons = await self.reasons()
        degraded = {"degraded": found} if (found := self.degraded()) else {}
        notes = [n for n in (note() for note in self.notes) if n]
        extra = {**degraded, **({"notes": notes} if notes else {})}
        if reasons:
            return web.json_response({"ready": False, "reasons": reasons, **extra}, status=503)
        return web.json_response({"ready": True, **extra})

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self.live)
        app.router.add_get("/readyz", self.ready)

    def app(self) -> web.Application:
        """The health endpoints alone (the internal port adds `/metrics`)."""
        app = web.Application()
        self.add_routes(app)
        return app
