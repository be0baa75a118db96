"""The release before is a way back, with live rows (issue 26 item 2): THIS build writes what
only it writes — planned runs (an envelope that ends in termination), an idle-only readiness row
(`pattern` NULL, state `none`), a request waiting for stock (status `waiting`), an open digest —
then every earlier release in tests/releases.py RELEASES (its `bot/` and `storage/` from git
history) is started in turn on that database, as a rollback would, and either

- refuses: exit 2, one line, no traceback, nothing changed; or
- runs and does its money duties: its planned run is terminated at AI Reserve by its deadline,
  the waiting request is looked at again (the stock sweep), and no sweep raises on the new
  values (the old code's sweeps meeting a status or a NULL they never wrote).

Which of the two is not the release's choice: the schema records the oldest code that may run
on it (storage/migrations' markers, `schema_compat`); a release older than that must refuse,
a newer one must run. On SQLite and PostgreSQL, one world each (tests/procs.py)."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from bot.domain.models import RequestStatus
from bot.slack.blocks.launch_modal import FIELD_IDLE_MINUTES, FIELD_WAIT_HOURS
from bot.slack.ids import Action
from storage.migrations import head_revision, oldest_compatible
from tests.e2e.harness import launch_without_ssh
from tests.procs import ALICE, APPROVALS, BOB, GENERAL, BotProcess, World, wait_for, world
from tests.releases import RELEASES, must_run
from tests.test_money_clock_process import launch
from tests.test_rollback_releases import _archive

pytestmark = pytest.mark.procs
_LISTENING = re.compile(r"listening for Slack on ")
POLICY = yaml.safe_dump({"approvals_channel": APPROVALS, "approvers": {"users": [BOB]},
                         "limits": {"max_lifetime_hours": 24}})
STOCK = {"accelerator": "h100-sxm-80gb", "location": "us-tx"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str | None:
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        return url
    return None


async def _waiting(w: World) -> tuple[RequestStatus, int] | None:
    """The request waiting for stock: its status and how often it was looked at."""
    async with w.database() as db, db.transaction() as repos:
        found = await repos.requests.list_by_status([RequestStatus.WAITING])
    return (found[0].status, found[0].wait_checks) if found else None


async def _wait_for_stock(w: World, bot: BotProcess) -> None:
    """A request approved while nothing is in stock: it waits (status `waiting`)."""
    await w.sim.admin("capacity", {**STOCK, "availability": "none", "placeableNodes": 0})
    asked = len(w.slack.ephemerals(ALICE))
    await bot.requests.slash(text="quote h100x8 nodes=2 location=us-tx", user_id=ALICE,
                             channel_id=GENERAL)
    quote = await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)[asked:]
                                    if Action.QUOTE_WAIT_FOR_STOCK in w.text_of(m)],
                           what="the no-stock quote")
    shown = w.slack.last_view(ALICE)
    cards = len(w.slack.messages(APPROVALS))
    await bot.requests.click(quote[-1], Action.QUOTE_WAIT_FOR_STOCK, user_id=ALICE)
    form = await wait_for(lambda: (view := w.slack.last_view(ALICE)) is not shown and view,
                          what="the launch form")
    reply = await bot.requests.submit_view(form, user_id=ALICE, values={
        **launch_without_ssh(), FIELD_WAIT_HOURS: {FIELD_WAIT_HOURS: "24"}})
    assert reply.status == 200 and not reply.body, reply.body
    card = await wait_for(lambda: w.slack.messages(APPROVALS)[cards:], what="the card")
    await bot.requests.click(card[-1], Action.APPROVE, user_id=BOB)
    await wait_for(lambda: _waiting(w), what="the request waiting for stock")


async def _terminated(w: World, cluster_id: str) -> bool:
    """AI Reserve accepted its terminate (it bills no further hour)."""
    return all(c["status"] in ("terminating", "terminated") for c in await w.sim.clusters()
               if c["id"] == cluster_id)


async def _live_rows(w: World, planned: int) -> list[str]:
    """This build writes the rows older code never wrote; returns the planned runs' ids (the
    k-th ends after k hours)."""
    bot = await w.bot("this-build", policy=POLICY)
    runs = [(await launch(w, bot, f"quote h100x8 nodes=2 hours={k}"))[0]
            for k in range(1, planned + 1)]
    idle, _ = await launch(w, bot, "quote h100x8 nodes=2",
                           **{FIELD_IDLE_MINUTES: {FIELD_IDLE_MINUTES: "600"}})
    await _wait_for_stock(w, bot)
    now = datetime.now(UTC)
    async with w.database() as db, db.transaction() as repos:
        watch = await repos.readiness.get(idle)
        assert watch is not None and watch.pattern is None and watch.idle is not None
        digest = await repos.digests.open(GENERAL, now=now)
        await repos.digests.join(digest.id, [idle], now=now)
    assert await bot.stop() == 0
    return runs


async def _started(bot: BotProcess) -> bool:
    return bot.returncode is not None or bool(_LISTENING.search(bot.logs()))


async def _release(w: World, head: str, release: Path) -> BotProcess:
    """The release's `serve` on this world, once it serves or exited."""
    bot = await w.bot(f"release-{head}", env={"PYTHONPATH": str(release)}, wait=False)
    # An import of the whole bot: seconds, minutes on a machine as loaded as CI's can be.
    await wait_for(lambda: _started(bot), within=180, what=f"{head} started")
    return bot


