"""Rolling upgrades both ways, as real processes on one PostgreSQL database.

THIS build and the NEXT one (this tree plus an expand migration marked compatible, built at test
time: tests/releases.py says why not main's previous release) run side by side with two live
clusters: replicas are replaced one at a time by the next release (which migrates while this
build's replicas serve), an old replica restarts on the migrated schema (before: it died on
`Can't locate revision`), then everything is rolled back to this build on the next release's
schema. Every hour each cluster's reminder is posted once; at the end no post was made twice,
every cluster is still tracked and nothing waits undelivered. And a contract migration (marked
incompatible) is refused by this build with one line and exit 2, the database untouched.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable
from typing import Any

import pytest
import sqlalchemy as sa

from bot.slack.ids import Action
from storage.migrations import head_revision
from tests.e2e.harness import launch_without_ssh
from tests.procs import ALICE, APPROVALS, BOB, GENERAL, BotProcess, World, wait_for, world
from tests.releases import NEXT_REVISION, next_release

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)


def _text(message: Any) -> str:
    return str(message.text) + str(message.blocks)


async def _scalar(w: World, sql: str) -> Any:
    async with w.database() as db, db.engine.connect() as conn:
        return (await conn.execute(sa.text(sql))).scalar()


def _reminders(w: World) -> int:
    return sum(1 for m in w.slack.dms(ALICE) if Action.KEEP_RUNNING in _text(m))


async def _an_hour(w: World, *, clusters: int) -> None:
    """An hour passes: every live cluster's reminder is posted (once: counted at the end)."""
    seen = _reminders(w)
    await w.advance(3600)
    await wait_for(lambda: _reminders(w) >= seen + clusters, within=40,
                   what=f"{clusters} reminders after an hour")


async def _launch(w: World, requester: BotProcess, approver: BotProcess, *, clusters: int,
                  text: str) -> None:
    """A launch requested on one replica and approved on another, up to its SSH details."""
    card = await _request(w, requester, text=text)
    await approver.requests.click(card, Action.APPROVE, user_id=BOB)
    await wait_for(lambda: _len_at_least(w.sim.clusters(), clusters),
                   what=f"{clusters} clusters at AI Reserve")
    await w.advance(120)
    await wait_for(lambda: sum("ssh -p" in _text(m) for m in w.slack.dms(ALICE)) >= clusters,
                   within=40, what=f"SSH details of {clusters} clusters")


async def _request(w: World, bot: BotProcess, *, text: str) -> Any:
    """As World.request_launch, waiting for THIS quote (not an earlier launch's)."""
    def quotes() -> list[Any]:
        return [m for m in w.slack.ephemerals(ALICE) if Action.QUOTE_REQUEST_LAUNCH in _text(m)]

    seen, cards = len(quotes()), len(w.slack.messages(APPROVALS))
    await bot.requests.slash(text=text, user_id=ALICE, channel_id=GENERAL)
    quote = (await wait_for(lambda: quotes()[seen:], what=f"the quote {text!r}"))[-1]
    before = w.slack.last_view(ALICE)
    await bot.requests.click(quote, Action.QUOTE_REQUEST_LAUNCH, user_id=ALICE)
    modal = await wait_for(lambda: (view := w.slack.last_view(ALICE)) is not before and view,
                           what="the request modal")
    reply = await bot.requests.submit_view(modal, user_id=ALICE, values=launch_without_ssh())
    assert reply.status == 200 and not reply.body, reply.body
    return (await wait_for(lambda: w.slack.messages(APPROVALS)[cards:],
                           what="the approval card"))[-1]


async def _len_at_least(found: Any, n: int) -> bool:
    return len(await found) >= n


async def _ready(bot: BotProcess) -> None:
    async def ready() -> bool:
        status, _ = await bot.get("/readyz")
        return status == 200

    await wait_for(ready, within=30, what=f"{bot.name} ready")


@pytest.mark.slow
async def _none(count: Awaitable[int]) -> bool:
    return await count == 0


