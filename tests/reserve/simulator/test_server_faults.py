"""Injected faults (`POST /_sim/faults`, contract §11): 429/5xx envelopes, counts, latency."""

from __future__ import annotations

import time

import pytest

from aireserve_sim.faults import FaultInjector, FaultRequest
from tests.reserve.simulator.conftest import Api, assert_error


async def _arm(api: Api, **fault) -> dict:
    reply = await api.admin("POST", "/faults", fault)
    assert reply.status == 201, reply.text
    return reply.body


async def test_injected_429_has_retry_after_and_is_consumed(api: Api) -> None:
    await _arm(api, route="GET /v1/account", status=429, count=2, retryAfterSeconds=7)
    for _ in range(2):
        reply = await api.call("GET", "/v1/account")
        error = assert_error(reply, 429, "rate_limited")
        assert reply.headers["Retry-After"] == "7" and error["retryAfterSeconds"] == 7
        assert error["details"]["retryAfterSeconds"] == 7
        assert "RateLimit" in reply.headers
    assert (await api.call("GET", "/v1/account")).status == 200
    assert (await api.admin("GET", "/faults")).body == {"data": []}


async def test_injected_503_has_retry_after(api: Api) -> None:
    await _arm(api, route="GET /v1/accelerators", status=503, count=1)
    reply = await api.call("GET", "/v1/accelerators")
    assert_error(reply, 503, "service_unavailable")
    assert reply.headers["Retry-After"] == "1"
    assert (await api.call("GET", "/v1/accelerators")).status == 200


@pytest.mark.parametrize(("status", "code"), [(500, "internal_error"), (502, "provider_error")])
async def test_injected_5xx_envelopes(api: Api, status: int, code: str) -> None:
    await _arm(api, route="POST /v1/clusters/quote", status=status, count=1)
    reply = await api.call("POST", "/v1/clusters/quote", json={"shape": {}})
    assert_error(reply, status, code)
    # Failing before execution: nothing was quoted, and the next call validates normally.
    assert_error(await api.call("POST", "/v1/clusters/quote", json={"shape": {}}), 400)


async def test_id_placeholders_match_one_segment(api: Api) -> None:
    cluster = await api.running_cluster()
    await _arm(api, route="GET /v1/clusters/{id}", status=502, count=5)
    logs = await api.call("GET", f"/v1/clusters/{cluster['id']}/logs")
    assert logs.status == 200  # a deeper path is another route
    assert (await api.call("GET", "/v1/clusters")).status == 200
    assert_error(await api.call("GET", f"/v1/clusters/{cluster['id']}"), 502, "provider_error")
    rules = (await api.admin("GET", "/faults")).body["data"]
    assert rules == [{"route": "GET /v1/clusters/{id}", "status": 502, "remaining": 4,
                      "delaySeconds": 0.0, "retryAfterSeconds": 1}]
    assert (await api.admin("DELETE", "/faults")).status == 200
    assert (await api.call("GET", f"/v1/clusters/{cluster['id']}")).status == 200


async def test_504_runs_the_request_and_a_keyed_retry_replays(api: Api) -> None:
    quote = await api.quote()
    await _arm(api, route="POST /v1/clusters", status=504, count=1)
    lost = await api.launch(quote["id"], key="unknown-outcome")
    assert_error(lost, 504, "provider_timeout")
    listed = await api.call("GET", "/v1/clusters")
    assert len(listed.body["data"]) == 1  # it did happen
    retry = await api.launch(quote["id"], key="unknown-outcome")
    assert retry.status == 201 and retry.headers["Idempotent-Replayed"] == "true"
    assert retry.body["id"] == listed.body["data"][0]["id"]


async def test_503_is_not_stored_under_the_key(api: Api) -> None:
    quote = await api.quote()
    await _arm(api, route="POST /v1/clusters", status=503, count=1)
    assert_error(await api.launch(quote["id"], key="k"), 503, "service_unavailable")
    retry = await api.launch(quote["id"], key="k")
    assert retry.status == 201 and "Idempotent-Replayed" not in retry.headers


async def test_latency_holds_the_normal_answer(api: Api) -> None:
    await _arm(api, route="GET /v1/account", delaySeconds=0.05, count=1)
    started = time.monotonic()
    reply = await api.call("GET", "/v1/account")
    held = time.monotonic() - started
    assert reply.status == 200 and "balanceCents" in reply.body
    assert held >= 0.05


async def test_latency_with_a_status(api: Api) -> None:
    await _arm(api, route="GET /v1/locations", status=503, delaySeconds=0.05, count=1)
    started = time.monotonic()
    reply = await api.call("GET", "/v1/locations")
    assert time.monotonic() - started >= 0.05
    assert_error(reply, 503, "service_unavailable")


async def test_faults_wait_behind_auth(api: Api) -> None:
    await _arm(api, route="GET /v1/account", status=500, count=1)
    assert_error(await api.call("GET", "/v1/account", key=None), 401)
    assert_error(await api.call("GET", "/v1/account"), 500, "internal_error")


