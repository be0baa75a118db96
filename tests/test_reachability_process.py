"""A real bot process: `/readyz` names AI Reserve or Slack under "degraded" when it stops
answering (5xx, no answer) for longer than UNREACHABLE_BUDGET_SECONDS — still 200: the replica
takes Slack's requests (issue 24, item 4) — and no longer once they answer again; a backlog
(429s with Retry-After) is never named. Slack is idle here: what finds out is the
bot's idle probe (`auth.test`); AI Reserve is called by the watch sweep every poll."""

from __future__ import annotations

import pytest

from tests.procs import BotProcess, wait_for, world

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)

BUDGET = {"UNREACHABLE_BUDGET_SECONDS": "2"}


async def reasons(bot: BotProcess, about: str) -> list[str]:
    """What /readyz says is degraded about `about` (the replica stays ready)."""
    status, body = await bot.get("/readyz")
    assert status == 200, body
    return [r for r in body.get("degraded", []) if r.startswith(about)]


async def ready(bot: BotProcess) -> bool:
    return (await bot.get("/readyz")) == (200, {"ready": True})


async def test_readyz_names_ai_reserve_and_slack_down_but_not_their_backlogs(tmp_path):
    async with world(tmp_path) as w:
        bot = await w.bot(env=BUDGET)
        await wait_for(lambda: ready(bot), within=60, what="/readyz 200")

        # AI Reserve rate-limits every listing for a while: an answer, not an outage.
        await w.sim.fault("GET /v1/clusters", status=429, retry_after_seconds=1, count=6)
        seen: list[str] = []

        async def backlog_over() -> bool:
            seen.extend(await reasons(bot, "AI Reserve"))
            return not await w.sim.faults()
        await wait_for(backlog_over, within=60, what="six 429s answered")
        assert seen == []

        # It stops answering (503 on every route it calls, its health check included: the
        # bot's idle probe): red once the budget has passed.
        for route in ("GET /v1/clusters", "GET /v1/health"):
            await w.sim.fault(route, status=503, count=10_000)
        [reason] = await wait_for(lambda: reasons(bot, "AI Reserve"), what="AI Reserve degraded")
        assert reason.startswith("AI Reserve: unreachable for ") and "HTTP 503" in reason
        await w.sim.clear_faults()
        await wait_for(lambda: ready(bot), within=30, what="/readyz 200 again")

        # Slack answers the idle probe with 429s: still reachable.
        w.slack.fail_next("auth.test", error="ratelimited", retry_after=1, count=4)

        def limited() -> int:
            return sum(c.status == 429 for c in w.slack.calls_to("auth.test"))

        async def slack_backlog_over() -> bool:
            seen.extend(await reasons(bot, "slack"))
            return limited() >= 4
        await wait_for(slack_backlog_over, within=60, what="four 429s from auth.test")
        assert seen == []

        # Slack answers 503 (each probe, and its retries) until the budget has passed.
        w.slack.fail_next("auth.test", error="service_unavailable", status=503, count=10_000)
        [reason] = await wait_for(lambda: reasons(bot, "slack"), what="Slack degraded")
        assert reason.startswith("slack: unreachable for ") and "HTTP 503" in reason
        w.slack.clear_faults("auth.test")
        await wait_for(lambda: ready(bot), within=60, what="/readyz 200 once Slack answers")
        assert (await bot.get("/healthz"))[0] == 200  # liveness never followed them