async def _refuses(w: World, head: str, release: Path, cores: asyncio.Semaphore) -> str:
    async with cores:
        bot = await _release(w, head, release)
        code = await bot.wait()
    said = bot.logs().strip()
    assert code == 2 and len(said.splitlines()) == 1, (head, code, said)
    assert "Traceback" not in said, said
    return said


async def _runs(w: World, head: str, release: Path, planned: str, *, first: bool) -> None:
    """Its planned run ends within the next hour: terminated in time, the waiting request
    looked at again, no sweep raised, and a clean stop."""
    bot = await _release(w, head, release)
    [_, looked] = await _waiting(w) or (None, 0)
    # The hour in quarters (the sweeps see each); the first turn a quarter more: the runs
    # became ready a few minutes after the clock's start.
    for _ in range(5 if first else 4):
        await w.advance(15 * 60)
        await wait_for(lambda: bot.running, what=f"{head} still running")
    await wait_for(lambda: _terminated(w, planned), within=180,
                   what=f"{head}: the planned run terminated by its deadline")

    async def looked_again() -> bool:  # still waiting (no stock), and looked at again
        waiting = await _waiting(w)
        return waiting is not None and waiting[1] > looked

    await wait_for(looked_again, within=180, what=f"{head}: the waiting request looked at")
    assert await bot.stop() == 0, bot.logs()[-2000:]
    logs = bot.logs()
    assert "Traceback" not in logs and "raised an exception" not in logs, (head, logs[-3000:])


async def _schema(w: World) -> list[tuple[str, str]]:
    async with w.database() as db, db.engine.connect() as conn:
        return [(str(a), str(b)) for a, b in await conn.execute(sa.text(
            "SELECT v.version_num, c.oldest_compatible FROM alembic_version v "
            "JOIN schema_compat c ON c.revision = v.version_num"))]


@pytest.mark.slow
async def test_each_earlier_release_runs_its_money_duties_on_live_rows_or_refuses(
        tmp_path: Path, database_url: str | None) -> None:
    releases = {head: (commit, _archive(commit, tmp_path / f"release-{head}"))
                for head, commit in RELEASES}
    missing = [commit for commit, where in releases.values() if where is None]
    if missing:
        pytest.skip(f"commits {missing} are not in this clone: fetch its history")
    running = [head for head in releases if must_run(head)]
    refusing = [head for head in releases if not must_run(head)]
    outcome: dict[str, str] = {}
    async with world(tmp_path, database_url=database_url) as w:
        runs = dict(zip(running, await _live_rows(w, len(running)), strict=True))
        before = await _schema(w)
        started = time.monotonic()
        cores = asyncio.Semaphore(2)  # two at a time (2 cores): they only read
        said = await asyncio.gather(*(_refuses(w, head, releases[head][1] or tmp_path, cores)
                                      for head in refusing))
        took = time.monotonic() - started
        assert await _schema(w) == before == [(head_revision(), oldest_compatible(
            head_revision()))]  # nothing changed
        outcome |= {head: f"refuses, exit 2 ({took:.1f} s, together): {line}"
                    for head, line in zip(refusing, said, strict=True)}
        for head in running:
            started = time.monotonic()
            await _runs(w, head, releases[head][1] or tmp_path, runs[head],
                        first=head == running[0])
            outcome[head] = f"runs ({time.monotonic() - started:.1f} s)"
    print("".join(f"\n{head} {releases[head][0]}: {outcome[head]}"  # noqa: T201 (-s)
                  for head in releases))
    assert set(outcome) == set(releases)
