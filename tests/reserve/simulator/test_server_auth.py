"""Bearer auth, request ids, media type and rate-limit headers on every answer (contract §1)."""

from __future__ import annotations

import pytest

from tests.reserve.simulator.conftest import API_KEY, Api, assert_error


async def test_health_needs_no_auth(api: Api) -> None:
    reply = await api.call("GET", "/v1/health", key=None)
    assert reply.status == 200
    assert reply.body["ok"] is True and isinstance(reply.body["version"], str)
    assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
    assert reply.headers["X-Request-Id"].startswith("req_")
    assert "RateLimit" not in reply.headers  # not an authenticated answer


async def test_missing_authorization_is_401(api: Api) -> None:
    reply = await api.call("GET", "/v1/account", key=None)
    assert_error(reply, 401, "unauthenticated")
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearer    ", "Token abc", "Bearer a b", "", "abc"],
)
async def test_malformed_authorization_is_401(api: Api, header: str) -> None:
    reply = await api.call("GET", "/v1/account", key=None, headers={"Authorization": header})
    assert_error(reply, 401, "unauthenticated")


async def test_any_non_empty_key_without_configured_key(api: Api) -> None:
    for key in ("a", "sk-anything", API_KEY):
        reply = await api.call("GET", "/v1/account", key=key)
        assert reply.status == 200, reply.text
    reply = await api.call("GET", "/v1/account", key=None, headers={"Authorization": "bearer x"})
    assert reply.status == 200  # the scheme is case-insensitive


async def test_configured_key_refuses_others(make_api) -> None:
    api = await make_api(api_key="the-one-key")
    assert_error(await api.call("GET", "/v1/account", key="another-key"), 401, "unauthenticated")
    assert_error(await api.call("GET", "/v1/account", key="the-one-ke"), 401)
    assert (await api.call("GET", "/v1/account", key="the-one-key")).status == 200
    assert (await api.call("GET", "/v1/health", key=None)).status == 200


async def test_auth_comes_before_routing(api: Api) -> None:
    assert_error(await api.call("GET", "/v1/nope", key=None), 401, "unauthenticated")
    assert_error(await api.call("GET", "/v1/nope"), 404, "not_found")


async def test_every_answer_has_a_fresh_request_id(api: Api) -> None:
    ids = set()
    for path in ("/v1/account", "/v1/nope", "/v1/clusters/clu_missing"):
        reply = await api.call("GET", path)
        ids.add(reply.headers["X-Request-Id"])
    assert len(ids) == 3


async def test_authenticated_answers_carry_rate_limit_headers(api: Api) -> None:
    ok = await api.call("GET", "/v1/account")
    assert ok.headers["RateLimit-Policy"] == '"minute";q=120;w=60'
    assert ok.headers["RateLimit"] == '"minute";r=119;t=60'
    missing = await api.call("GET", "/v1/clusters/clu_missing")
    assert_error(missing, 404, "not_found")
    assert missing.headers["RateLimit"] == '"minute";r=118;t=60'
    quote = await api.call(
        "POST", "/v1/clusters/quote",
        json={"shape": {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 2}},
    )
    assert quote.status == 201, quote.text
    assert quote.headers["RateLimit-Policy"] == '"quote";q=30;w=60, "minute";q=120;w=60'
    assert quote.headers["RateLimit"] == '"quote";r=29;t=60, "minute";r=117;t=60'
