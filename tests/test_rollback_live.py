"""The release before is a way back, with live rows (issue 26 item 2): THIS build writes what
only it writes — a planned run (an envelope that ends in termination) with an idle rule and no
readiness pattern (an idle-only readiness row: `pattern` NULL, state `none`), a request waiting
for stock (status `waiting`), an open digest — then the release an operator would roll back
to (the last entry of tests/releases.py RELEASES: its `bot/` and `storage/` from git history)
is started on that database, and so is the newest release the schema turns away. Each either

- refuses: exit 2, one line, no traceback, nothing changed; or
- runs and does its money duties: the planned run is terminated at AI Reserve before its hour
  is up (AI Reserve's clock held inside the envelope's margin: billed exactly its hour), the
  waiting request is looked at again (the stock sweep), and no sweep raises on the new values
  (a status or a NULL the old code never wrote).

Which of the two is not the release's choice: the schema records the oldest code that may run
on it (storage/migrations' markers, `schema_compat`); a release older than that must refuse,
a newer one must run. Every release's `db status` and `migrate` on this schema:
tests/test_rollback_releases.py; forward from each: tests/test_upgrade_releases.py. On SQLite
and PostgreSQL, one world each (tests/procs/)."""

from __future__ import annotations

import re
import time
from datetime import timedelta
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
from tests.test_money_clock_process import HOUR, MARGIN, billed_after_all, launch, sim_now
from tests.test_rollback_releases import _archive

# Exit codes and what AI Reserve billed, no wall-clock bound (AI Reserve's clock stands still
# while the release acts): the restarts lane (tests/conftest.py).
pytestmark = [pytest.mark.procs(lane="restarts"), pytest.mark.slow]
_LISTENING = re.compile(r"listening for Slack on ")
POLICY = yaml.safe_dump({"approvals_channel": APPROVALS, "approvers": {"users": [BOB]},
                         "limits": {"max_lifetime_hours": 24}})
STOCK = {"accelerator": "h100-sxm-80gb", "location": "us-tx"}
FAST_SLACK = {"SLACK_RATE_LIMITS": "off"}  # FakeSlack has none: each post at once
PREVIOUS = RELEASES[-1]  # what an operator rolls back to
# The newest release this build's schema turns away (or the oldest listed, if none must).
TURNED_AWAY = next((r for r in reversed(RELEASES) if not must_run(r[0])), RELEASES[0])


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


async def _live_rows(w: World) -> tuple[str, timedelta]:
    """This build writes the rows older code never wrote; returns the planned run (1 h) and
    how far AI Reserve's clock is from its end."""
    bot = await w.bot("this-build", policy=POLICY, env=FAST_SLACK)
    # One cluster for both: a planned hour with an idle rule and no readiness pattern.
    run, ready = await launch(w, bot, "quote h100x8 nodes=2 hours=1",
                              **{FIELD_IDLE_MINUTES: {FIELD_IDLE_MINUTES: "600"}})
    await _wait_for_stock(w, bot)
    now = await sim_now(w)
    async with w.database() as db, db.transaction() as repos:
        watch = await repos.readiness.get(run)
        assert watch is not None and watch.pattern is None and watch.idle is not None
        digest = await repos.digests.open(GENERAL, now=now)
        await repos.digests.join(digest.id, [run], now=now)
    assert await bot.stop() == 0
    return run, ready + HOUR - now


async def _releases(w: World, releases: dict[str, Path]) -> dict[str, BotProcess]:
    """Each release's `serve` on this world, started together; once each serves or exited."""
    bots = {head: await w.bot(f"release-{head}", wait=False,
                              env={**FAST_SLACK, "PYTHONPATH": str(release)})
            for head, release in releases.items()}

    def started() -> bool:
        return all(bot.returncode is not None or _LISTENING.search(bot.logs())
                   for bot in bots.values())
    # An import of the whole bot each: seconds, a minute on a machine as loaded as CI's can be.
    await wait_for(started, within=120, what=f"{', '.join(bots)} started")
    return bots


async def _refuses(bot: BotProcess) -> str:
    code = await bot.wait()
    said = bot.logs().strip()
    assert code == 2 and len(said.splitlines()) == 1, (bot.name, code, said)
    assert "Traceback" not in said, said
    return said


async def _runs(w: World, bot: BotProcess, planned: str, left: timedelta) -> str:
    """Its money duties on this build's rows: the planned run terminated before its hour is
    up, the waiting request looked at again, no sweep raised, a clean stop."""
    assert bot.returncode is None, bot.logs()
    [_, looked] = await _waiting(w) or (None, 0)
    # Both clocks to inside the envelope's margin, short of the hour's end; AI Reserve's clock
    # then stands still: only a release that ends the run by its deadline gets past this.
    await w.advance((left - MARGIN + timedelta(seconds=30)).total_seconds())
    await wait_for(lambda: _terminated(w, planned), within=120,
                   what=f"{bot.name}: the planned run terminated by its deadline")

    async def looked_again() -> bool:  # still waiting (no stock), and looked at again
        waiting = await _waiting(w)
        return waiting is not None and waiting[1] > looked

    await wait_for(looked_again, within=120, what=f"{bot.name}: the waiting request looked at")
    assert await bot.stop() == 0, bot.logs()[-2000:]
    logs = bot.logs()
    assert "Traceback" not in logs and "raised an exception" not in logs, logs[-3000:]
    billed = await billed_after_all(w, planned)
    assert billed == 1, f"{bot.name}: the planned 1 h run was billed {billed} h"
    return "runs: the planned run ended in its hour (billed 1 h), the waiting request looked at"


async def _schema(w: World) -> list[tuple[str, str]]:
    async with w.database() as db, db.engine.connect() as conn:
        return [(str(a), str(b)) for a, b in await conn.execute(sa.text(
            "SELECT v.version_num, c.oldest_compatible FROM alembic_version v "
            "JOIN schema_compat c ON c.revision = v.version_num"))]


async def test_the_previous_release_runs_its_money_duties_on_live_rows_or_refuses(
        tmp_path: Path, empty_database_url: str | None) -> None:
    releases = {head: (commit, _archive(commit, tmp_path / f"release-{head}"))
                for head, commit in (PREVIOUS, TURNED_AWAY)}
    missing = [commit for commit, where in releases.values() if where is None]
    if missing:
        pytest.skip(f"commits {missing} are not in this clone: fetch its history")
    assert not must_run(TURNED_AWAY[0]), "no listed release is turned away: pick another"
    outcome: dict[str, str] = {}
    started = time.monotonic()
    async with world(tmp_path, database_url=empty_database_url) as w:
        planned, left = await _live_rows(w)
        before = await _schema(w)
        assert before == [(head_revision(), oldest_compatible(head_revision()))]
        # Both start together (one import each, side by side); the turned-away one only reads.
        bots = await _releases(w, {head: where or tmp_path
                                   for head, (_, where) in releases.items()})
        turned_away = bots.pop(TURNED_AWAY[0])
        outcome[TURNED_AWAY[0]] = f"refuses, exit 2: {await _refuses(turned_away)}"
        previous = bots[PREVIOUS[0]]
        if must_run(PREVIOUS[0]):
            outcome[PREVIOUS[0]] = await _runs(w, previous, planned, left)
        else:
            outcome[PREVIOUS[0]] = f"refuses, exit 2: {await _refuses(previous)}"
        assert await _schema(w) == before  # neither changed the schema
    print("".join(f"\n{head} {releases[head][0]}: {said}"  # noqa: T201 (-s)
                  for head, said in outcome.items()),
          f"\n{time.monotonic() - started:.1f} s wall")

