"""Money deadlines on AI Reserve's clock when it runs away from the host's (issue 31), in real
processes (tests/procs/): a bot process and the standalone simulator, whose virtual clock
the test moves by itself — the bot's host clock is left alone (no `w.advance`), as a real
provider's clock that was corrected, or a VM paused and resumed, would be.

Near each deadline the watch sweep's listing gets no answer (AI Reserve answers it 429 with a
long Retry-After, so the bot pauses it): nothing but the money duties themselves can tell the
bot what time it is at AI Reserve. Then:
- an enforced envelope (3 h, or a planned 1 h run) with the clock at 1×, at 10×, and after a
  jump of 70 minutes past an hour mark is terminated in time: billed exactly its hours;
- an idle rule's grace ends at the time the DM stated, before the next hour is charged.

Before issue 31 the estimate stayed where the last answer left it, running at the host's rate:
at 10× the envelope was billed an hour beyond, after the jump it didn't see the deadline at
all, and the idle grace waited for the next log read (a minute of the host's clock).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import pytest
import yaml

from bot.slack.blocks.launch_modal import FIELD_IDLE_DONE
from bot.slack.ids import Action
from tests.e2e.harness import launch_without_ssh
from tests.procs import ALICE, APPROVALS, BOB, GENERAL, BotProcess, World, wait_for, world

# Timed: the bot must act within seconds of wall time while AI Reserve's clock runs fast.
pytestmark = pytest.mark.procs

POLICY = yaml.safe_dump({
    "approvals_channel": APPROVALS, "approvers": {"users": [BOB]},
    "approval": {"auto_approve_below": 10.0, "one_approver_up_to": 100.0},
    "budgets": {"default_user": 100000},
    "limits": {"accelerators": ["h100"], "max_nodes": 4, "max_lifetime_hours": 3,
               "enforce_lifetime": True},
    "idle": {"terminate_after_minutes": 10},
})
MARGIN = timedelta(seconds=1 + 180)  # the envelope's: one poll (1 s here) + the allowance
HOUR = timedelta(hours=1)
TICK = 0.1  # wall seconds between two moves of AI Reserve's clock
STALL = {"status": 429, "retry_after_seconds": 300, "count": 10_000}


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def sim_now(w: World) -> datetime:
    return _at((await w.sim.admin("clock", method="GET"))["now"])


async def move_to(w: World, when: datetime) -> None:
    gap = (when - await sim_now(w)).total_seconds()
    assert gap >= 0, f"the test's clock is already past {when}"
    await w.sim.advance(gap)


async def cluster(w: World, cluster_id: str) -> dict[str, Any]:
    """The cluster as AI Reserve shows it, read by id (the listing may be stalled)."""
    async with aiohttp.ClientSession() as session, session.get(
            f"{w.sim.base_url}/clusters/{cluster_id}",
            headers={"Authorization": f"Bearer {w.sim.api_key}"}) as response:
        assert response.status == 200, await response.text()
        found: dict[str, Any] = await response.json()
    return found


async def launch(w: World, bot: BotProcess, quote: str, **values: Any) -> tuple[str, datetime]:
    """Quote, request (the launch form with `values`), approve, boot: (id, readyAt) once the
    bot has seen it ready."""
    before = {c["id"] for c in await w.sim.clusters()}
    cards = len(w.slack.messages(APPROVALS))
    asked = len(w.slack.ephemerals(ALICE))
    await bot.requests.slash(text=quote, user_id=ALICE, channel_id=GENERAL)
    offer = await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)[asked:]
                                    if Action.QUOTE_REQUEST_LAUNCH in w.text_of(m)],
                           what="the quote")
    await bot.requests.click(offer[-1], Action.QUOTE_REQUEST_LAUNCH, user_id=ALICE)
    shown = w.slack.last_view(ALICE)
    form = await wait_for(lambda: (view := w.slack.last_view(ALICE)) is not shown and view,
                          what="the launch form")
    reply = await bot.requests.submit_view(form, user_id=ALICE,
                                           values={**launch_without_ssh(), **values})
    assert reply.status == 200 and not reply.body, reply.body
    card = await wait_for(lambda: w.slack.messages(APPROVALS)[cards:], what="the card")
    await bot.requests.click(card[-1], Action.APPROVE, user_id=BOB)
    new = await wait_for(lambda: _new(w, before), what="the launch at AI Reserve")
    await w.sim.advance(60)  # the fast profile boots a node in seconds
    ready = await wait_for(lambda: _ready_in_db(w, new), what="the bot seeing it ready")
    return new, ready


async def _new(w: World, before: set[str]) -> str | None:
    return next((c["id"] for c in await w.sim.clusters() if c["id"] not in before), None)


async def _ready_in_db(w: World, cluster_id: str) -> datetime | None:
    async with w.database() as db, db.transaction() as repos:
        record = await repos.clusters.get(cluster_id)
    return record.ready_at if record is not None and record.status.value == "running" \
        else None


async def stall_listing(w: World) -> None:
    """From now on the bot's listing is answered 429 (Retry-After 300 s): once it was (its
    `Date` read: the bot knows AI Reserve's time now), the bot waits before listing again."""
    await w.sim.fault("GET /v1/clusters", **STALL)

    async def refused() -> bool:
        return any(f["remaining"] < STALL["count"] for f in await w.sim.faults())
    await wait_for(refused, what="the bot's listing refused")


