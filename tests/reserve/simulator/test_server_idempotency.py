"""Idempotency-Key on POSTs (contract §8): replay, reuse, in-use, and what is (not) stored."""

from __future__ import annotations

import asyncio
import json

from tests.reserve.simulator.conftest import SHAPE, Api, assert_error


async def test_same_key_same_body_replays_the_identical_201(api: Api) -> None:
    quote = await api.quote()
    first = await api.launch(quote["id"], key="launch-1", name="dsv3")
    assert first.status == 201, first.text
    assert "Idempotent-Replayed" not in first.headers
    await api.advance(30)  # the cluster moves on; the replay is the stored answer, not a re-read
    again = await api.launch(quote["id"], key="launch-1", name="dsv3")
    assert again.status == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.text == first.text
    location = f"/v1/clusters/{first.body['id']}"
    assert again.headers["Location"] == first.headers["Location"] == location
    assert again.headers["X-Request-Id"] != first.headers["X-Request-Id"]

    clusters = await api.call("GET", "/v1/clusters")
    assert [c["id"] for c in clusters.body["data"]] == [first.body["id"]]
    await api.advance(3600)
    ledger = (await api.admin("GET", "/ledger")).body["data"]
    charged = {e["resourceId"] for e in ledger if e["kind"].startswith("cluster")}
    assert charged == {first.body["id"]}


async def test_canonical_body_ignores_key_order_and_whitespace(api: Api) -> None:
    quote = await api.quote()
    body = {"quoteId": quote["id"], "name": "a", "env": {"B": "2", "A": "1"}}
    first = await api.launch(quote["id"], key="k", name="a", env={"B": "2", "A": "1"})
    assert first.status == 201, first.text
    reordered = json.dumps(dict(reversed(list(body.items()))), indent=4).encode()
    again = await api.call("POST", "/v1/clusters", data=reordered,
                           headers={"Idempotency-Key": "k"})
    assert again.status == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.body["id"] == first.body["id"]


async def test_same_key_different_body_is_422(api: Api) -> None:
    quote = await api.quote()
    assert (await api.launch(quote["id"], key="k1", name="a")).status == 201
    assert_error(await api.launch(quote["id"], key="k1", name="b"), 422, "idempotency_key_reused")


async def test_same_key_other_route_is_422(api: Api) -> None:
    quote = await api.quote()
    assert (await api.launch(quote["id"], key="k2")).status == 201
    reply = await api.call("POST", "/v1/volumes", json={"quoteId": quote["id"]},
                           headers={"Idempotency-Key": "k2"})
    assert_error(reply, 422, "idempotency_key_reused")


async def test_keys_are_scoped_per_api_key(api: Api) -> None:
    quote = await api.quote()
    assert (await api.launch(quote["id"], key="shared")).status == 201
    other = await api.call("POST", "/v1/clusters", json={"quoteId": quote["id"]},
                           headers={"Idempotency-Key": "shared"}, key="someone-else")
    assert_error(other, 409, "quote_consumed")  # executed afresh, not replayed


async def test_key_expires_after_24_hours(api: Api) -> None:
    body = {"sizeGb": 100, "location": "us-tx"}
    first = await api.call("POST", "/v1/volumes", json=body, headers={"Idempotency-Key": "v"})
    assert first.status == 201, first.text
    await api.advance(24 * 3600 - 1)
    replay = await api.call("POST", "/v1/volumes", json=body, headers={"Idempotency-Key": "v"})
    assert replay.headers.get("Idempotent-Replayed") == "true"
    await api.advance(1)
    fresh = await api.call("POST", "/v1/volumes", json=body, headers={"Idempotency-Key": "v"})
    assert fresh.status == 201 and "Idempotent-Replayed" not in fresh.headers
    assert fresh.body["id"] != first.body["id"]


