"""The `/_sim` control surface (contract §11): admin header, clock, nodes, capacity, account,
ledger, reset."""

from __future__ import annotations

import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import SystemClock
from tests.reserve.simulator.conftest import Api, assert_error


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/clock"), ("POST", "/clock/advance"), ("GET", "/ledger"), ("POST", "/reset"),
     ("POST", "/account"), ("GET", "/nope")],
)
async def test_admin_header_is_required(api: Api, method: str, path: str) -> None:
    for headers in ({}, {"X-Sim-Admin": "0"}, {"X-Sim-Admin": "yes"}):
        reply = await api.call(method, "/_sim" + path, json={"seconds": 1}, headers=headers)
        assert_error(reply, 403, "forbidden")
    # A bearer key is neither needed nor a substitute.
    reply = await api.call("GET", "/_sim/clock")
    assert_error(reply, 403, "forbidden")


async def test_unknown_control_route_is_404(api: Api) -> None:
    assert_error(await api.admin("GET", "/nope"), 404, "not_found")
    assert_error(await api.admin("GET", "/clock/advance"), 404, "not_found")


async def test_clock_and_advance(api: Api) -> None:
    clock = await api.admin("GET", "/clock")
    assert clock.body == {"now": "2026-11-29T10:00:00Z", "virtual": True}
    advanced = await api.admin("POST", "/clock/advance", {"seconds": 90.5})
    assert advanced.status == 200
    assert advanced.body["now"] == "2026-11-29T10:01:30Z"
    assert api.sim.clock.now().isoformat() == "2026-11-29T10:01:30.500000+00:00"


@pytest.mark.parametrize(
    "body", [{"seconds": -1}, {"seconds": "10"}, {"seconds": 1e12}, {}, {"seconds": True}]
)
async def test_bad_advance(api: Api, body: dict) -> None:
    reply = await api.admin("POST", "/clock/advance", body)
    assert assert_error(reply, 400, "invalid_request")["details"]["field"] == "seconds"


async def test_advance_needs_a_virtual_clock(http_session) -> None:
    async with EmbeddedSimulator(SimConfig.fast(), SystemClock()) as sim:
        api = Api(http_session, sim)
        assert (await api.admin("GET", "/clock")).body["virtual"] is False
        reply = await api.admin("POST", "/clock/advance", {"seconds": 1})
        assert_error(reply, 409, "invalid_state")


async def test_fail_node_and_recoverable(api: Api) -> None:
    cluster = await api.running_cluster()
    base = f"/clusters/{cluster['id']}/nodes"
    failed = await api.admin("POST", f"{base}/1/fail", {"mode": "unhealthy"})
    assert failed.status == 200 and failed.body["status"] == "degraded"
    assert failed.body["nodes"][1]["status"] == "unhealthy"
    marked = await api.admin("POST", f"{base}/1/recoverable", {"value": False})
    assert marked.status == 200 and marked.body["id"] == cluster["id"]
    assert_error(await api.admin("POST", f"{base}/1/fail", {"mode": "exploded"}), 400)
    assert_error(await api.admin("POST", f"{base}/x/fail", {"mode": "stopped"}), 400)
    assert_error(await api.admin("POST", f"{base}/99999/fail", {"mode": "stopped"}), 400)
    assert_error(await api.admin("POST", f"{base}/1/recoverable", {"value": "no"}), 400)
    reply = await api.admin("POST", "/clusters/clu_nope/nodes/0/fail", {"mode": "stopped"})
    assert_error(reply, 404, "not_found")
    reply = await api.admin("POST", f"{base}/7/fail", {"mode": "stopped"})
    assert 400 <= reply.status < 500


async def test_a_node_log_line_is_appended_and_read_back_since_the_cursor(api: Api) -> None:
    cluster = await api.running_cluster()
    logs = f"/v1/clusters/{cluster['id']}/logs"
    before = (await api.call("GET", logs, params={"node": "1"})).body
    await api.admin("POST", "/clock/advance", {"seconds": 1})
    base = f"/clusters/{cluster['id']}/nodes"
    reply = await api.admin("POST", f"{base}/1/log", {"line": "Application startup complete."})
    assert reply.status == 200
    [line] = reply.body["lines"]
    assert (line["line"], line["stream"], reply.body["node"]) == (
        "Application startup complete.", "stdout", 1)
    after = await api.call("GET", logs, params={"node": "1", "since": before["nextSince"]})
    assert [x["line"] for x in after.body["lines"]] == ["Application startup complete."]
    rank0 = await api.call("GET", logs, params={"since": before["nextSince"]})
    assert rank0.body["lines"] == []  # another node's log is untouched
    err = await api.admin("POST", f"{base}/1/log", {"line": "x", "stream": "stdin"})
    assert_error(err, 400)
    assert_error(await api.admin("POST", f"{base}/1/log", {"line": ""}), 400)
    assert_error(await api.admin("POST", f"{base}/1/log", {"text": "x"}), 400)
    assert_error(await api.admin("POST", f"{base}/9/log", {"line": "x"}), 400)
    reply = await api.admin("POST", "/clusters/clu_nope/nodes/0/log", {"line": "x"})
    assert_error(reply, 404, "not_found")


