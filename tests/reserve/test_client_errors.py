"""Every error answer becomes the right typed exception, with its structured fields."""

from __future__ import annotations

import socket
from email.utils import format_datetime

import pytest

from bot.reserve import errors as e
from bot.reserve.client import AsyncAIReserveClient, UnexpectedResponse
from tests.reserve.conftest import START, error_body

# (code, status, details, class, {property: expected})
CASES = [
    ("invalid_request", 400, {"field": "shmSizeGb", "reason": "unknown_field"},
     e.InvalidRequest, {"field": "shmSizeGb", "reason": "unknown_field"}),
    ("invalid_shape", 400,
     {"field": "shape.nodes", "reason": "nodes_out_of_range", "min": 2, "max": 8,
      "salesContact": True},
     e.InvalidShape, {"field": "shape.nodes", "reason": "nodes_out_of_range", "minimum": 2,
                      "maximum": 8, "sales_contact": True}),
    ("unauthenticated", 401, {}, e.Unauthenticated, {}),
    ("payment_required", 402, {"requiredCents": 6253, "balanceCents": 100},
     e.PaymentRequired, {"required_cents": 6253, "balance_cents": 100}),
    ("forbidden", 403, {}, e.Forbidden, {}),
    ("not_found", 404, {"resource": "cluster"}, e.NotFound, {"resource": "cluster"}),
    ("price_changed", 409, {"field": "shape.nodes", "quoted": 2, "requested": 4},
     e.PriceChanged, {"field": "shape.nodes", "quoted": 2, "requested": 4}),
    ("quote_expired", 409, {"expiresAt": "2026-11-29T10:15:00Z"},
     e.QuoteExpired, {"expires_at": "2026-11-29T10:15:00Z"}),
    ("quote_consumed", 409, {"clusterId": "clu_9"}, e.QuoteConsumed, {"cluster_id": "clu_9"}),
    ("capacity_unavailable", 409,
     {"accelerator": "h100-sxm-80gb", "location": "us-tx", "nodesPlaceable": 1},
     e.CapacityUnavailable,
     {"accelerator": "h100-sxm-80gb", "location": "us-tx", "nodes_placeable": 1}),
    ("volume_attached", 409, {"volumeId": "vol_1", "clusterId": "clu_1"},
     e.VolumeAttached, {"volume_id": "vol_1", "cluster_id": "clu_1"}),
    ("not_degraded", 409, {"status": "running"}, e.NotDegraded, {"cluster_status": "running"}),
    ("recovery_in_progress", 409, {"lastAttemptAt": "2026-11-29T10:00:00Z"},
     e.RecoveryInProgress, {}),
    ("recovery_exhausted", 409, {"attemptsUsed": 3, "attemptsMax": 3},
     e.RecoveryExhausted, {"attempts_used": 3, "attempts_max": 3}),
    ("invalid_state", 409, {"status": "terminated"}, e.InvalidState,
     {"cluster_status": "terminated"}),
    ("idempotency_key_in_use", 409, {}, e.IdempotencyKeyInUse, {}),
    ("idempotency_key_reused", 422, {}, e.IdempotencyKeyReused, {}),
    ("rate_limited", 429, {"retryAfterSeconds": 7, "window": "minute"}, e.RateLimited, {}),
    ("internal_error", 500, {}, e.InternalError, {}),
    ("provider_error", 502, {"retryable": True}, e.ProviderError, {}),
    ("service_unavailable", 503, {}, e.ServiceUnavailable, {}),
    ("provider_timeout", 504, {}, e.ProviderTimeout, {}),
]


@pytest.mark.parametrize(("code", "status", "details", "cls", "props"), CASES,
                         ids=[c[0] for c in CASES])
