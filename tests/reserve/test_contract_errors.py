"""Contract suite — the error envelope, rate limits, and the client surviving injected faults."""

from __future__ import annotations

import pytest
import pytest_asyncio

from bot.clock import ManualClock
from bot.reserve import errors as e
from bot.reserve.client import AsyncAIReserveClient
from tests.reserve.conftest import API_KEY, H100, START, launch, raw


async def test_inv11_every_error_body_has_code_status_and_request_id(sim_client, sim,
                                                                     session):
    quote, cluster = await launch(sim_client)
    failures = []
    for call in (
        lambda: sim_client.get_cluster("clu_missing"),
        lambda: sim_client.quote_cluster(H100, 8, 9),
        lambda: sim_client.launch_cluster(quote.id, idempotency_key="again"),
        lambda: sim_client.recover_cluster(cluster.id, idempotency_key="r"),
        lambda: sim_client.cluster_logs(cluster.id, node=7),
        lambda: sim_client.get_volume("vol_missing"),
    ):
        with pytest.raises(e.ApiError) as caught:
            await call()
        failures.append(caught.value)
    assert [type(f) for f in failures] == [e.NotFound, e.InvalidShape, e.QuoteConsumed,
                                           e.NotDegraded, e.InvalidRequest, e.NotFound]
    for failure in failures:
        assert failure.code and failure.status >= 400
        assert failure.request_id and failure.request_id.startswith("req_")
    # On the wire: the envelope repeats the X-Request-Id header.
    for method, path, auth in [("GET", "/clusters/nope", True), ("GET", "/account", False),
                               ("POST", f"/clusters/{cluster.id}/stop", True)]:
        status, headers, body = await raw(session, sim.base_url, method, path, auth=auth)
        error = body["error"]
        assert (error["status"], error["requestId"]) == (status, headers["X-Request-Id"])
        assert error["code"] in {"not_found", "unauthenticated"}


async def test_inv11_an_injected_429_carries_retry_after(sim, session, admin):
    await admin.fault("GET /v1/account", status=429, count=1, retryAfterSeconds=2)
    strict = AsyncAIReserveClient(session, sim.base_url, API_KEY, max_retries=0, clock=sim.clock)
    with pytest.raises(e.RateLimited) as caught:
        await strict.get_account()
    assert caught.value.retry_after == 2.0


@pytest_asyncio.fixture
async def limited_sim():
    from aireserve_sim.config import SimConfig
    from aireserve_sim.embedded import EmbeddedSimulator

    config = SimConfig.fast().model_copy(update={"rate_limits": True})
    async with EmbeddedSimulator(config, ManualClock(START)) as simulator:
        yield simulator


async def test_inv11_every_rate_limit_answer_has_retry_after(limited_sim, session):
    refusals = []
    for _ in range(40):  # 30 quotes a minute are allowed
        # A fresh client each time: one that saw "r=0" would not even send (pauses.py).
        client = AsyncAIReserveClient(session, limited_sim.base_url, API_KEY, max_retries=0,
                                      clock=limited_sim.clock)
        try:
            await client.quote_cluster(H100, 8, 2)
        except e.RateLimited as err:
            refusals.append(err)
    assert len(refusals) == 10
    for refusal in refusals:
        assert refusal.retry_after is not None and 0 < refusal.retry_after <= 60
        assert refusal.request_id


async def test_a_rate_limited_client_waits_and_gets_through(limited_sim, session):
    clock = limited_sim.clock
    waited: list[float] = []

    async def sleep_on_the_virtual_clock(seconds: float) -> None:
        waited.append(seconds)
        clock.advance(seconds)

    client = AsyncAIReserveClient(session, limited_sim.base_url, API_KEY, clock=clock,
                                  sleep=sleep_on_the_virtual_clock, random=lambda: 0.0)
    quotes = [await client.quote_cluster(H100, 8, 2) for _ in range(31)]
    assert len({q.id for q in quotes}) == 31
    assert waited and waited[0] >= 1  # it obeyed Retry-After instead of hammering


async def test_the_client_retries_an_injected_503_on_get_and_survives(sim_client, admin):
    _, cluster = await launch(sim_client)
    await admin.fault("GET /v1/clusters/{id}", status=503, count=2)
    got = await sim_client.get_cluster(cluster.id)
    assert got.id == cluster.id


async def test_the_client_gives_up_after_max_retries(sim_client, admin):
    await admin.fault("GET /v1/account", status=502, count=10)
    with pytest.raises(e.ProviderError):
        await sim_client.get_account()


async def test_the_client_does_not_retry_an_injected_500(sim_client, admin):
    await admin.fault("GET /v1/account", status=500, count=1)
    with pytest.raises(e.InternalError):
        await sim_client.get_account()
    assert (await sim_client.get_account()).balance_cents > 0


async def test_the_client_survives_a_slow_answer_by_timing_out_and_retrying(sim, session,
                                                                              admin):
    # The simulator holds the first answer 0.3 s of real time; the client gives up after
    # 0.05 s and asks again (a GET may be repeated).
    await admin.fault("GET /v1/account", delaySeconds=0.3, count=1)
    client = AsyncAIReserveClient(session, sim.base_url, API_KEY, timeout=0.05,
                                  clock=sim.clock, sleep=_no_wait)
    account = await client.get_account()
    assert account.balance_cents > 0


async def _no_wait(seconds: float) -> None:
    return None


async def test_health_needs_no_key(sim_client):
    health = await sim_client.health()
    assert health.ok is True and health.version
