"""A bot whose host clock is 20 minutes fast, and one 20 minutes slow, against the simulator:
AI Reserve's clock (its `Date` header) decides the provider's deadlines, so no valid quote is
refused and no envelope is billed beyond its approved hours."""

from __future__ import annotations

from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.e2e.harness import BOB, START, bot, fake_slack
from tests.e2e.test_policy import policy


class SkewedClock(ManualClock):
    """The bot host's clock: AI Reserve's (virtual) time plus a fixed error; moves with it."""

    def __init__(self, base: ManualClock, skew: timedelta) -> None:
        super().__init__(base.now())
        self._base, self._skew = base, skew

    def now(self) -> datetime:
        return self._base.now() + self._skew

    def advance(self, seconds: float) -> datetime:
        return self._base.advance(seconds) + self._skew

    def set(self, when: datetime) -> None:
        self._base.set(when - self._skew)


@asynccontextmanager
async def launched(tmp_path, provider_time: ManualClock, host: ManualClock):
    """A bot on `host`'s clock against AI Reserve on `provider_time`, with a 3-hour envelope
    enforced; a 2-node launch approved. Yields the simulator, the harness, the request."""
    limits = {"accelerators": ["h100"], "max_nodes": 4, "max_lifetime_hours": 3,
              "enforce_lifetime": True}
    async with EmbeddedSimulator(SimConfig.fast(), provider_time) as sim, \
            fake_slack(host) as slack, \
            bot(tmp_path, slack=slack, sim=sim, clock=host, policy=policy(limits=limits)) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")
        await h.click(card, Action.APPROVE, user=BOB)
        [request] = await h.requests_in_db()
        yield sim, h, request


@pytest.mark.parametrize("skew_minutes", [20, -20])
async def test_a_skewed_bot_launches_a_valid_quote_and_ends_its_envelope_in_time(
        tmp_path, skew_minutes):
    provider_time = ManualClock(START)
    host = SkewedClock(provider_time, timedelta(minutes=skew_minutes))
    async with launched(tmp_path, provider_time, host) as (sim, h, request):
        # Launched from the quote that was approved: not refused as expired, not re-priced.
        assert request.status is RequestStatus.LAUNCHED, request.last_error
        assert request.previous_hourly_cents is None and len(h.cards()) == 1
        cluster_id = request.cluster_id
        assert cluster_id is not None
        await h.advance(60)
        ready = sim.engine.get_cluster(cluster_id).ready_at
        assert ready is not None
        margin = h.rt.services.envelopes.margin
        for at in (timedelta(hours=2), timedelta(hours=3) - margin - timedelta(seconds=1),
                   timedelta(hours=3) - margin, timedelta(hours=3) - timedelta(seconds=1)):
            provider_time.set(ready + at)
            await h.rt.services.watching.sync_live()
            await h.rt.services.envelopes.sweep()
            await h.rt.settle()
            running = sim.engine.get_cluster(cluster_id).status.value == "running"
            assert running == (at < timedelta(hours=3) - margin), at
        provider_time.set(ready + timedelta(hours=5))
        assert sim.engine.get_cluster(cluster_id).billing.accrued_hours == 3



async def test_the_envelope_sweep_reads_ai_reserves_clock_when_no_answer_came_since(tmp_path):
    """Issue 31: AI Reserve's clock jumps 70 minutes, past an hour mark and past the envelope's
    deadline, while the host's moves a second and no answer has told the bot (no listing
    since): the envelope sweep reads the clock itself (GET /health) and terminates before the
    hour beyond the envelope is charged. Before, it judged on the estimate: 70 minutes behind."""
    provider_time, host = ManualClock(START), ManualClock(START)  # moved apart below
    async with launched(tmp_path, provider_time, host) as (sim, h, request):
        cluster_id = request.cluster_id
        assert cluster_id is not None
        for clock in (provider_time, host):
            clock.advance(60)
        ready = sim.engine.get_cluster(cluster_id).ready_at
        assert ready is not None
        envelopes, watching = h.rt.services.envelopes, h.rt.services.watching
        provider_time.set(ready + timedelta(hours=1, minutes=49, seconds=30))
        await watching.sync_live()  # the last answer before the jump: hour 2 charged
        assert await envelopes.sweep() == 0
        host.advance(1)
        provider_time.advance(70 * 60)  # past the mark at 2 h, 30 s before the one at 3 h
        assert await envelopes.sweep() == 1
        assert sim.engine.get_cluster(cluster_id).status.value == "terminating"
        provider_time.set(ready + timedelta(hours=5))
        assert sim.engine.get_cluster(cluster_id).billing.accrued_hours == 3