@pytest.mark.postgres
async def test_an_upgrade_and_a_rollback_side_by_side_lose_nothing_and_post_nothing_twice(
        tmp_path, pg_url):
    nxt = {"PYTHONPATH": str(next_release(tmp_path))}
    async with world(tmp_path, database_url=pg_url) as w:
        old1, old2 = await w.bot("old1"), await w.bot("old2")
        await _launch(w, old1, old2, clusters=1, text="quote h100x8 nodes=2")
        assert await _scalar(w, "SELECT version_num FROM alembic_version") == head_revision()

        # Upgrade, one replica at a time: the next release migrates while old2 serves.
        assert await old1.stop() == 0
        new1 = await w.bot("new1", env=nxt)
        assert await _scalar(w, "SELECT version_num FROM alembic_version") == NEXT_REVISION
        await _ready(old2)  # this build, on the next release's schema: ready, not "migrations"
        assert await old2.stop() == 0  # an old replica restarting mid-roll (the crash before)
        await old2.start()
        assert "ahead of this build" in old2.logs() and "Can't locate" not in old2.logs()
        await _ready(old2)
        await _an_hour(w, clusters=1)
        await _launch(w, old2, new1, clusters=2, text="quote h100x8 nodes=3")
        assert await old2.stop() == 0
        new2 = await w.bot("new2", env=nxt)
        await _an_hour(w, clusters=2)

        # Rollback, one replica at a time: this build again, on the next release's schema.
        assert await new1.stop() == 0
        back1 = await w.bot("back1")
        await _an_hour(w, clusters=2)
        assert await new2.stop() == 0
        back2 = await w.bot("back2")
        await _ready(back2)
        await _an_hour(w, clusters=2)
        assert await _scalar(w, "SELECT version_num FROM alembic_version") == NEXT_REVISION
        await back1.requests.slash(text="list", user_id=ALICE, channel_id=GENERAL)

        # Nothing lost: both clusters tracked and running; nothing waits undelivered.
        provider = {c["id"] for c in await w.sim.clusters()}
        assert len(provider) == 2
        async with w.database() as db, db.engine.connect() as conn:
            tracked = {cid for (cid,) in await conn.execute(
                sa.text("SELECT id FROM clusters WHERE status = 'running'"))}
        assert tracked == provider
        # (The delivery sweep sends what the others stored within about a second: wait for it.)
        async def undelivered() -> int:
            return int(await _scalar(w, "SELECT (SELECT count(*) FROM notices WHERE delivered_at "
                                     "IS NULL) + (SELECT count(*) FROM outbox WHERE delivered_at "
                                     "IS NULL)"))

        await wait_for(lambda: _none(undelivered()), what="nothing waiting undelivered")
        await asyncio.sleep(2)  # real time: a straggling replica would post now
        # Nothing posted twice: every post Slack accepted, by (channel, thread, text).
        posts = [c for c in w.slack.calls_to("chat.postMessage") if c.ok]
        keys = Counter((c.response.get("channel"), c.args.get("thread_ts"), c.args.get("text"))
                       for c in posts)
        assert [text for (_, _, text), n in keys.items() if n > 1] == []
        assert _reminders(w) == 1 + 2 * 3  # one per cluster per hour, across every swap


# Exit codes and what the database holds, no wall-clock bound: the restarts lane (which also
# balances the two lanes' lengths: tests/conftest.py).
@pytest.mark.procs(lane="restarts")
@pytest.mark.postgres
async def test_this_build_refuses_a_database_ahead_by_an_incompatible_revision(tmp_path,
                                                                               pg_url):
    contract = {"PYTHONPATH": str(next_release(tmp_path, compatible=False))}
    async with world(tmp_path, database_url=pg_url) as w:
        bot = await w.bot("bot")
        assert await bot.stop() == 0
        migrate = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "migrate", env=bot.env | contract, cwd=tmp_path)
        assert await migrate.wait() == 0
        before = await _scalar(w, "SELECT oldest_compatible FROM schema_compat")
        assert before == NEXT_REVISION
        offset = len(bot.logs())
        await bot.start(wait=False)
        assert await bot.wait() == 2
        said = bot.logs()[offset:].strip().splitlines()
        assert said == [f"cluster-bot: the database is at revision {NEXT_REVISION}, which this "
                        f"build (head {head_revision()}) doesn't know, and it needs code at "
                        f"revision {NEXT_REVISION} or newer: run that release or a newer one "
                        "(`cluster-bot db status` tells more); nothing was changed"], said
        for argv, code in ((["db", "status"], 2), (["migrate"], 2)):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", *argv, env=bot.env, cwd=tmp_path,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            assert proc.returncode == code, (argv, out, err)
            assert b"Traceback" not in err, err
        assert await _scalar(w, "SELECT version_num FROM alembic_version") == NEXT_REVISION
        assert await _scalar(w, "SELECT oldest_compatible FROM schema_compat") == before
