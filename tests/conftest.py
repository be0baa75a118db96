"""Session-wide fixtures: the throwaway PostgreSQL server (tests/pg.py) and a fresh database on it.

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


def pytest_configure(config: pytest.Config) -> None:
    # Every Block Kit rendering the suite makes is compared with slack_sdk's own to_dict.
    render.CROSS_CHECK = True
    config.addinivalue_line(
        "markers", "postgres: needs the throwaway PostgreSQL server (deselect: -m 'not postgres')"
    )
    config.addinivalue_line(
        "markers", "procs: starts real bot/simulator processes and times what they do; under "
        "pytest-xdist these run one at a time, on one worker"
    )
    config.addinivalue_line(
        "markers", "image: builds and runs the container image (minutes, mostly waiting on "
        "downloads and disk): scheduled first, so that it overlaps the rest of the suite"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The image test (minutes, mostly waiting on downloads and disk) goes first: xdist hands out
    # work in this order (after the groups: the procs group, the biggest, starts first on one
    # worker), so it starts at once on another and overlaps the suite instead of trailing it.
    items.sort(key=lambda item: item.get_closest_marker("image") is None)  # a stable sort
    # `make test` runs the suite on parallel workers (pytest-xdist, --dist loadgroup). Tests that
    # start real processes assert on wall-clock bounds (a 20 s drain, a takeover within 6 s, a
    # quiet window's call count): two of them side by side, each with a bot or three and a
    # simulator, would compete for the same 2 cores. One group keeps them to one worker, one at
    # a time, while the other workers run the in-process tests.
    #
    # xdist groups by a "@group" suffix on the node id, which its own hook (after this one)
    # writes to Node._nodeid; pytest 9.2 keeps the id in Node._id instead, so that write is
    # lost and the group silently vanishes (pytest-xdist 3.8). Here the suffix goes where
    # pytest 9.2 keeps the id, and is checked (below): should the id move again, the run stops.
    for item in items:
        if item.get_closest_marker("procs") is None:
            continue
        item.add_marker(pytest.mark.xdist_group("procs"))
        if _grouping(config) and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(f"{item.nodeid}@procs")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if (_grouping(item.config) and item.get_closest_marker("procs")
            and not item.nodeid.endswith("@procs")):
        pytest.fail("not in the procs group: this pytest/pytest-xdist names groups another way, "
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
