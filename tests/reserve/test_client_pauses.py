"""Backoff that obeys: a Retry-After pauses its route across calls (and so across sweeps), a
`RateLimit` at r=0 is waited out before the next call instead of spending a 429, and the pause is
per route. Against the scripted fake server, which records every request that reached it."""

from __future__ import annotations

import pytest

from bot.reserve import errors as e
from bot.reserve.pauses import PAUSED, rate_limit_items, route_of
from tests.reserve.conftest import cluster_json, error_body

ACCOUNT = {"balanceCents": 100, "paymentStatus": "current", "paymentGraceSeconds": 3600}
PAGE = {"data": [cluster_json()], "nextCursor": None}


def test_routes_fold_ids_and_rate_limit_items_parse():
    assert route_of("GET", "/clusters/clu_9xQe/logs") == "GET /clusters/{id}/logs"
    assert route_of("get", "/clusters") == "GET /clusters"
    assert rate_limit_items('"quote";r=0;t=37, "minute";r=119;t=60') == [
        ("quote", 0, 37.0), ("minute", 119, 60.0)]
    assert rate_limit_items('garbage;;, "x";r=a;t=, ') == [("x", None, None)]
    assert rate_limit_items(None) == []


async def test_a_long_retry_after_pauses_the_route_across_calls(fake_api, make_client, clock):
    fake_api.reply("GET", "/clusters",
                   (429, error_body("rate_limited", 429), {"Retry-After": "120"}), (200, PAGE))
    fake_api.reply("GET", "/account", (200, ACCOUNT))
    client = make_client()
    with pytest.raises(e.RateLimited):  # 120 s: more than a call waits; raised at once
        await client.list_clusters()
    for seconds in (5, 5, 5):  # the next sweeps, 5, 10, 15 s later
        clock.advance(seconds)
        with pytest.raises(e.RateLimited) as paused:
            await client.list_clusters()
        assert paused.value.details["window"] == PAUSED
    assert len(fake_api.requests("GET", "/clusters")) == 1  # none of them was sent
    await client.get_account()  # another route is not paused

    clock.advance(120 - 15)
    assert [c.id for c in await client.list_clusters()] == ["clu_1"]
    assert len(fake_api.requests("GET", "/clusters")) == 2


async def test_rate_limit_exhausted_is_waited_out_before_sending(fake_api, make_client,
                                                                  sleeps):
    fake_api.reply("GET", "/account",
                   (200, ACCOUNT, {"RateLimit": '"minute";r=0;t=30'}),
                   (200, ACCOUNT, {"RateLimit": '"minute";r=119;t=60'}))
    client = make_client()
    await client.get_account()
    await client.get_account()  # waited 30 s first, then sent: no 429 spent
    assert sleeps.delays == [30.0]
    assert len(fake_api.requests("GET", "/account")) == 2

    strict = make_client(max_retries=0)  # may not wait: refused locally instead
    fake_api.reply("GET", "/account", (200, ACCOUNT, {"RateLimit": '"minute";r=0;t=30'}))
    await strict.get_account()
    with pytest.raises(e.RateLimited) as refused:
        await strict.get_account()
    assert refused.value.details["window"] == PAUSED and refused.value.retry_after == 30.0
    assert len(fake_api.requests("GET", "/account")) == 3


async def test_a_quota_policy_pauses_every_route_it_applies_to(fake_api, make_client, clock):
    header = {"RateLimit": '"minute";r=0;t=40'}
    fake_api.reply("GET", "/clusters", (200, PAGE, header))
    fake_api.reply("GET", "/clusters/clu_1", (200, cluster_json(), header))
    client = make_client(max_retries=0)
    await client.get_cluster("clu_1")  # learns clu routes answer to "minute"
    await client.list_clusters()
    with pytest.raises(e.RateLimited):
        await client.get_cluster("clu_2")  # another cluster, same route, same policy
    clock.advance(40)
    fake_api.reply("GET", "/clusters/clu_2", (200, cluster_json("clu_2")))
    assert (await client.get_cluster("clu_2")).id == "clu_2"


async def test_against_the_simulators_limits_the_client_never_spends_a_429():
    import aiohttp

    from aireserve_sim.config import SimConfig
    from aireserve_sim.embedded import EmbeddedSimulator
    from bot.clock import ManualClock
    from bot.reserve.client import AsyncAIReserveClient
    from tests.reserve.conftest import API_KEY, START

    statuses: list[int] = []

    async def on_end(session, context, params) -> None:
        statuses.append(params.response.status)

    trace = aiohttp.TraceConfig()
    trace.on_request_end.append(on_end)
    clock = ManualClock(START)
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)
        clock.advance(seconds)

    config = SimConfig.fast().model_copy(update={"rate_limits": True})
    async with EmbeddedSimulator(config, clock) as sim, \
            aiohttp.ClientSession(trace_configs=[trace]) as session:
        client = AsyncAIReserveClient(session, sim.base_url, API_KEY, clock=clock, sleep=sleep)
        quotes = [await client.quote_cluster("h100-sxm-80gb", 8, 2) for _ in range(65)]
    assert len({q.id for q in quotes}) == 65  # 30 a minute allowed: two windows waited out
    assert 429 not in statuses and len(statuses) == 65  # every request sent once, none refused
    assert len(waited) == 2 and all(0 < w <= 60 for w in waited)
