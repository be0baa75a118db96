"""Money deadlines on a fresh reading of AI Reserve's clock (bot/services/provider_time.py, issue
31): a cheap call's `Date` is read only when no answer came since the decision before; and the
cluster's own bill is a floor under the estimate (bot/domain/envelope.py `proven_now`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from bot.clock import ManualClock, ProviderClock
from bot.domain.envelope import margin_for, next_stage, proven_now
from bot.domain.models import ClusterState
from bot.reserve.errors import ServiceUnavailable
from bot.services.provider_time import ProviderTime
from tests.domain import make_cluster

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


class Reserve:
    """AI Reserve's clock and its /health: each call's answer is read by the ProviderClock."""

    def __init__(self, clock: ProviderClock, host: ManualClock) -> None:
        self.time, self.clock, self.host, self.calls = ManualClock(T0), clock, host, 0
        self.down = False

    async def health(self) -> None:
        self.calls += 1
        if self.down:
            raise ServiceUnavailable("down")
        self.clock.observe(format_datetime(self.time.now(), usegmt=True),
                           sent_at=self.host.now())


def record_at(*, ready: datetime, hours: int, accrued: int):  # type: ignore[no-untyped-def]
    return make_cluster(ready_at=ready, lifetime_hours=hours).model_copy(
        update={"accrued_hours": accrued})


def world() -> tuple[ManualClock, ProviderClock, Reserve, ProviderTime]:
    host = ManualClock(T0)
    clock = ProviderClock(host)
    reserve = Reserve(clock, host)
    return host, clock, reserve, ProviderTime(clock=clock, provider=reserve)  # type: ignore[arg-type]


async def test_no_answer_since_the_last_decision_means_a_read_before_deciding():
    host, clock, reserve, time = world()
    first = await time.now(since=None)  # never read: read now
    assert reserve.calls == 1 and abs(first - T0) <= timedelta(seconds=1)
    decided = host.now()
    host.advance(1)
    reserve.time.advance(70 * 60)  # AI Reserve's clock jumped; nothing answered since
    assert abs(await time.now(since=decided) - reserve.time.now()) <= timedelta(seconds=1)
    assert reserve.calls == 2


async def test_an_answer_since_the_last_decision_is_enough():
    host, clock, reserve, time = world()
    await time.now(since=None)
    decided = host.now()
    host.advance(1)
    await reserve.health()  # another sweep's answer (the listing) came after the decision
    await time.now(since=decided)
    assert reserve.calls == 2 and time.reads == 1


async def test_a_failed_read_decides_on_the_estimate():
    host, clock, reserve, time = world()
    reserve.down = True
    assert await time.now(since=None) == host.now()
    assert time.reads == 1


async def test_an_exact_clock_is_never_read():
    host = ManualClock(T0)
    time = ProviderTime(clock=host, provider=None)  # type: ignore[arg-type]
    assert await time.now(since=None) == T0 and time.reads == 0


def test_a_bill_showing_an_hour_beyond_the_envelope_ends_it_whatever_the_estimate():
    ready = T0
    record = record_at(ready=ready, hours=3, accrued=4)
    stale = ready + timedelta(hours=1)  # the estimate: two hours behind
    margin = margin_for(timedelta(seconds=30))
    assert next_stage(record, now=stale, enforce=True, margin=margin) is None
    now = proven_now(record, stale)
    assert now == ready + timedelta(hours=3)
    assert next_stage(record, now=now, enforce=True, margin=margin) == "enforced"
    # The envelope's own hours charged say only that the last hour has begun: not its end.
    within = record_at(ready=ready, hours=3, accrued=3)
    assert proven_now(within, stale) == ready + timedelta(hours=2)
    assert next_stage(within, now=proven_now(within, stale), enforce=True,
                      margin=margin) == "final"
    assert record.status is ClusterState.RUNNING
