"""Health that tells the truth: `GET /healthz` (liveness) and `GET /readyz` (readiness).

`/healthz` answers 200 while the process serves HTTP at all. `/readyz` answers 200 only when
the database answers, its schema is at the newest migration, it takes a write (a probe row
inserted and deleted, committed: a full disk or a read-only file still answers reads), the
scheduler runs, the process isn't stopping and — on the replica holding the sweeps lease — the
last watch sweep completed within 3 poll intervals (of this replica's holding it: a run that
raised or was skipped doesn't count). A replica without the lease isn't red for not sweeping:
that's its job — and Slack and AI Reserve have answered within their budget
(bot/observability/reachability.py: from real calls' outcomes, a 429 backlog counting as an
answer) and, in Socket Mode, the WebSocket is connected (or was, within a short budget);
otherwise 503 with `{"ready": false, "reasons": [...]}` naming each failed check. Either body
may carry `"notes"`: what the operator should know that doesn't stop the replica serving (a bot
token Slack refuses). Both are
served on the internal port (INTERNAL_PORT, with `/metrics`), never on the public one Slack
reaches.
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
            reasons.append("stopping: finishing in-flight work before exit")
        reasons += await self._database()
        if not self.scheduler_running():
            reasons.append("scheduler: not running")
        age = self.sweeps.age(WATCH_SWEEP)
        if self.sweeps.holder and age > STALE_AFTER_POLLS * self.poll_interval_seconds:
            reasons.append(f"sweep: the last watch sweep "
                           f"completed {age:.0f} s ago (more than "
                           f"{STALE_AFTER_POLLS} poll intervals of "
                           f"{self.poll_interval_seconds} s)")
        # Read, never probed here: a /readyz hit costs no call to Slack or AI Reserve.
        for watched in (*self.reaches, self.connection):
            problem = watched.problem() if watched is not None else None
            if problem is not None:
                reasons.append(problem)
        return reasons

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
        notes = [n for n in (note() for note in self.notes) if n]
        extra = {"notes": notes} if notes else {}
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
