"""Every class of bad request gets the contract's 4xx envelope — never a 500 (contract §1, §7)."""

from __future__ import annotations

import json

import pytest

from tests.reserve.simulator.conftest import SHAPE, Api, assert_error

QUOTE = "/v1/clusters/quote"


async def test_non_json_body(api: Api) -> None:
    error = assert_error(await api.call("POST", QUOTE, data=b"shape=h100"), 400, "invalid_request")
    assert error["details"]["reason"] == "invalid_json"
    assert "JSON" in error["message"]


@pytest.mark.parametrize("raw", [b"{", b"NaN", b'{"shape": NaN}', b'{"x": 1e999}', b"\xff\xfe"])
async def test_broken_or_non_finite_json(api: Api, raw: bytes) -> None:
    assert_error(await api.call("POST", QUOTE, data=raw), 400, "invalid_request")


@pytest.mark.parametrize("body", [[1, 2], "text", 3, None, True])
async def test_body_must_be_an_object(api: Api, body: object) -> None:
    error = assert_error(await api.call("POST", QUOTE, data=json.dumps(body).encode()), 400,
                         "invalid_request")
    assert error["details"]["reason"] == "not_an_object"


async def test_unknown_top_level_field_names_it(api: Api) -> None:
    reply = await api.call("POST", QUOTE, json={"shape": SHAPE, "shmSizeGb": 64})
    error = assert_error(reply, 400, "invalid_request")
    assert error["details"]["field"] == "shmSizeGb"
    assert error["details"]["reason"] == "unknown_field"
    assert "shmSizeGb" in error["message"]


async def test_unknown_nested_field_names_its_path(api: Api) -> None:
    reply = await api.call("POST", QUOTE, json={"shape": {**SHAPE, "foo": 1}})
    error = assert_error(reply, 400, "invalid_request")
    assert error["details"]["field"] == "shape.foo"


async def test_snake_case_is_not_the_wire_format(api: Api) -> None:
    shape = {"accelerator": "h100-sxm-80gb", "gpus_per_node": 8, "nodes": 2}
    error = assert_error(await api.call("POST", QUOTE, json={"shape": shape}), 400)
    assert error["details"]["field"] == "shape.gpus_per_node"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"shape": {**SHAPE, "nodes": "2"}}, "shape.nodes"),
        ({"shape": {**SHAPE, "nodes": 2.5}}, "shape.nodes"),
        ({"shape": {**SHAPE, "nodes": True}}, "shape.nodes"),
        ({"shape": SHAPE, "orchestrator": "k8s"}, "orchestrator"),
        ({"shape": SHAPE, "storage": {"sizeGb": "big"}}, "storage.sizeGb"),
        ({"shape": "h100"}, "shape"),
        ({}, "shape"),
    ],
)
async def test_wrong_types_and_missing_fields(api: Api, body: dict, field: str) -> None:
    error = assert_error(await api.call("POST", QUOTE, json=body), 400, "invalid_request")
    assert error["details"]["field"] == field
    assert field in error["message"]


async def test_launch_list_items_are_named_by_index(api: Api) -> None:
    reply = await api.call("POST", "/v1/clusters",
                           json={"quoteId": "qte_x", "ports": ["8000/http", 22]})
    assert assert_error(reply, 400)["details"]["field"] == "ports[1]"


@pytest.mark.parametrize(
    "body",
    [
        {"shape": {**SHAPE, "nodes": 10**30}},
        {"shape": {**SHAPE, "gpusPerNode": -(10**40)}},
        {"shape": SHAPE, "rootDiskGb": 10**30},
        {"shape": SHAPE, "storage": {"sizeGb": 10**30}},
        {"shape": SHAPE, "rootDiskGb": -1},
    ],
)
async def test_huge_and_negative_numbers_are_4xx(api: Api, body: dict) -> None:
    reply = await api.call("POST", QUOTE, json=body)
    assert_error(reply, 400)
    assert reply.error["code"] in ("invalid_request", "invalid_shape")


async def test_body_over_64_kib(api: Api) -> None:
    big = {"shape": SHAPE, "padding": "x" * (65 * 1024)}
    error = assert_error(await api.call("POST", QUOTE, json=big), 400, "invalid_request")
    assert error["details"]["reason"] == "body_too_large"


