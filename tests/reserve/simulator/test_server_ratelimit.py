"""Rate limits on the engine's virtual clock (contract §7): 120/min overall, 30/min quotes,
10/min launches; 429 with Retry-After and the envelope's retryAfterSeconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest_asyncio

from aireserve_sim.config import SimConfig
from aireserve_sim.ratelimit import LAUNCH, OVERALL, QUOTE, RateLimiter
from tests.reserve.simulator.conftest import SHAPE, Api, assert_error


@pytest_asyncio.fixture
async def limited(make_api) -> Api:
    return await make_api(SimConfig.fast().model_copy(update={"rate_limits": True}))


def _assert_429(reply, window: str, seconds: int) -> None:
    error = assert_error(reply, 429, "rate_limited")
    assert reply.headers["Retry-After"] == str(seconds)
    assert error["retryAfterSeconds"] == seconds
    assert error["details"] == {"retryAfterSeconds": seconds, "window": window}


async def test_quote_window_and_retry_after_on_the_virtual_clock(limited: Api) -> None:
    for i in range(30):
        reply = await limited.call("POST", "/v1/clusters/quote", json={"shape": SHAPE})
        assert reply.status == 201, (i, reply.text)
    assert reply.headers["RateLimit"].startswith('"quote";r=0;t=60')
    _assert_429(await limited.call("POST", "/v1/clusters/quote", json={"shape": SHAPE}),
                "quote", 60)
    # Other routes still work: only the quote window is spent.
    assert (await limited.call("GET", "/v1/account")).status == 200
    await limited.advance(45)
    refused = await limited.call("POST", "/v1/clusters/quote", json={"shape": SHAPE})
    _assert_429(refused, "quote", 15)
    assert refused.headers["RateLimit"].startswith('"quote";r=0;t=15')
    await limited.advance(15)
    assert (await limited.call("POST", "/v1/clusters/quote", json={"shape": SHAPE})).status == 201


async def test_launch_window_counts_every_launch_attempt(limited: Api) -> None:
    for _ in range(10):
        assert_error(await limited.launch("qte_nope"), 404)
    _assert_429(await limited.launch("qte_nope"), "launch", 60)


async def test_overall_window_is_per_key(limited: Api) -> None:
    for _ in range(120):
        assert (await limited.call("GET", "/v1/account")).status == 200
    reply = await limited.call("GET", "/v1/locations")
    _assert_429(reply, "minute", 60)
    assert reply.headers["RateLimit-Policy"] == '"minute";q=120;w=60'
    assert (await limited.call("GET", "/v1/account", key="another-key")).status == 200
    assert (await limited.call("GET", "/v1/health", key=None)).status == 200  # never limited
    await limited.advance(60)
    assert (await limited.call("GET", "/v1/account")).status == 200


async def test_refused_requests_do_not_use_quota(limited: Api) -> None:
    for _ in range(10):
        await limited.launch("qte_nope")
    for _ in range(5):
        _assert_429(await limited.launch("qte_nope"), "launch", 60)
    ok = await limited.call("GET", "/v1/account")
    assert ok.headers["RateLimit"] == '"minute";r=109;t=60'


async def test_off_by_default_still_reports(api: Api) -> None:
    left = []
    for _ in range(15):
        reply = await api.launch("qte_nope")
        assert_error(reply, 404)
        left.append(reply.headers["RateLimit"].split(";")[1])
    # It counts, but a full window starts over rather than reading as exhausted: nothing is
    # enforced, so a client obeying "r=0" would wait for nothing.
    assert left[:3] == ["r=9", "r=8", "r=7"] and "r=0" not in left


def test_limiter_windows_unit() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    limiter = RateLimiter(enforce=True)
    for _ in range(10):
        assert limiter.hit("k", (LAUNCH, OVERALL), t0).exceeded is None
    refused = limiter.hit("k", (LAUNCH, OVERALL), t0 + timedelta(seconds=59.5))
    assert refused.exceeded is not None and refused.retry_after == 1
    assert limiter.hit("k", (LAUNCH, OVERALL), t0 + timedelta(seconds=60)).exceeded is None
    t1 = t0 + timedelta(seconds=60)
    assert limiter.hit("k", (QUOTE, OVERALL), t1).headers()["RateLimit"] == (
        '"quote";r=29;t=60, "minute";r=118;t=60'
    )
    limiter.reset()
    assert limiter.hit("k", (OVERALL,), t0).states[0].remaining == 119
