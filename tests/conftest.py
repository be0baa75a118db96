"""Session-wide fixtures: the throwaway PostgreSQL server (tests/pg.py) and a fresh database on it;
the suite's two tiers and its scheduling under pytest-xdist.

The two tiers: `make test` runs every test inside pytest's own processes (`-m "not boundary"`),
on SQLite; `make test-boundary` runs the rehearsals at the boundaries the product meets outside
them (`-m boundary`): the PostgreSQL server (`postgres`: every test on PostgreSQL, the replicas'
database), real bot and simulator processes (`procs`: signals, kills, replicas, restarts), the
container image and a Debian root (`image`), earlier releases built from git history, a real
Chromium. CI (.ci/run) runs both.

Where PostgreSQL cannot start (a developer machine without it), every test that needs it is
skipped with the reason. In CI (CI=true) it fails instead: the PostgreSQL coverage must not
vanish silently because the machine lost its server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from bot.slack.blocks import render
from storage.db import Database
from tests.pg import PgServer, PgUnavailable, run_in_own_loop
from tests.procs import child as procs_child


def pytest_configure(config: pytest.Config) -> None:
    # Every Block Kit rendering the suite makes is compared with slack_sdk's own to_dict.
    render.CROSS_CHECK = True
    config.addinivalue_line(
        "markers", "postgres: needs the throwaway PostgreSQL server (deselect: -m 'not postgres')"
    )
    config.addinivalue_line(
        "markers", "procs(lane='timed'): starts real bot/simulator processes; under pytest-xdist "
        "each lane runs one test at a time, on one worker: 'timed' (the default) for tests that "
        "time what they see, 'restarts' for kill-and-restart tests that only count outcomes"
    )
    config.addinivalue_line(
        "markers", "image: builds and runs the container image (minutes, mostly waiting on "
        "downloads and disk): scheduled first, so that it overlaps the rest of the suite"
    )
    config.addinivalue_line(
        "markers", "boundary: a rehearsal outside pytest's processes (`make test-boundary`, "
        "not `make test`): every `postgres`, `procs` and `image` test, earlier releases from "
        "git, Chromium"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The image test (minutes, mostly waiting on downloads and disk) goes first, then the `slow`
    # ones (tens of seconds each), then the rest in collection order: xdist hands out work in this
    # order (after the groups: the two procs lanes, the biggest, start first, one worker each), so
    # the long tests start at once and overlap the suite instead of trailing it alone at the end
    # (tests/test_*.py come last in collection order, and several of them are long).
    items.sort(key=_start_order)  # a stable sort
    for item in items:
        if any(item.get_closest_marker(kind) for kind in BOUNDARIES):
            item.add_marker(pytest.mark.boundary)
    # `make test` runs the suite on parallel workers (pytest-xdist, --dist loadgroup). Tests that
    # start real processes wait on real seconds (a bot polls every second, AI Reserve boots a
    # node in five): mostly waiting, they would make a long tail run one after another. They
    # run in two lanes, each one test at a time on one worker, side by side with each other and
    # with the in-process tests:
    # - `timed` (the default) for tests that assert on wall-clock bounds (a 20 s drain, a
    #   takeover within 6 s, /readyz green throughout a storm): never two of them at once;
    # - `restarts` for tests that kill and restart bots and count outcomes (one cluster, one
    #   DM), with generous deadlines: a timed test next to one sees a bot and a simulator mostly
    #   waiting, less than an in-process worker's load.
    #
    # xdist groups by a "@group" suffix on the node id, which its own hook (after this one)
    # writes to Node._nodeid; pytest 9.2 keeps the id in Node._id instead, so that write is
    # lost and the group silently vanishes (pytest-xdist 3.8). Here the suffix goes where
    # pytest 9.2 keeps the id, and is checked (below): should the id move again, the run stops.
    for item in items:
        group = _lane(item)
        if group is None:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
        if _grouping(config) and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(f"{item.nodeid}@{group}")


# What puts a test in the boundary tier. PostgreSQL is a server outside pytest's processes, as
# the bots and the simulator of `procs` are: its 190 in-process tests were ~11% of that tier's
# CPU (and ~160 s of its workers' wall, waiting on the server), for the database that replicas
# use — CI rehearses them on every run, `make test` keeps to SQLite.
BOUNDARIES = ("postgres", "procs", "image")


def _start_order(item: pytest.Item) -> int:
    return 0 if item.get_closest_marker("image") else 1 if item.get_closest_marker("slow") else 2


LANES = ("timed", "restarts")


def _lane(item: pytest.Item) -> str | None:
    """The xdist group of a real-process test: `procs` (timed) or `procs-restarts`."""
    marker = item.get_closest_marker("procs")
    if marker is None:
        return None
    lane = marker.kwargs.get("lane", marker.args[0] if marker.args else "timed")
    if lane not in LANES:
        raise pytest.UsageError(f"{item.nodeid}: procs lane {lane!r} is not one of {LANES}")
    return "procs" if lane == "timed" else f"procs-{lane}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    procs_child.STARTS_PROCESSES = item.get_closest_marker("boundary") is not None
    group = _lane(item)
    if _grouping(item.config) and group and not item.nodeid.endswith(f"@{group}"):
        pytest.fail("not in its procs lane: this pytest/pytest-xdist names groups another way, "
                    "and the real-process tests would run side by side (tests/conftest.py)",
                    pytrace=False)


def _grouping(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "loadgroup", False))  # set on xdist's workers


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole session, stopped (and its files deleted) at the end."""
    try:
        server = PgServer.start()
    except PgUnavailable as exc:
        if in_ci():
            pytest.fail(f"PostgreSQL is required in CI (CI=true) but unavailable: {exc}",
                        pytrace=False)
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """DATABASE_URL of a new, empty database, dropped after the test."""
    name = pg_server.create_database()
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_database_url(request: pytest.FixtureRequest) -> str | None:
    """None (a bot process's default SQLite file) or `pg_url`: for the real-process tests,
    whose bots migrate the empty database themselves."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        return url
    return None


@pytest.fixture(scope="session")
def pg_schema_template(pg_server: PgServer) -> str:
    """A database migrated to head once per session: what `pg_migrated_url` copies."""
    name = pg_server.create_database()

    async def migrate() -> None:
        database = Database(pg_server.url(name))
        try:
            await database.migrate()
        finally:
            await database.dispose()  # CREATE DATABASE … TEMPLATE wants it unused

    run_in_own_loop(migrate())
    return name


@pytest.fixture
def pg_migrated_url(pg_server: PgServer, pg_schema_template: str) -> Iterator[str]:
    """DATABASE_URL of a new database already at the newest migration, dropped after the test.

    A copy of the session's migrated template: ~60 ms less per test than migrating an empty
    database, for tests about what comes after migrations (the migrations themselves run on
    `pg_url`'s empty databases: tests/storage/test_migrations.py and every e2e bot start)."""
    name = pg_server.create_database(template=pg_schema_template)
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)
