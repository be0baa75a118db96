"""Replicas on one database, as real processes: posts, duplicates, missed, provider calls.

The scenario of tests/replicas.py (the test asserts what this prints): a launch, a degrade and a
manual recovery, hours of reminders on the simulator's virtual clock, a `kill -9` of the sweeping
replica, a SIGTERM of its successor, a terminate. Slack takes 300 ms per post (a proxy holds it),
the window in which replicas race. Run with 1 and 3 replicas on the throwaway PostgreSQL of
tests/pg.py (a SQLite file when PostgreSQL is not installed).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.report import Table
from tests import replicas
from tests.pg import PgServer, PgUnavailable

COUNTS = (1, 3)
HOURS = 3


async def run() -> list[Table]:
    try:
        server: PgServer | None = PgServer.start()
    except PgUnavailable:
        server = None
    table = Table(
        f"5. Replicas on one {'PostgreSQL' if server else 'SQLite'} database (real processes, "
        f"{HOURS}+2 h of reminders, kill -9 of the sweeper, SIGTERM, terminate)",
        ["replicas", "logical posts", "posts", "duplicates", "missed",
         "provider calls / sweep", "takeover s"])
    try:
        for count in COUNTS:
            url = server.url(server.create_database()) if server else None
            with tempfile.TemporaryDirectory() as directory:
                f = await replicas.run(Path(directory), database_url=url, replicas=count,
                                       hours=HOURS)
            table.rows.append([str(f.replicas), str(f.logical), str(f.posts),
                               str(f.duplicates), str(f.missed),
                               f"{f.provider_calls_per_sweep:.1f}",
                               "-" if f.takeover_seconds is None
                               else f"{f.takeover_seconds:.1f}"])
    finally:
        if server is not None:
            server.stop()
    table.notes += [
        "posts: chat.postMessage calls Slack accepted; duplicates: beyond the first of the same "
        "(channel, thread, text); missed: notices or outbox posts never delivered, or expected "
        "ones absent",
        "provider calls / sweep: every AI Reserve call over 6 quiet seconds / poll intervals "
        "(POLL_INTERVAL_SECONDS=1); takeover: kill -9 of the lease holder → another holds it",
    ]
    return [table]
