"""`/healthz` says the process serves; `/readyz` says whether it can do its job: the database
answers at the newest migration, the scheduler runs and the watch sweep is fresh."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from bot.app import runtime
from bot.app.listeners import internal_site
from bot.config.settings import load_settings
from tests.procs import wait_for, world

ENV = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s", "APPROVALS_CHANNEL": "C0A",
       "APPROVERS": "U0BOB", "SLACK_API_URL": "http://127.0.0.1:9/api/"}


@pytest.mark.procs
async def test_ready_until_the_database_goes_away(tmp_path, database_url, request):
    async with world(tmp_path, database_url=database_url) as w:
        bot = await w.bot()
        assert await bot.get("/healthz") == (200, {"ok": True})

        async def ready() -> bool:
            return (await bot.get("/readyz"))[0] == 200

        await wait_for(ready, what="/readyz 200")

        if database_url is None:  # SQLite: the file turns into something that isn't one
            (tmp_path / "bot.db").write_bytes(b"\0" * 4096)
            for extra in ("bot.db-wal", "bot.db-shm"):
                (tmp_path / extra).unlink(missing_ok=True)
        else:  # PostgreSQL: the database is dropped under the bot's feet
            pg = request.getfixturevalue("pg_server")
            pg.drop_database(database_url.split("/")[3].split("?")[0])

        async def not_ready():
            status, body = await bot.get("/readyz")
            return status == 503 and body

        body = await wait_for(not_ready, what="/readyz 503")
        assert body["ready"] is False
        assert any(r.startswith("database: not answering") for r in body["reasons"]), body
        assert (await bot.get("/healthz"))[0] == 200  # alive, just not ready
        await bot.kill()


async def _readyz(rt, url):
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"{url}/readyz") as response:
        return response.status, await response.json()


async def test_degraded_without_scheduler_or_with_a_stale_sweep_not_ready_behind_migrations(
        tmp_path):
    """A stopped scheduler or a stale sweep is said (and alerted on), but the replica still
    takes Slack's requests (issue 24, item 4); a database it can't use is not ready."""
    settings = load_settings({**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}",
                              "POLL_INTERVAL_SECONDS": "5"})
    async with runtime.start(settings, scheduler=False) as rt, \
            internal_site(rt, host="127.0.0.1", port=0) as url:
        status, body = await _readyz(rt, url)
        assert (status, body) == (200, {"ready": True, "degraded": ["scheduler: not running"]})

        rt.health.scheduler_running = lambda: True
        assert await _readyz(rt, url) == (200, {"ready": True})

        rt.sweeps.started_at = time.monotonic() - 16  # > 3 polls of 5 s without a sweep
        status, body = await _readyz(rt, url)
        assert status == 200 and body["degraded"][0].startswith("sweep: the last watch sweep")
        rt.sweeps.finished["watch_clusters"] = time.monotonic()
        assert await _readyz(rt, url) == (200, {"ready": True})

        async with rt.db.transaction() as repos:
            await repos.session.execute(sa.text("UPDATE alembic_version SET version_num='0002'"))
        status, body = await _readyz(rt, url)
        assert status == 503 and body["reasons"][0].startswith(
            "migrations: the database is at 0002, this code needs")


async def test_only_the_lease_holder_is_degraded_by_a_stale_sweep_and_a_failed_one_counts_not(
        tmp_path, monkeypatch):
    from dataclasses import dataclass

    from bot.jobs import scheduler as module
    from bot.jobs.scheduler import tracked

    @dataclass
    class SweepsLease:
        held: bool
        since: float

    class ProviderDown(Exception):
        pass

    monkeypatch.setattr(module, "is_provider_trouble", lambda exc: isinstance(exc, ProviderDown))

    async def watch_clusters(_):
        raise ProviderDown("AI Reserve answers 503")

    async def watch_clusters_ok(_):
        return None
    watch_clusters_ok.__name__ = "watch_clusters"

    settings = load_settings({**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'b.db'}",
                              "POLL_INTERVAL_SECONDS": "5"})
    async with runtime.start(settings, scheduler=False) as rt, \
            internal_site(rt, host="127.0.0.1", port=0) as url:
        rt.health.scheduler_running = lambda: True
        long_ago = time.monotonic() - 60  # > 3 polls of 5 s
        rt.sweeps.started_at = long_ago
        # Another replica holds the sweeps lease: this one not sweeping is its job, not a fault.
        rt.sweeps.lease = SweepsLease(held=False, since=long_ago)
        assert await _readyz(rt, url) == (200, {"ready": True})
        # It takes the lease: it gets its budget for a first sweep from then...
        rt.sweeps.lease = lease = SweepsLease(held=True, since=time.monotonic())
        assert await _readyz(rt, url) == (200, {"ready": True})
        # ...and, when it's spent, sweeps that raised don't make it ready.
        lease.since = long_ago
        await tracked(watch_clusters, rt.sweeps)(rt.services)
        status, body = await _readyz(rt, url)
        assert status == 200 and body["degraded"][0].startswith("sweep: the last watch sweep")
        await tracked(watch_clusters_ok, rt.sweeps)(rt.services)  # a completed one does
        assert await _readyz(rt, url) == (200, {"ready": True})