async def test_capacity_unavailable_is_stored_and_replayed(api: Api) -> None:
    quote = await api.quote()
    capacity = {"accelerator": "h100-sxm-80gb", "location": "us-tx", "placeableNodes": 1}
    assert (await api.admin("POST", "/capacity", capacity)).status == 200
    first = await api.launch(quote["id"], key="cap")
    error = assert_error(first, 409, "capacity_unavailable")
    assert error["details"]["nodesPlaceable"] == 1

    capacity["placeableNodes"] = 8
    assert (await api.admin("POST", "/capacity", capacity)).status == 200
    again = await api.launch(quote["id"], key="cap")
    assert again.status == 409 and again.headers["Idempotent-Replayed"] == "true"
    assert again.text == first.text
    # A new key runs the launch again, now with capacity: the quote stayed usable.
    assert (await api.launch(quote["id"], key="cap-2")).status == 201


async def test_price_changed_is_not_stored(api: Api) -> None:
    quote = await api.quote()
    wrong = await api.launch(quote["id"], key="pc", shape={**SHAPE, "nodes": 4})
    error = assert_error(wrong, 409, "price_changed")
    assert error["details"] == {"field": "shape.nodes", "quoted": 2, "requested": 4}
    # The key was released: the corrected request (a different body) runs normally.
    fixed = await api.launch(quote["id"], key="pc", shape=SHAPE)
    assert fixed.status == 201, fixed.text
    assert "Idempotent-Replayed" not in fixed.headers


async def test_early_rejections_are_not_stored(api: Api) -> None:
    # 400 (validation) and 404 (unknown quote) both leave the key unused.
    assert_error(await api.launch("qte_nope", key="early"), 404, "not_found")
    again = await api.launch("qte_nope", key="early")
    assert_error(again, 404) and "Idempotent-Replayed" not in again.headers
    bad = await api.call("POST", "/v1/clusters/quote", json={"shape": SHAPE, "x": 1},
                         headers={"Idempotency-Key": "early-2"})
    assert_error(bad, 400)
    good = await api.call("POST", "/v1/clusters/quote", json={"shape": SHAPE},
                          headers={"Idempotency-Key": "early-2"})
    assert good.status == 201


async def test_quote_consumed_without_a_key(api: Api) -> None:
    quote = await api.quote()
    assert (await api.launch(quote["id"])).status == 201
    error = assert_error(await api.launch(quote["id"]), 409, "quote_consumed")
    assert error["details"]["clusterId"].startswith("clu_")


async def test_key_in_use_while_the_first_request_is_held(api: Api) -> None:
    quote = await api.quote()
    fault = {"route": "POST /v1/clusters", "delaySeconds": 0.3, "count": 1}
    assert (await api.admin("POST", "/faults", fault)).status == 201
    first, second = await asyncio.gather(
        api.launch(quote["id"], key="busy"), api.launch(quote["id"], key="busy")
    )
    replies = sorted([first, second], key=lambda r: r.status)
    assert replies[0].status == 201, replies[0].text
    assert_error(replies[1], 409, "idempotency_key_in_use")
    # Once finished, the key replays.
    third = await api.launch(quote["id"], key="busy")
    assert third.status == 201 and third.headers["Idempotent-Replayed"] == "true"


async def test_recover_honours_keys(api: Api) -> None:
    cluster = await api.running_cluster()
    await api.admin("POST", f"/clusters/{cluster['id']}/nodes/1/fail", {"mode": "stopped"})
    path = f"/v1/clusters/{cluster['id']}/recover"
    first = await api.call("POST", path, json={}, headers={"Idempotency-Key": "r"})
    assert first.status == 202, first.text
    again = await api.call("POST", path, json={}, headers={"Idempotency-Key": "r"})
    assert again.status == 202 and again.headers["Idempotent-Replayed"] == "true"
    unkeyed = await api.call("POST", path, json={})
    assert_error(unkeyed, 409, "recovery_in_progress")


async def test_keys_on_non_post_methods_are_ignored(api: Api) -> None:
    cluster = await api.running_cluster()
    path = f"/v1/clusters/{cluster['id']}"
    first = await api.call("PATCH", path, json={"name": "a"}, headers={"Idempotency-Key": "p"})
    second = await api.call("PATCH", path, json={"name": "b"}, headers={"Idempotency-Key": "p"})
    assert (first.status, second.status) == (200, 200)
    assert second.body["name"] == "b"