async def test_every_error_code_maps_to_its_class(fake_api, make_client, code, status, details,
                                                  cls, props):
    fake_api.reply("GET", "/clusters/clu_1", (status, error_body(code, status, details)))
    client = make_client(max_retries=0)

    with pytest.raises(cls) as caught:
        await client.get_cluster("clu_1")

    err = caught.value
    assert type(err) is cls
    assert (err.status, err.code, err.request_id) == (status, code, "req_err1")
    assert err.details == details
    for name, expected in props.items():
        assert getattr(err, name) == expected, name


async def test_not_found_is_a_lookup_error_and_unauthenticated_a_permission_error(
        fake_api, make_client):
    fake_api.reply("GET", "/clusters/x", (404, error_body("not_found", 404)))
    fake_api.reply("GET", "/account", (401, error_body("unauthenticated", 401)))
    client = make_client()
    with pytest.raises(LookupError):
        await client.get_cluster("x")
    with pytest.raises(PermissionError):
        await client.get_account()


@pytest.mark.parametrize(("status", "code", "cls", "header", "seconds"), [
    (429, "rate_limited", e.RateLimited, "7", 7.0),
    # an HTTP-date 30 s after the clock's now
    (429, "rate_limited", e.RateLimited, format_datetime(START.replace(second=30), usegmt=True),
     30.0),
    (503, "service_unavailable", e.ServiceUnavailable, "2", 2.0),
], ids=["rate-limited-seconds", "rate-limited-http-date", "unavailable-seconds"])
async def test_retry_after_is_kept(fake_api, make_client, status, code, cls, header, seconds):
    fake_api.reply("GET", "/account", (status, error_body(code, status), {"Retry-After": header}))
    with pytest.raises(cls) as caught:
        await make_client(max_retries=0).get_account()
    assert caught.value.retry_after == seconds


@pytest.mark.parametrize(("status", "cls"), [
    (400, e.InvalidRequest), (409, e.Conflict), (404, e.NotFound), (418, e.ApiError),
    (500, e.InternalError), (507, e.ServerError),
])
async def test_unknown_code_maps_by_status_family(fake_api, make_client, status, cls):
    fake_api.reply("GET", "/account", (status, error_body("brand_new_code", status, {"x": 1})))
    with pytest.raises(e.ApiError) as caught:
        await make_client(max_retries=0).get_account()
    assert type(caught.value) is cls
    assert caught.value.code == "brand_new_code"  # what the server said is kept
    assert caught.value.status == status
    assert caught.value.details == {"x": 1}


async def test_non_envelope_502_html_page(fake_api, make_client):
    fake_api.reply("GET", "/account",
                   (502, "<html><body>Bad Gateway</body></html>", {"X-Request-Id": "req_px"}))
    with pytest.raises(e.ProviderError) as caught:
        await make_client(max_retries=0).get_account()
    assert caught.value.status == 502
    assert caught.value.request_id == "req_px"  # falls back to the header
    assert "502" in str(caught.value)


async def test_2xx_that_is_not_json_is_a_clear_error(fake_api, make_client):
    fake_api.reply("GET", "/account", (200, "<html>hello</html>"))
    with pytest.raises(UnexpectedResponse, match="not JSON"):
        await make_client().get_account()


async def test_2xx_with_wrong_shape_names_the_field_without_pydantic(fake_api, make_client):
    fake_api.reply("GET", "/account", (200, {"balanceCents": "lots"}))
    with pytest.raises(UnexpectedResponse) as caught:
        await make_client().get_account()
    text = str(caught.value)
    assert "not a Account" in text and "balanceCents" in text
    assert caught.value.details == {"field": "balanceCents"}  # which one, for the watcher
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert isinstance(caught.value, ValueError)


async def test_connection_refused_is_transport_error(session, clock, sleeps):
    # Bind then close a socket to get a port nobody listens on.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = AsyncAIReserveClient(session, f"http://127.0.0.1:{port}/v1", "k", clock=clock,
                                  sleep=sleeps, max_retries=1)
    with pytest.raises(e.TransportError) as caught:
        await client.get_account()
    assert isinstance(caught.value, ConnectionError)
    assert len(sleeps.delays) == 1  # a GET is retried on a connection error, then gives up