async def test_capacity_and_availability(api: Api) -> None:
    body = {"accelerator": "h100-sxm-80gb", "location": "us-tx", "availability": "none"}
    reply = await api.admin("POST", "/capacity", body)
    assert reply.status == 200 and reply.body["availability"] == "none"
    catalog = await api.call("GET", "/v1/accelerators", params={"location": "us-tx"})
    h100 = next(a for a in catalog.body["data"] if a["id"] == "h100-sxm-80gb")
    assert {loc["id"]: loc["availability"] for loc in h100["locations"]}["us-tx"] == "none"
    assert_error(await api.admin("POST", "/capacity", {**body, "availability": "lots"}), 400)
    assert_error(await api.admin("POST", "/capacity", {**body, "placeableNodes": -1}), 400)
    reply = await api.admin("POST", "/capacity", {**body, "accelerator": "tpu-v9"})
    assert 400 <= reply.status < 500


async def test_account_balance_and_ledger(api: Api) -> None:
    reply = await api.admin("POST", "/account", {"balanceCents": 12345})
    assert reply.status == 200 and reply.body["balanceCents"] == 12345
    assert (await api.call("GET", "/v1/account")).body["balanceCents"] == 12345
    assert_error(await api.admin("POST", "/account", {"balanceCents": -5}), 400)
    assert_error(await api.admin("POST", "/account", {"balanceCents": 1.5}), 400)
    await api.admin("POST", "/account", {"balanceCents": 10_000_000})
    cluster = await api.running_cluster()
    ledger = (await api.admin("GET", "/ledger")).body["data"]
    hours = [e for e in ledger if e["resourceId"] == cluster["id"]]
    assert hours and set(hours[0]) == {"at", "kind", "resourceId", "cents", "paid", "note"}
    assert hours[0]["cents"] == cluster["lockedRate"]["hourlyCents"]
    assert hours[0]["at"] == cluster["readyAt"]


async def test_reset_forgets_everything(api: Api) -> None:
    quote = await api.quote()
    assert (await api.launch(quote["id"], key="k")).status == 201
    await api.admin("POST", "/faults", {"route": "GET /v1/account", "status": 500, "count": 3})
    reset = await api.admin("POST", "/reset")
    assert reset.status == 200 and reset.body["ok"] is True
    assert (await api.call("GET", "/v1/clusters")).body["data"] == []
    assert (await api.call("GET", "/v1/account")).status == 200  # fault cleared
    assert (await api.admin("GET", "/faults")).body == {"data": []}
    again = await api.quote()
    relaunch = await api.launch(again["id"], key="k")  # the key was forgotten too
    assert relaunch.status == 201 and "Idempotent-Replayed" not in relaunch.headers


async def test_seed_launches_many_clusters_listed_in_pages(api: Api) -> None:
    reply = await api.admin("POST", "/clusters/seed", {"count": 450, "nodes": 2})
    assert reply.status == 201, reply.body
    ids = reply.body["data"]
    assert len(set(ids)) == 450
    listed: list[str] = []
    params = "?limit=200&status=provisioning,running"
    while True:
        page = await api.call("GET", "/v1/clusters" + params)
        assert page.status == 200 and len(page.body["data"]) <= 200
        listed += [c["id"] for c in page.body["data"]]
        if not page.body["nextCursor"]:
            break
        params = f"?limit=200&status=provisioning,running&cursor={page.body['nextCursor']}"
    assert sorted(listed) == sorted(ids)
    assert {c["status"] for c in page.body["data"]} == {"provisioning"}


@pytest.mark.parametrize("body", [{"count": 0}, {"count": 10_001}, {"count": 1, "nodes": 1},
                                  {"count": "3"}])
async def test_bad_seed(api: Api, body: dict) -> None:
    assert_error(await api.admin("POST", "/clusters/seed", body), 400, "invalid_request")