@pytest.mark.parametrize(
    ("fault", "field"),
    [
        ({"route": "account", "status": 500}, "route"),
        ({"route": "GET /v1/clusters?status=running", "status": 500}, "route"),
        ({"route": "GET /_sim/ledger", "status": 500}, "route"),
        ({"route": "GET /v1/account", "status": 404}, "status"),
        ({"route": "GET /v1/account"}, "status"),
        ({"route": "GET /v1/account", "status": 500, "count": 0}, "count"),
        ({"route": "GET /v1/account", "delaySeconds": 3600}, "delaySeconds"),
        ({"route": "GET /v1/account", "status": 500, "colour": "red"}, "colour"),
    ],
)
async def test_bad_fault_definitions_are_400(api: Api, fault: dict, field: str) -> None:
    reply = await api.admin("POST", "/faults", fault)
    assert assert_error(reply, 400, "invalid_request")["details"]["field"] == field


async def test_route_method_is_case_insensitive(api: Api) -> None:
    rule = await _arm(api, route="get  /v1/account", status=500)
    assert rule["route"] == "GET /v1/account"
    assert_error(await api.call("GET", "/v1/account"), 500)


def test_injector_consumes_rules_in_order() -> None:
    injector = FaultInjector()
    injector.add(FaultRequest(route="GET /v1/clusters/{id}", status=500, count=1))
    injector.add(FaultRequest(route="GET /v1/clusters/{id}", status=502, count=1))
    first = injector.take("GET", "/v1/clusters/clu_1")
    second = injector.take("GET", "/v1/clusters/clu_2")
    assert (first and first.status, second and second.status) == (500, 502)
    assert injector.take("GET", "/v1/clusters/clu_3") is None
    assert injector.take("POST", "/v1/clusters/clu_3") is None


async def test_a_simulator_bug_is_a_logged_500_envelope(api: Api, monkeypatch, caplog) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(api.sim.engine, "account", broken)
    monkeypatch.setattr(api.sim.engine, "create_volume", broken)
    error = assert_error(await api.call("GET", "/v1/account"), 500, "internal_error")
    assert "boom" not in error["message"]  # internals stay in the log
    bugs = [r for r in caplog.records if r.name == "aireserve_sim.server"]
    assert len(bugs) == 1 and bugs[0].exc_info is not None

    # A 5xx produced after execution began is stored under the key (contract §8).
    body = {"sizeGb": 100, "location": "us-tx"}
    first = await api.call("POST", "/v1/volumes", json=body, headers={"Idempotency-Key": "b"})
    assert_error(first, 500, "internal_error")
    again = await api.call("POST", "/v1/volumes", json=body, headers={"Idempotency-Key": "b"})
    assert again.status == 500 and again.headers["Idempotent-Replayed"] == "true"
    assert again.text == first.text
    caplog.clear()  # these bugs were on purpose


async def test_an_html_502_and_a_truncated_answer(api: Api) -> None:
    await _arm(api, route="GET /v1/clusters", status=502, body="html")
    reply = await api.call("GET", "/v1/clusters")
    assert reply.status == 502 and reply.body is None and "<html>" in reply.text
    assert reply.headers["Content-Type"].startswith("text/html")
    await _arm(api, route="GET /v1/clusters", body="truncated")
    reply = await api.call("GET", "/v1/clusters")
    assert reply.status == 200 and reply.body is None and reply.text.startswith('{"data"')
    assert (await api.call("GET", "/v1/clusters")).body is not None  # consumed
    for bad in ({"body": "html"}, {"status": 502, "body": "truncated"}):
        reply = await api.admin("POST", "/faults", {"route": "GET /v1/clusters", **bad})
        assert_error(reply, 400, "invalid_request")


async def test_an_item_fault_corrupts_one_cluster_in_lists_and_by_id(api: Api) -> None:
    bad, good = await api.running_cluster(), await api.running_cluster()
    armed = await api.admin("POST", "/faults/items",
                            {"clusterId": bad["id"], "field": "billing", "remove": True})
    assert armed.status == 201, armed.text
    await api.admin("POST", "/faults/items", {"clusterId": bad["id"],
                                              "field": "recovery.attemptsUsed", "value": "x"})
    listed = {c["id"]: c for c in (await api.call("GET", "/v1/clusters")).body["data"]}
    assert "billing" not in listed[bad["id"]] and "billing" in listed[good["id"]]
    assert listed[bad["id"]]["recovery"]["attemptsUsed"] == "x"
    by_id = (await api.call("GET", f"/v1/clusters/{bad['id']}")).body
    assert "billing" not in by_id
    assert (await api.admin("DELETE", "/faults")).status == 200
    assert "billing" in (await api.call("GET", f"/v1/clusters/{bad['id']}")).body