async def run_clock(w: World, cluster_id: str, *, rate: float, until: datetime) -> dict[str, Any]:
    """Move AI Reserve's clock `rate` × as fast as the host's until the cluster stops billing
    or the clock reaches `until`; the cluster as AI Reserve shows it then."""
    while True:
        shown = await cluster(w, cluster_id)
        if shown["status"] != "running" or await sim_now(w) >= until:
            return shown
        await asyncio.sleep(TICK)
        await w.sim.advance(rate * TICK)


async def billed_after_all(w: World, cluster_id: str) -> int:
    """Hours AI Reserve charged the cluster, read hours later (nothing more can come)."""
    await w.sim.clear_faults()
    await w.sim.advance(3 * 3600)
    hours: int = (await cluster(w, cluster_id))["billing"]["accruedHours"]
    return hours


async def envelope_case(w: World, bot: BotProcess, *, hours: int, rate: float,
                        jump: bool = False) -> dict[str, Any]:
    quote = "quote h100x8 nodes=2" + (f" hours={hours}" if hours != 3 else "")
    cluster_id, ready = await launch(w, bot, quote)
    end = ready + hours * HOUR
    if jump:  # 70 minutes, past the mark an hour before the end, to 30 s before the end
        start = end - timedelta(seconds=30) - timedelta(minutes=70)
    else:  # from a little before the deadline
        start = end - MARGIN - timedelta(seconds=3 * rate)
    await move_to(w, start)
    await stall_listing(w)
    if jump:
        await w.sim.advance(70 * 60)
    shown = await run_clock(w, cluster_id, rate=rate, until=end + timedelta(seconds=30))
    stopped = await sim_now(w)
    billed = await billed_after_all(w, cluster_id)
    return {"rate": rate, "jump": jump, "billed": billed, "approved": hours,
            "status": shown["status"], "stopped_before_end_s": (end - stopped).total_seconds()}


async def idle_case(w: World, bot: BotProcess) -> dict[str, Any]:
    """The idle rule's done line 10 min 40 s before an hour mark: the policy's grace (10 min)
    ends 40 s before it; the clock runs at 10× from 10 s before the end of the grace."""
    cluster_id, ready = await launch(w, bot, "quote h100x8 nodes=2",
                                     **{FIELD_IDLE_DONE: {FIELD_IDLE_DONE: "training done"}})
    mark = ready + HOUR
    await move_to(w, mark - timedelta(minutes=10, seconds=40))
    await w.sim.admin(f"clusters/{cluster_id}/nodes/0/log", {"line": "training done"})
    said = await sim_now(w)
    ends = await wait_for(lambda: _grace_ends(w, cluster_id), what="the idle DM")
    # The DM's end: the policy's grace after the line, on AI Reserve's clock.
    assert said + timedelta(minutes=10) <= ends < mark, (said, ends, mark)
    await move_to(w, ends - timedelta(seconds=10))
    await stall_listing(w)
    shown = await run_clock(w, cluster_id, rate=10, until=mark + timedelta(seconds=30))
    stopped = await sim_now(w)
    return {"idle": True, "rate": 10, "billed": await billed_after_all(w, cluster_id),
            "approved": 1, "status": shown["status"],
            "late_s": (stopped - ends).total_seconds()}


async def test_money_deadlines_hold_however_fast_ai_reserves_clock_runs(tmp_path):
    async with world(tmp_path) as w:
        # Slack answers at once: what is timed here is AI Reserve's clock, not Slack's pacing.
        bot = await w.bot(policy=POLICY, env={"SLACK_RATE_LIMITS": "off"})
        cases = [await envelope_case(w, bot, hours=1, rate=1),
                 await envelope_case(w, bot, hours=1, rate=10),
                 await envelope_case(w, bot, hours=3, rate=1, jump=True),
                 await idle_case(w, bot)]
        for case in cases:
            assert case["status"] != "running", cases  # ended before the clock ran out
            assert case["billed"] == case["approved"], cases
        for case in cases[:3]:  # not an hour early either: inside the margin before the end
            assert 0 < case["stopped_before_end_s"] <= MARGIN.total_seconds() + 5, cases
        # The idle grace ended when the DM said: within a few polls of AI Reserve's time.
        assert 0 <= cases[3]["late_s"] <= 30, cases


async def _grace_ends(w: World, cluster_id: str) -> datetime | None:
    async with w.database() as db, db.transaction() as repos:
        watch = await repos.readiness.get(cluster_id)
    return None if watch is None else watch.idle_terminate_at