async def test_chunked_body_over_64_kib(api: Api) -> None:
    async def chunks():
        for _ in range(70):
            yield b"x" * 1024

    error = assert_error(await api.call("POST", QUOTE, data=chunks()), 400, "invalid_request")
    assert error["details"]["reason"] == "body_too_large"


async def test_deeply_nested_json(api: Api) -> None:
    raw = b"[" * 20000 + b"]" * 20000
    assert_error(await api.call("POST", QUOTE, data=raw), 400, "invalid_request")


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/clusters", {"limit": "0"}, "limit"),
        ("/v1/clusters", {"limit": "201"}, "limit"),
        ("/v1/clusters", {"limit": "ten"}, "limit"),
        ("/v1/clusters", {"limit": "99999999999999999999999"}, "limit"),
        ("/v1/clusters", {"status": "running,sleeping"}, "status"),
        ("/v1/clusters", {"cursor": "not-a-cursor"}, "cursor"),
        ("/v1/clusters", {"cursor": "eyJvIjotMSwiYSI6MX0"}, "cursor"),
        ("/v1/clusters", {"sort": "name"}, "sort"),
        ("/v1/volumes", {"limit": "-3"}, "limit"),
        ("/v1/account", {"verbose": "1"}, "verbose"),
    ],
)
async def test_bad_query_params(api: Api, path: str, params: dict, field: str) -> None:
    error = assert_error(await api.call("GET", path, params=params), 400, "invalid_request")
    assert error["details"]["field"] == field


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tail": "0"}, "tail"), ({"tail": "5001"}, "tail"), ({"node": "-1"}, "node"),
        ({"node": "one"}, "node"), ({"since": "yesterday"}, "since"),
        ({"since": "2026-11-29T10:00:00"}, "since"), ({"stream": "stdin"}, "stream"),
    ],
)
async def test_bad_log_query_params(api: Api, params: dict, field: str) -> None:
    cluster = await api.running_cluster()
    reply = await api.call("GET", f"/v1/clusters/{cluster['id']}/logs", params=params)
    assert assert_error(reply, 400, "invalid_request")["details"]["field"] == field


async def test_log_node_out_of_the_cluster_is_4xx(api: Api) -> None:
    cluster = await api.running_cluster()
    reply = await api.call("GET", f"/v1/clusters/{cluster['id']}/logs", params={"node": "7"})
    assert 400 <= reply.status < 500
    assert_error(reply, reply.status)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/clusters/clu_nope"), ("DELETE", "/v1/clusters/clu_nope"),
        ("GET", "/v1/clusters/clu_nope/logs"), ("GET", "/v1/clusters/clu_nope/events"),
        ("GET", "/v1/clusters/quotes/qte_nope"), ("GET", "/v1/volumes/vol_nope"),
        ("DELETE", "/v1/volumes/vol_nope"),
    ],
)
async def test_unknown_ids_are_404(api: Api, method: str, path: str) -> None:
    assert_error(await api.call(method, path), 404, "not_found")


async def test_unknown_ids_in_bodies_and_actions_are_404(api: Api) -> None:
    assert_error(await api.launch("qte_nope"), 404, "not_found")
    assert_error(await api.call("POST", "/v1/clusters/clu_nope/recover", json={}), 404)
    assert_error(await api.call("POST", "/v1/clusters/clu_nope/terminate", json={}), 404)
    assert_error(await api.call("PATCH", "/v1/clusters/clu_nope", json={"name": "x"}), 404)
    assert_error(await api.call("PATCH", "/v1/clusters/clu_nope/recovery",
                                json={"auto": True}), 404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/nope"), ("GET", "/v1"), ("GET", "/"), ("GET", "/v2/clusters"),
        ("POST", "/v1/clusters/clu_1/stop"), ("POST", "/v1/clusters/clu_1/start"),
        ("PUT", "/v1/clusters"), ("DELETE", "/v1/clusters"), ("POST", "/v1/account"),
        ("PATCH", "/v1/clusters"), ("GET", "/v1/clusters/clu_1/"), ("HEAD", "/v1/account"),
        ("OPTIONS", "/v1/clusters"), ("POST", "/v1/health"),
    ],
)
async def test_unknown_routes_and_methods_are_404(api: Api, method: str, path: str) -> None:
    reply = await api.call(method, path)
    assert reply.status == 404
    if method != "HEAD":
        assert_error(reply, 404, "not_found")


