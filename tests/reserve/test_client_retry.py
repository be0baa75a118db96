"""The retry matrix: what is retried, with which key, how often and how long it waits."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from bot.reserve import errors as e
from bot.reserve.retry import RetryPolicy
from tests.reserve.conftest import cluster_json, error_body, quote_json, respond, volume_json

ACCOUNT = {"balanceCents": 100, "paymentStatus": "current", "paymentGraceSeconds": 3600}


def err(code: str, status: int, headers: dict[str, str] | None = None):
    return (status, error_body(code, status), headers or {})


# --- the policy alone ------------------------------------------------------------------------


def test_backoff_is_exponential_from_half_a_second_capped_at_eight():
    policy = RetryPolicy(max_retries=10)
    assert [policy.backoff(n, lambda: 1.0) for n in range(7)] == [0.5, 1, 2, 4, 8, 8, 8]
    assert policy.backoff(10_000, lambda: 1.0) == 8.0  # no overflow on absurd counts


def test_backoff_is_full_jitter():
    policy = RetryPolicy()
    assert policy.backoff(3, lambda: 0.0) == 0.0
    assert policy.backoff(3, lambda: 0.25) == 1.0


def test_delay_honours_retry_after_as_a_floor():
    policy = RetryPolicy()
    limited = e.RateLimited("slow down", retry_after=5.0)
    assert policy.delay(limited, attempt=0, random=lambda: 1.0) == 5.0
    assert policy.delay(limited, attempt=2, random=lambda: 1.0) == 5.0  # backoff 2 < 5
    late = e.ServiceUnavailable("busy", retry_after=1.0)
    assert policy.delay(late, attempt=2, random=lambda: 1.0) == 2.0


def test_delay_gives_up_on_a_retry_after_longer_than_the_ceiling():
    policy = RetryPolicy(max_retry_after=60)
    assert policy.delay(e.RateLimited("x", retry_after=61), attempt=0, random=lambda: 1.0) is None


@pytest.mark.parametrize("error", [
    e.InvalidRequest("x"), e.PriceChanged("x"), e.Conflict("x"), e.NotFound("x"),
    e.Unauthenticated("x"), e.PaymentRequired("x"), e.IdempotencyKeyReused("x"),
    e.InternalError("x"),
])
def test_delay_never_retries_other_errors(error):
    assert RetryPolicy().delay(error, attempt=0, random=lambda: 1.0) is None


def test_delay_stops_after_max_retries():
    policy = RetryPolicy(max_retries=2)
    error = e.ProviderError("x")
    assert policy.delay(error, attempt=1, random=lambda: 1.0) == 1.0
    assert policy.delay(error, attempt=2, random=lambda: 1.0) is None


def test_negative_max_retries_is_refused():
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


# --- over HTTP -------------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "status"), [
    ("rate_limited", 429), ("provider_error", 502), ("service_unavailable", 503),
    ("provider_timeout", 504),
])
async def test_get_is_retried_on_retryable_answers(fake_api, make_client, sleeps, code, status):
    fake_api.reply("GET", "/account", err(code, status), (200, ACCOUNT))
    account = await make_client().get_account()
    assert account.balance_cents == 100
    assert len(fake_api.requests("GET", "/account")) == 2
    assert sleeps.delays == [0.5]


async def drop(request: web.Request) -> web.StreamResponse:
    """Hang up without answering."""
    assert request.transport is not None
    request.transport.close()
    return web.Response()


async def test_get_is_retried_on_a_dropped_connection(fake_api, make_client, sleeps):
    # aiohttp itself re-sends an idempotent request once on a dropped keep-alive connection,
    # so drop often enough that our own retry has to step in.
    fake_api.on("GET", "/account", drop, drop, drop, respond(200, ACCOUNT))
    assert (await make_client().get_account()).balance_cents == 100
    assert len(fake_api.requests("GET", "/account")) == 4
    assert len(sleeps.delays) >= 1


async def test_keyed_post_is_retried_on_a_dropped_connection(fake_api, make_client, sleeps):
    fake_api.on("POST", "/clusters", drop, respond(201, cluster_json()))
    await make_client().launch_cluster("qte_1", idempotency_key="k-drop")
    sent = fake_api.requests("POST", "/clusters")
    assert [s.headers["Idempotency-Key"] for s in sent] == ["k-drop", "k-drop"]
    assert sleeps.delays == [0.5]


async def test_unkeyed_post_is_not_retried_on_a_dropped_connection(fake_api, make_client):
    fake_api.on("POST", "/volumes", drop, respond(201, volume_json()))
    with pytest.raises(e.TransportError):
        await make_client().create_volume(100, "us-tx")
    assert len(fake_api.requests("POST", "/volumes")) == 1


async def test_post_without_key_is_not_retried(fake_api, make_client, sleeps):
    fake_api.reply("POST", "/volumes", err("service_unavailable", 503), (201, volume_json()))
    with pytest.raises(e.ServiceUnavailable):
        await make_client().create_volume(100, "us-tx")
    assert len(fake_api.requests("POST", "/volumes")) == 1
    assert sleeps.delays == []
    assert "Idempotency-Key" not in fake_api.seen[0].headers


async def test_post_with_key_is_retried_with_the_same_key_and_body(fake_api, make_client, sleeps):
    fake_api.reply("POST", "/clusters", err("service_unavailable", 503),
                   err("provider_timeout", 504), err("idempotency_key_in_use", 409),
                   (201, cluster_json()))
    cluster = await make_client().launch_cluster("qte_1", idempotency_key="launch-42",
                                                 env={"A": "1"})
    assert cluster.id == "clu_1"
    sent = fake_api.requests("POST", "/clusters")
    assert len(sent) == 4
    assert {s.headers["Idempotency-Key"] for s in sent} == {"launch-42"}
    assert all(s.body == sent[0].body for s in sent)
    assert sleeps.delays == [0.5, 1.0, 2.0]


async def test_volume_create_with_key_is_retried(fake_api, make_client):
    fake_api.reply("POST", "/volumes", err("provider_error", 502), (201, volume_json()))
    await make_client().create_volume(100, "us-tx", idempotency_key="vol-1")
    assert [s.headers["Idempotency-Key"] for s in fake_api.requests("POST")] == ["vol-1"] * 2


async def test_quote_sends_its_own_key_and_retries_with_it(fake_api, make_client):
    fake_api.reply("POST", "/clusters/quote", err("rate_limited", 429, {"Retry-After": "1"}),
                   (201, quote_json()))
    await make_client().quote_cluster("h100-sxm-80gb", 8, 2)
    keys = [s.headers.get("Idempotency-Key") for s in fake_api.requests("POST")]
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]


@pytest.mark.parametrize(("code", "status"), [
    ("invalid_request", 400), ("price_changed", 409), ("capacity_unavailable", 409),
    ("internal_error", 500), ("idempotency_key_reused", 422), ("not_found", 404),
])
async def test_never_retried_on_other_errors(fake_api, make_client, sleeps, code, status):
    fake_api.reply("POST", "/clusters", err(code, status), (201, cluster_json()))
    fake_api.reply("GET", "/clusters/clu_1", err(code, status), (200, cluster_json()))
    client = make_client()
    with pytest.raises(e.ApiError) as launched:
        await client.launch_cluster("qte_1", idempotency_key="k")
    with pytest.raises(e.ApiError) as got:
        await client.get_cluster("clu_1")
    assert launched.value.code == got.value.code == code
    assert len(fake_api.seen) == 2
    assert sleeps.delays == []


async def test_attempts_are_bounded_and_the_last_error_raised(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/account", err("provider_error", 502),
                   err("service_unavailable", 503))
    with pytest.raises(e.ServiceUnavailable):
        await make_client(max_retries=3).get_account()
    assert len(fake_api.seen) == 4  # one try + three retries
    assert sleeps.delays == [0.5, 1.0, 2.0]


async def test_max_retries_zero_means_one_try(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/account", err("service_unavailable", 503))
    with pytest.raises(e.ServiceUnavailable):
        await make_client(max_retries=0).get_account()
    assert len(fake_api.seen) == 1 and sleeps.delays == []


async def test_delays_follow_the_jitter_cap(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/account", err("provider_timeout", 504))
    with pytest.raises(e.ProviderTimeout):
        await make_client(max_retries=6).get_account()
    assert sleeps.delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


async def test_jittered_delays_stay_under_the_ceiling(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/account", err("provider_timeout", 504))
    with pytest.raises(e.ProviderTimeout):
        await make_client(max_retries=5, random=lambda: 0.5).get_account()
    assert sleeps.delays == [0.25, 0.5, 1.0, 2.0, 4.0]


async def test_retry_after_seconds_is_waited_at_least(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/account", err("rate_limited", 429, {"Retry-After": "3"}))
    with pytest.raises(e.RateLimited):
        await make_client(max_retries=4).get_account()
    assert sleeps.delays == [3.0, 3.0, 3.0, 4.0]


async def test_retry_after_http_date_is_waited_at_least(fake_api, make_client, sleeps):
    # The fake sleep moves the clock, so the same date means less and less to wait.
    busy = err("service_unavailable", 503, {"Retry-After": "Sun, 29 Nov 2026 10:00:05 GMT"})
    fake_api.reply("GET", "/account", busy, busy, (200, ACCOUNT))
    await make_client(random=lambda: 0.0).get_account()
    assert sleeps.delays == [5.0, 0.0]


async def test_an_excessive_retry_after_is_not_waited_for(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/account", err("rate_limited", 429, {"Retry-After": "3600"}))
    with pytest.raises(e.RateLimited) as caught:
        await make_client().get_account()
    assert caught.value.retry_after == 3600
    assert sleeps.delays == [] and len(fake_api.seen) == 1


async def test_terminate_is_retried_as_idempotent(fake_api, make_client):
    fake_api.reply("DELETE", "/clusters/clu_1", err("service_unavailable", 503),
                   (200, cluster_json(status="terminating")))
    cluster = await make_client().terminate_cluster("clu_1")
    assert cluster.status == "terminating"
    assert len(fake_api.seen) == 2


async def test_cluster_patches_are_retried_as_absolute_sets(fake_api, make_client):
    fake_api.reply("PATCH", "/clusters/clu_1/recovery", err("provider_error", 502),
                   (200, cluster_json()))
    fake_api.reply("PATCH", "/clusters/clu_1", err("provider_error", 502), (200, cluster_json()))
    client = make_client()
    await client.set_auto_recovery("clu_1", True)
    await client.rename_cluster("clu_1", "new")
    assert len(fake_api.seen) == 4


@pytest.mark.parametrize("call", ["delete", "resize"])
async def test_volume_writes_without_key_are_not_retried(fake_api, make_client, call):
    fake_api.reply("DELETE", "/volumes/vol_1", err("provider_error", 502))
    fake_api.reply("PATCH", "/volumes/vol_1", err("provider_error", 502))
    client = make_client()
    with pytest.raises(e.ProviderError):
        if call == "delete":
            await client.delete_volume("vol_1")
        else:
            await client.resize_volume("vol_1", 2000)
    assert len(fake_api.seen) == 1


# --- timeouts --------------------------------------------------------------------------------


@pytest.fixture
def never():
    """A handler that never answers until the test ends (it waits on an Event, not a timer)."""
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.json_response({})

    yield handler
    release.set()


async def test_a_request_that_never_answers_times_out(fake_api, make_client, never):
    fake_api.on("GET", "/account", never)
    with pytest.raises(e.TransportError) as caught:
        await make_client(timeout=0.05, max_retries=0).get_account()
    assert "TimeoutError" in str(caught.value)


async def test_a_timed_out_launch_is_resent_with_the_same_key(fake_api, make_client, never,
                                                              sleeps):
    fake_api.on("POST", "/clusters", never, respond(201, cluster_json()))
    cluster = await make_client(timeout=0.05).launch_cluster("qte_1", idempotency_key="k-1")
    assert cluster.id == "clu_1"
    assert [s.headers["Idempotency-Key"] for s in fake_api.requests("POST")] == ["k-1", "k-1"]
    assert len(sleeps.delays) == 1
