"""AI Reserve down is not "this replica can't serve" (issue 24, item 4), with real processes.

A bot and a standalone simulator; the simulator is stopped (SIGTERM: every request refused) for
150 s of the bots' controlled clock (CLOCK_OFFSET_FILE, moved in 10 s steps, each step waiting
for the bot's next failed request), longer than the default 120 s unreachable budget. Before,
`/readyz` turned 503 once the budget had passed (and on the sweeping replica after three failed
watch sweeps) and the log had a line per failed sweep run. Now: `/readyz` stays 200 and names
AI Reserve under "degraded"; the outage is a metric (`clusterbot_unreachable_seconds`, for the
alert in ops/alerts.yaml) and two log lines (down, back); a command that needs AI Reserve says
so, one that doesn't answers as usual."""

from __future__ import annotations

import re

import pytest

from tests.procs import ALICE, GENERAL, BotProcess, World, wait_for, world

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)

OUTAGE_SECONDS = 150
STEP_SECONDS = 10
LOUD = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) .*$", re.MULTILINE)


def move_bots_clock(w: World, seconds: float) -> None:
    """The bots' clock only (the simulator is down): what `World.advance` writes."""
    w.advanced += seconds
    tmp = w.clock_file.with_suffix(".tmp")
    tmp.write_text(repr(w.advanced))
    tmp.replace(w.clock_file)


async def provider_failures(bot: BotProcess) -> float:
    """AI Reserve requests this bot sent that got no answer (its /metrics)."""
    _, text = await bot.get("/metrics")
    return sum(float(m[1]) for m in re.finditer(
        r'^clusterbot_provider_requests_total\{[^}]*status="error"[^}]*\} (\S+)$', text,
        re.MULTILINE))


async def metric(bot: BotProcess, name: str, service: str) -> float:
    _, text = await bot.get("/metrics")
    found = re.search(rf'^{name}\{{service="{re.escape(service)}"\}} (\S+)$', text, re.MULTILINE)
    assert found, f"{name}{{service={service!r}}} not in /metrics"
    return float(found[1])


async def test_readyz_stays_green_through_a_150_s_provider_outage_and_says_it_once(tmp_path):
    async with world(tmp_path) as w:
        bot = await w.bot()
        await wait_for(bot.ready, within=60, what="/readyz 200")
        port = w.sim.port
        logged_before = len(bot.logs())

        await w.sim.stop()
        readyz: list[tuple[float, int, list[str]]] = []
        for elapsed in range(0, OUTAGE_SECONDS + 1, STEP_SECONDS):
            if elapsed:
                move_bots_clock(w, STEP_SECONDS)
            seen = await provider_failures(bot)
            await wait_for(lambda seen=seen: _more(bot, seen), within=30,
                           what="a failed AI Reserve request at this step")
            status, body = await bot.get("/readyz")
            readyz.append((elapsed, status, list(body.get("degraded", body.get("reasons", [])))))
        assert [status for _, status, _ in readyz] == [200] * len(readyz), readyz
        [(_, _, degraded)] = readyz[-1:]
        assert [d for d in degraded if d.startswith("AI Reserve: unreachable for ")], readyz
        assert await metric(bot, "clusterbot_unreachable_seconds", "AI Reserve") >= 120
        assert await metric(bot, "clusterbot_reachable", "AI Reserve") == 0

        # Slack's requests are still taken: a command that needs AI Reserve says it isn't
        # answering; one that doesn't answers as usual.
        await bot.requests.slash(text="quote h100x8 nodes=2", user_id=ALICE, channel_id=GENERAL)
        told = await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)
                                       if "AI Reserve isn't answering" in w.text_of(m)],
                              what="the honest answer to a quote")
        assert "try again" in w.text_of(told[-1])
        await bot.requests.slash(text="list", user_id=ALICE, channel_id=GENERAL)
        await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)
                                if "cluster" in w.text_of(m).lower()
                                and "AI Reserve isn't answering" not in w.text_of(m)],
                       what="/cluster list answered")

        await w.sim.start(port=port)  # back where it was: the bot's URL holds
        await wait_for(lambda: "AI Reserve answers again" in bot.logs()[logged_before:],
                       within=60, what="the line saying it is back")
        assert await metric(bot, "clusterbot_reachable", "AI Reserve") == 1
        assert (await bot.get("/readyz"))[0] == 200
        said = [m.group(0) for m in LOUD.finditer(bot.logs()[logged_before:])]
        assert len(said) == 1 and "AI Reserve: unreachable for" in said[0], said  # once
        assert "AI Reserve answers again" in bot.logs()[logged_before:]  # back: one INFO


async def _more(bot: BotProcess, seen: float) -> bool:
    return await provider_failures(bot) > seen