async def test_stop_explains_there_is_no_stop(api: Api) -> None:
    cluster = await api.running_cluster()
    reply = await api.call("POST", f"/v1/clusters/{cluster['id']}/stop", json={})
    assert "terminate" in assert_error(reply, 404, "not_found")["message"]


async def test_rename_only(api: Api) -> None:
    cluster = await api.running_cluster()
    path = f"/v1/clusters/{cluster['id']}"
    error = assert_error(await api.call("PATCH", path, json={"name": "x", "status": "running"}),
                         400, "invalid_request")
    assert error["details"]["field"] == "status"
    assert_error(await api.call("PATCH", path, json={"shape": SHAPE}), 400, "invalid_request")
    assert_error(await api.call("PATCH", path, json={"name": 5}), 400, "invalid_request")
    assert_error(await api.call("PATCH", path, json={}), 400, "invalid_request")
    renamed = await api.call("PATCH", path, json={"name": "dsv3-serve"})
    assert renamed.status == 200 and renamed.body["name"] == "dsv3-serve"


async def test_recover_and_terminate_bodies_are_strict(api: Api) -> None:
    cluster = await api.running_cluster()
    base = f"/v1/clusters/{cluster['id']}"
    assert_error(await api.call("POST", f"{base}/recover", json={"force": True}), 400)
    assert_error(await api.call("POST", f"{base}/terminate", json={"now": True}), 400)
    assert_error(await api.call("PATCH", f"{base}/recovery", json={"auto": "yes"}), 400)


@pytest.mark.parametrize("key", ["", "k" * 256])
async def test_idempotency_key_length(api: Api, key: str) -> None:
    reply = await api.call("POST", QUOTE, json={"shape": SHAPE}, headers={"Idempotency-Key": key})
    error = assert_error(reply, 400, "invalid_request")
    assert error["details"]["field"] == "Idempotency-Key"


async def test_idempotency_key_of_255_chars_is_fine(api: Api) -> None:
    reply = await api.call("POST", QUOTE, json={"shape": SHAPE},
                           headers={"Idempotency-Key": "k" * 255})
    assert reply.status == 201, reply.text


async def test_engine_rule_violations_are_typed_envelopes(api: Api) -> None:
    reply = await api.call("POST", QUOTE, json={"shape": {**SHAPE, "nodes": 9}})
    error = assert_error(reply, 400, "invalid_shape")
    assert error["details"]["field"] == "shape.nodes"
    volume = await api.call("POST", "/v1/volumes", json={"sizeGb": 100, "location": "us-tx"})
    assert volume.status == 201, volume.text
    shrink = await api.call("PATCH", f"/v1/volumes/{volume.body['id']}", json={"sizeGb": 50})
    assert_error(shrink, 400, "invalid_request")


_ROUTES = [
    ("POST", "/v1/clusters/quote"), ("POST", "/v1/clusters"), ("POST", "/v1/volumes"),
    ("POST", "/v1/clusters/{cid}/recover"), ("POST", "/v1/clusters/{cid}/terminate"),
    ("PATCH", "/v1/clusters/{cid}"), ("PATCH", "/v1/clusters/{cid}/recovery"),
    ("PATCH", "/v1/volumes/{vid}"),
]
_NASTY = [
    {"shape": None}, {"quoteId": 10**400}, {"sizeGb": -(2**70), "location": "us-tx"},
    {"sizeGb": 2**70, "location": "nowhere"}, {"name": "x" * 60000}, {"name": ""},
    {"auto": None}, {"quoteId": "", "env": {"": ""}}, {"quoteId": "qte_x", "env": {"A": "\x00"}},
    {"quoteId": "qte_x", "ports": ["99999/http"]}, {"quoteId": "qte_x", "dockerStartCmd": [[]]},
    {"shape": {"accelerator": "", "gpusPerNode": 0, "nodes": 0}, "location": "\u2603"},
    {"shape": {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 2},
     "storage": {"sizeGb": 100}, "volumeId": "vol_x"},
]


async def test_nasty_bodies_never_reach_a_500(api: Api) -> None:
    cluster = await api.running_cluster()
    volume = await api.call("POST", "/v1/volumes", json={"sizeGb": 100, "location": "us-tx"})
    for method, template in _ROUTES:
        path = template.format(cid=cluster["id"], vid=volume.body["id"])
        for body in _NASTY:
            reply = await api.call(method, path, json=body)
            assert reply.status < 500, (method, path, body, reply.text)
            if reply.status >= 400:
                assert_error(reply, reply.status)
