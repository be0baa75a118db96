"""A database that can't take writes — a full disk, a read-only file, a PostgreSQL restart: the
person is told in words what is wrong and that nothing changed, the log has one line per outage
and no traceback, `/readyz` is red within one probe and green again after, and work resumes.

The full disk is real: the bot's SQLite file lives on a 1 MiB tmpfs that a filler file fills
(needs root's mount; skipped with the reason where it isn't permitted). The read-only database
is SQLite's own read-only mode (`PRAGMA query_only`), which fails every write with the same
SQLITE_READONLY "attempt to write a readonly database" a read-only file or mount gives (root
ignores a chmod 0444, so a chmod would reproduce nothing here). PostgreSQL is the session's
throwaway server, stopped and started again under the running bot.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import event

from bot.jobs import sweeps
from bot.jobs.scheduler import tracked
from storage.replica import Lease
from tests.e2e.harness import ALICE, Harness, bot
from tests.pg import PgServer
from tests.procs import wait_for, world

QUOTE = "quote h100x8 nodes=4"


async def readyz(h: Harness) -> tuple[int, dict[str, Any]]:
    h.rt.health.scheduler_running = lambda: True  # the harness ticks by hand: only the DB counts
    base = h.rt.internal_url
    async with aiohttp.ClientSession() as session, session.get(f"{base}/readyz") as response:
        return response.status, await response.json()


async def healthz(h: Harness) -> int:
    base = h.rt.internal_url
    async with aiohttp.ClientSession() as session, session.get(f"{base}/healthz") as response:
        return response.status


async def quote_works(h: Harness) -> None:
    await h.slash(QUOTE)
    h.last_ephemeral(ALICE, containing="Request launch")


async def told(h: Harness, words: str) -> str:
    """Quote (a write: the quote is stored); the ephemeral answer names the trouble."""
    before = len(h.slack.ephemerals(ALICE))
    await h.slash(QUOTE)
    answers = [h.text_of(m) for m in h.slack.ephemerals(ALICE)[before:]]
    answer = next((a for a in answers if words in a), None)
    assert answer is not None, answers
    assert "Nothing was changed" in answer and "Something went wrong" not in answer
    return answer


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and r.name == "storage.outages"]


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    """No traceback, and nothing louder than INFO but the outage's own line(s)."""
    raised = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info]
    assert raised == []
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == outage_lines(caplog)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB file system of its own (tmpfs), unmounted afterwards."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a real full disk needs a tmpfs mount (root with CAP_SYS_ADMIN): "
                    f"{mounted.stderr.strip() or mounted.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Fill the file system to the last byte; the WAL is emptied first, so the next commit
    has to grow it (a WAL keeps its size after a checkpoint and would take a few more)."""
    conn = sqlite3.connect(disk / "bot.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for size in (65536, 4096, 512, 1):  # down to the last byte
            try:
                while out.write(b"\0" * size):
                    pass
            except OSError:
                pass
    return filler


async def test_a_full_disk_is_told_logged_once_and_red_until_space_frees(
        tmp_path, small_disk, caplog):
    caplog.set_level(logging.INFO)
    url = f"sqlite:///{small_disk / 'bot.db'}"
    async with bot(tmp_path, database_url=url) as h:
        await quote_works(h)
        assert (await readyz(h))[0] == 200

        filler = fill(small_disk)
        status, body = await readyz(h)  # red within one probe
        assert status == 503, body
        assert any(r.startswith("database: can't be written (full: SQLITE_FULL")
                   for r in body["reasons"]), body
        assert await healthz(h) == 200  # alive, only not ready
        for _ in range(3):  # the person, every time; the log, once
            answer = await told(h, "database is full")
            assert "free space" in answer
        assert (await readyz(h))[0] == 503
        lines = outage_lines(caplog)
        assert len(lines) == 1 and "is full" in lines[0], lines
        no_tracebacks(caplog)

        filler.unlink()  # space frees: the next probe writes, and work resumes
        assert await readyz(h) == (200, {"ready": True})
        await quote_works(h)
        assert outage_lines(caplog) == lines  # still the one line (the recovery is INFO)
        assert any("takes writes again" in r.getMessage() for r in caplog.records)
        no_tracebacks(caplog)


async def test_a_read_only_database_is_told_and_red_until_writable(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    async with bot(tmp_path) as h:
        await quote_works(h)
        read_only = {"on": True}

        def query_only(dbapi_connection: Any, _record: Any) -> None:
            if read_only["on"]:
                dbapi_connection.execute("PRAGMA query_only = ON")

        engine = h.rt.db.engine
        event.listen(engine.sync_engine, "connect", query_only)
        await engine.dispose()  # every connection from now on is read-only

        status, body = await readyz(h)
        assert status == 503 and any(
            r.startswith("database: can't be written (read-only: SQLITE_READONLY")
            for r in body["reasons"]), body
        await told(h, "database is read-only")
        await told(h, "database is read-only")
        # A launch in the background meets it too (an approval committed just before): it
        # ends quietly, and the resume sweep carries on once writes work again.
        launching = h.rt.services.launching
        launching.launch_soon("r-any")
        await asyncio.wait(set(launching._tasks))
        gc.collect()  # an exception nobody retrieved is logged (with its traceback) here
        lines = outage_lines(caplog)
        assert len(lines) == 1 and "read-only" in lines[0], lines
        no_tracebacks(caplog)

        read_only["on"] = False
        await engine.dispose()
        assert await readyz(h) == (200, {"ready": True})
        await quote_works(h)
        no_tracebacks(caplog)


@pytest.mark.postgres
async def test_a_postgresql_restart_is_told_logged_once_and_survived(
        tmp_path, pg_server: PgServer, pg_url, caplog):
    caplog.set_level(logging.INFO)
    async with bot(tmp_path, database_url=pg_url) as h:
        await quote_works(h)
        assert (await readyz(h))[0] == 200

        await asyncio.to_thread(pg_server.halt)  # pg_ctl waits: not on the bot's loop
        try:
            status, body = await readyz(h)
            assert status == 503, body
            await told(h, "database can't be reached")
            await told(h, "database can't be reached")
            # The sweeps and the lease keeper meet it too: they wait, quietly, for the next run.
            await tracked(sweeps.watch_clusters, h.rt.sweeps)(h.rt.services)
            lease = Lease(db=h.rt.db, name="sweeps", holder="r2", ttl=timedelta(seconds=5))
            assert await lease.hold() is False
        finally:
            await asyncio.to_thread(pg_server.resume)
        assert await readyz(h) == (200, {"ready": True})
        await quote_works(h)
        lines = outage_lines(caplog)
        assert len(lines) == 1 and "unavailable" in lines[0], lines
        no_tracebacks(caplog)  # the one line is all the log says of it


def sweeps_run(metrics: str, sweep: str = "watch_clusters") -> int:
    """How many runs of `sweep` have completed (the sweep histogram's count)."""
    found = re.search(rf'^clusterbot_sweep_seconds_count\{{sweep="{sweep}"\}} (\S+)$',
                      metrics, re.M)
    return int(float(found.group(1))) if found else 0


@pytest.mark.procs
@pytest.mark.postgres
async def test_a_served_bot_rides_out_a_postgresql_restart_with_one_line(
        tmp_path, pg_server: PgServer, pg_url):
    """A real `cluster-bot serve` process, its scheduler and lease keeper running (1 s polls):
    PostgreSQL stops under it and starts again."""
    async with world(tmp_path, database_url=pg_url) as w:
        bot = await w.bot()
        await wait_for(bot.ready, what="/readyz 200")
        await asyncio.to_thread(pg_server.halt)
        try:
            status, body = await bot.get("/readyz")  # red at the first probe
            assert status == 503 and any(r.startswith("database:") for r in body["reasons"])
            before = len(w.slack.ephemerals(ALICE))
            await bot.requests.slash(text=QUOTE, user_id=ALICE, channel_id="C0GENERAL")
            answer = await wait_for(lambda: [w.text_of(m) for m in w.slack.ephemerals(ALICE)
                                             [before:] if "database" in w.text_of(m)],
                                    what="the answer")
            assert "can't be reached" in answer[0] and "Nothing was changed" in answer[0]
            # The scheduler goes on: lease renewals meet the outage (and complete, not holding
            # it); the sweeps, no longer on the holder or raising, complete nothing meanwhile.
            kept = sweeps_run((await bot.get("/metrics"))[1], "keep_lease")

            async def renewed_twice_more() -> bool:
                return sweeps_run((await bot.get("/metrics"))[1], "keep_lease") >= kept + 2

            await wait_for(renewed_twice_more, what="two lease renewals during the outage")
            assert (await bot.get("/readyz"))[0] == 503
        finally:
            await asyncio.to_thread(pg_server.resume)
        await wait_for(bot.ready, what="/readyz 200 after the restart")
        before = len(w.slack.ephemerals(ALICE))
        await bot.requests.slash(text=QUOTE, user_id=ALICE, channel_id="C0GENERAL")
        await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)[before:]
                                if "Request launch" in w.text_of(m)], what="a quote again")
        logs = bot.logs()
        assert "Traceback" not in logs, logs
        loud = [line for line in logs.splitlines() if " WARNING " in line or " ERROR " in line]
        assert len(loud) == 1 and "the database is unavailable" in loud[0], loud
        assert logs.count("the database takes writes again") == 1, logs
