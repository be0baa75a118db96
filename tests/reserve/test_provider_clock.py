"""AI Reserve's clock decides provider deadlines: the `Date` header of every answer sets the
bot's estimate of the provider's time (bot.clock.ProviderClock, fed by Transport.send); the
simulator stamps its engine clock there, and its standalone virtual clock starts at the wall
clock's time."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import aiohttp
import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from aireserve_sim.standalone import add_arguments, build
from bot.clock import ManualClock, ProviderClock, SystemClock
from bot.reserve.client import AsyncAIReserveClient

T0 = datetime(2026, 11, 29, 10, 0, 0, 250_000, tzinfo=UTC)


def http_date(when: datetime) -> str:
    return format_datetime(when.astimezone(UTC), usegmt=True)


def test_the_offset_is_read_off_the_date_header_to_the_second():
    host = ManualClock(T0)
    clock = ProviderClock(host)
    assert clock.now() == T0  # nothing heard yet: the host's time
    clock.observe(http_date(T0 + timedelta(minutes=20)), sent_at=T0)
    # 10:20:00 (truncated) + 0.5 s, seen at 10:00:00.25: the offset is 20 min + 0.25 s.
    assert clock.offset == timedelta(minutes=20, milliseconds=250)
    host.advance(3600)
    assert clock.now() == T0 + timedelta(hours=1, minutes=20, milliseconds=250)
    assert clock.host_now() == T0 + timedelta(hours=1)


def test_a_slow_host_and_the_round_trip():
    host = ManualClock(T0)
    clock = ProviderClock(host)
    sent = host.now()
    host.advance(4)  # a 4 s exchange: the provider's Date was taken half-way
    clock.observe(http_date(T0 - timedelta(minutes=20) + timedelta(seconds=2)), sent_at=sent)
    assert abs(clock.offset + timedelta(minutes=20)) <= timedelta(seconds=1)


@pytest.mark.parametrize("header", [None, "", "yesterday", "Sun, 29 Nov 2026 10:00:00"])
def test_a_missing_or_bad_date_changes_nothing(header):
    clock = ProviderClock(ManualClock(T0))
    clock.observe(http_date(T0 + timedelta(minutes=5)), sent_at=T0)
    before = clock.offset
    clock.observe(header, sent_at=T0)
    assert clock.offset == before


def test_under_a_second_is_not_measurable_and_does_not_jitter():
    host = ManualClock(T0)
    clock = ProviderClock(host)
    for fraction in (0, 0.3, 0.6, 0.9):
        host.set(T0 + timedelta(seconds=fraction + 1))
        clock.observe(http_date(host.now()), sent_at=host.now())
        assert clock.offset == timedelta()


@pytest.mark.parametrize("skew_minutes", [20, -20])
async def test_the_client_learns_the_simulators_clock_from_every_answer(skew_minutes):
    sim_clock = ManualClock(T0)
    host = ManualClock(T0 + timedelta(minutes=skew_minutes))
    clock = ProviderClock(host)
    async with EmbeddedSimulator(SimConfig.fast(), sim_clock) as sim, \
            aiohttp.ClientSession() as session:
        client = AsyncAIReserveClient(session, sim.base_url, "k", clock=clock)
        await client.list_locations()
        assert abs(clock.now() - sim_clock.now()) <= timedelta(seconds=1)
        quote = await client.quote_cluster("h100-sxm-80gb", 8, 2)
        assert clock.now() < quote.expires_at  # valid on the provider's clock
        sim_clock.advance(7200)
        host.advance(7200)
        await client.list_locations()
        assert abs(clock.now() - sim_clock.now()) <= timedelta(seconds=1)


async def test_the_simulator_stamps_its_engine_clock_in_date():
    sim_clock = ManualClock(T0)
    async with EmbeddedSimulator(SimConfig.fast(), sim_clock) as sim, \
            aiohttp.ClientSession() as session:
        for path in ("/account", "/clusters/clu_nope"):  # errors carry it too
            async with session.get(sim.base_url + path,
                                   headers={"Authorization": "Bearer k"}) as reply:
                assert reply.headers["Date"] == "Sun, 29 Nov 2026 10:00:00 GMT"


def test_the_standalone_virtual_clock_starts_at_the_wall_clock():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    sim = build(parser.parse_args(["--virtual-clock", "--port", "0"]))
    assert isinstance(sim.clock, ManualClock)
    assert abs(sim.clock.now() - SystemClock().now()) < timedelta(minutes=1)
