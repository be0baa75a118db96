"""What the client puts on the wire, and how it reads lists, streams and polls."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pydantic
import pytest
from aiohttp import web

from bot.reserve import errors as e
from bot.reserve.client import (
    AsyncAIReserveClient,
    ClusterWaitTimeout,
    UnexpectedResponse,
    _read_sse,
)
from bot.reserve.schemas import ClusterStatus, Shape, ShapeRequest
from tests.reserve.conftest import (
    API_KEY,
    cluster_json,
    error_body,
    quote_json,
    volume_json,
)

ACCOUNT = {"balanceCents": 100, "paymentStatus": "current", "paymentGraceSeconds": 3600}


# --- headers and bodies ---------------------------------------------------------------------


async def test_bearer_auth_user_agent_and_json_accept(fake_api, make_client):
    fake_api.reply("GET", "/account", (200, ACCOUNT))
    await make_client().get_account()
    headers = fake_api.seen[0].headers
    assert headers["Authorization"] == f"Bearer {API_KEY}"
    assert headers["User-Agent"].startswith("cluster-bot/")
    assert headers["Accept"] == "application/json"


async def test_health_is_sent_without_credentials(fake_api, make_client):
    fake_api.reply("GET", "/health", (200, {"ok": True, "version": "1"}))
    health = await make_client().health()
    assert health.ok
    assert "Authorization" not in fake_api.seen[0].headers


async def test_repr_does_not_show_the_key(make_client):
    assert API_KEY not in repr(make_client())


async def test_quote_body_from_accelerator_and_counts(fake_api, make_client):
    fake_api.reply("POST", "/clusters/quote", (201, quote_json()))
    quote = await make_client().quote_cluster(
        "h100-sxm-80gb", 8, 2, location="us-tx", root_disk_gb=100, storage_gb=1000,
        orchestrator="slurm",
    )
    assert quote.rate.hourly_cents == 6253
    assert quote.breakdown.total_cents == 6253
    sent = fake_api.seen[0]
    assert sent.body == {
        "shape": {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 2},
        "orchestrator": "slurm", "location": "us-tx", "rootDiskGb": 100,
        "storage": {"sizeGb": 1000},
    }
    assert sent.headers["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("shape", [
    ShapeRequest(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2),
    Shape(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2),
])
async def test_quote_accepts_a_shape_model(fake_api, make_client, shape):
    fake_api.reply("POST", "/clusters/quote", (201, quote_json()))
    await make_client().quote_cluster(shape, volume_id="vol_1")
    assert fake_api.seen[0].body == {
        "shape": {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 2},
        "volumeId": "vol_1",
    }


@pytest.mark.parametrize(("args", "kwargs"), [
    (("h100-sxm-80gb",), {}), (("h100-sxm-80gb", 8), {}),
    ((ShapeRequest(accelerator="a", gpus_per_node=1, nodes=2), 8, 2), {}),
])
async def test_quote_refuses_an_ambiguous_shape_before_sending(fake_api, make_client, args,
                                                               kwargs):
    with pytest.raises(TypeError):
        await make_client().quote_cluster(*args, **kwargs)
    assert fake_api.seen == []


async def test_launch_body_is_camel_case_and_carries_the_key(fake_api, make_client):
    fake_api.reply("POST", "/clusters", (201, cluster_json()))
    await make_client().launch_cluster(
        "qte_1", idempotency_key="launch-1", name="dsv3", image="vllm/vllm-openai:latest",
        docker_start_cmd=["bash", "-lc", "start.sh"], env={"MALLOC_ARENA_MAX": "1"},
        ports=["8000/http"], ssh_keys=["ssh-ed25519 AAAA alice"], auto_recovery=True,
        shape=Shape(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2), storage_gb=1000,
    )
    sent = fake_api.seen[0]
    assert sent.headers["Idempotency-Key"] == "launch-1"
    assert sent.body == {
        "quoteId": "qte_1", "name": "dsv3", "image": "vllm/vllm-openai:latest",
        "dockerStartCmd": ["bash", "-lc", "start.sh"], "env": {"MALLOC_ARENA_MAX": "1"},
        "ports": ["8000/http"], "sshKeys": ["ssh-ed25519 AAAA alice"],
        "recovery": {"auto": True},
        "shape": {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 2},
        "storage": {"sizeGb": 1000},
    }


async def test_a_malformed_launch_is_caught_before_sending(fake_api, make_client):
    with pytest.raises(pydantic.ValidationError):
        await make_client().launch_cluster("qte_1", idempotency_key="k",
                                           env={"N": 1})
    with pytest.raises(ValueError, match="Idempotency-Key"):
        await make_client().launch_cluster("qte_1", idempotency_key="")
    with pytest.raises(ValueError, match="Idempotency-Key"):
        await make_client().launch_cluster("qte_1", idempotency_key="k" * 256)
    assert fake_api.seen == []


async def test_cluster_actions_use_the_contract_routes(fake_api, make_client):
    for method, path in [("DELETE", "/clusters/clu_1"), ("POST", "/clusters/clu_1/recover"),
                         ("PATCH", "/clusters/clu_1/recovery"), ("PATCH", "/clusters/clu_1")]:
        fake_api.reply(method, path, (200, cluster_json()))
    fake_api.reply("GET", "/clusters/quotes/qte_1", (200, quote_json()))
    client = make_client()
    await client.terminate_cluster("clu_1")
    await client.recover_cluster("clu_1", idempotency_key="rec-1")
    await client.set_auto_recovery("clu_1", True)
    await client.rename_cluster("clu_1", "renamed")
    assert (await client.get_quote("qte_1")).id == "qte_1"
    assert [(s.method, s.path, s.body) for s in fake_api.seen] == [
        ("DELETE", "/v1/clusters/clu_1", None),
        ("POST", "/v1/clusters/clu_1/recover", {}),
        ("PATCH", "/v1/clusters/clu_1/recovery", {"auto": True}),
        ("PATCH", "/v1/clusters/clu_1", {"name": "renamed"}),
        ("GET", "/v1/clusters/quotes/qte_1", None),
    ]
    assert fake_api.seen[1].headers["Idempotency-Key"] == "rec-1"


async def test_volume_calls_use_the_contract_routes(fake_api, make_client):
    fake_api.reply("POST", "/volumes", (201, volume_json()))
    fake_api.reply("GET", "/volumes/vol_1", (200, volume_json()))
    fake_api.reply("PATCH", "/volumes/vol_1", (200, volume_json()))
    fake_api.reply("DELETE", "/volumes/vol_1", (202, volume_json()))
    client = make_client()
    await client.create_volume(1000, "us-tx", name="weights")
    await client.get_volume("vol_1")
    await client.resize_volume("vol_1", 2000)
    await client.rename_volume("vol_1", "w2")
    await client.delete_volume("vol_1")
    assert [(s.method, s.body) for s in fake_api.seen] == [
        ("POST", {"name": "weights", "sizeGb": 1000, "location": "us-tx"}),
        ("GET", None), ("PATCH", {"sizeGb": 2000}), ("PATCH", {"name": "w2"}), ("DELETE", None),
    ]


async def test_ids_are_one_escaped_path_segment(fake_api, make_client):
    with pytest.raises(e.NotFound):
        await make_client().get_cluster("../account")
    assert fake_api.seen[0].raw_path == "/v1/clusters/..%2Faccount"


async def test_log_query_defaults_to_rank_zero(fake_api, make_client):
    logs = {"clusterId": "clu_1", "node": 0, "lines": [], "nextSince": None}
    fake_api.reply("GET", "/clusters/clu_1/logs", (200, logs))
    client = make_client()
    await client.cluster_logs("clu_1")
    await client.cluster_logs("clu_1", node=1, tail=5, stream="stderr",
                              since=datetime(2026, 11, 29, 10, 0, 1, 500, tzinfo=UTC))
    assert fake_api.seen[0].query == {"node": "0", "tail": "100"}
    assert fake_api.seen[1].query == {"node": "1", "tail": "5", "stream": "stderr",
                                      "since": "2026-11-29T10:00:01Z"}


# --- pagination -------------------------------------------------------------------------------


async def test_iter_clusters_follows_next_cursor_until_null(fake_api, make_client):
    fake_api.reply("GET", "/clusters",
                   (200, {"data": [cluster_json("clu_3"), cluster_json("clu_2")],
                          "nextCursor": "c2"}),
                   (200, {"data": [cluster_json("clu_1")], "nextCursor": None}))
    client = make_client()
    ids = [c.id async for c in client.iter_clusters(
        [ClusterStatus.RUNNING, "degraded"], page_size=2)]
    assert ids == ["clu_3", "clu_2", "clu_1"]
    assert [s.query for s in fake_api.seen] == [
        {"status": "running,degraded", "limit": "2"},
        {"status": "running,degraded", "limit": "2", "cursor": "c2"},
    ]


async def test_list_helpers_collect_every_page(fake_api, make_client):
    fake_api.reply("GET", "/clusters", (200, {"data": [cluster_json("a")], "nextCursor": "x"}),
                   (200, {"data": [cluster_json("b")]}))
    fake_api.reply("GET", "/volumes", (200, {"data": [volume_json()], "nextCursor": None}))
    fake_api.reply("GET", "/locations", (200, {"data": [{"id": "us-tx", "name": "Texas"}]}))
    fake_api.reply("GET", "/clusters/clu_1/events", (200, {"data": [
        {"id": "evt_1", "type": "cluster.running", "clusterId": "clu_1",
         "at": "2026-11-29T10:00:10Z", "data": {}}], "nextCursor": None}))
    client = make_client()
    assert [c.id for c in await client.list_clusters("running")] == ["a", "b"]
    assert fake_api.seen[0].query == {"status": "running"}
    assert [v.id async for v in client.iter_volumes()] == ["vol_1"]
    assert [loc.id for loc in await client.list_locations()] == ["us-tx"]
    assert [ev.type async for ev in client.iter_events("clu_1")] == ["cluster.running"]


async def test_accelerator_location_filter(fake_api, make_client):
    accel = {"id": "h100-sxm-80gb", "name": "H100", "vendor": "nvidia", "memoryGb": 80,
             "maxGpusPerNode": 8, "clusterCapable": True, "cluster": {"perGpuHourlyCents": 390},
             "singleMachine": None, "locations": [{"id": "us-tx", "availability": "brand-new"}]}
    fake_api.reply("GET", "/accelerators", (200, {"data": [accel]}))
    [got] = await make_client().list_accelerators(location="us-tx")
    assert got.locations[0].availability == "other"  # unknown enum values do not raise
    assert fake_api.seen[0].query == {"location": "us-tx"}


async def test_a_repeated_cursor_is_an_error_not_an_endless_loop(fake_api, make_client):
    fake_api.reply("GET", "/volumes", (200, {"data": [], "nextCursor": "same"}))
    with pytest.raises(UnexpectedResponse, match="repeated a cursor"):
        await make_client().iter_volumes().__anext__()


# --- SSE --------------------------------------------------------------------------------------


async def _lines(*chunks: bytes):
    for chunk in chunks:
        yield chunk


async def test_sse_parser_follows_the_spec():
    raw = [b": keep-alive\n", b"retry: 1000\n", b"id: 1\r\n", b"event: log\n",
           b"data: first\n", b"data: second\n", b"\n", b"data: no id change\n", b"\n",
           b"event: ping\n", b"\n", b"id: 3\n", b"data: cut off"]
    events = [ev async for ev in _read_sse(_lines(*raw))]
    assert [(ev.id, ev.event, ev.data) for ev in events] == [
        ("1", "log", "first\nsecond"), ("1", None, "no id change"),
    ]


def sse_line(ts: str, line: str, stream: str = "stdout") -> bytes:
    data = json.dumps({"ts": ts, "stream": stream, "line": line})
    return f"id: {ts}\nevent: log\ndata: {data}\n\n".encode()


async def test_stream_cluster_logs_reads_sse(fake_api, make_client):
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b": hello\n\n")
        await resp.write(sse_line("2026-11-29T10:00:01Z", "boot"))
        await resp.write(sse_line("2026-11-29T10:00:02Z", "ready", "system"))
        await resp.write_eof()
        return resp

    fake_api.on("GET", "/clusters/clu_1/logs", handler)
    lines = [ln async for ln in make_client().stream_cluster_logs("clu_1", node=1)]
    assert [(ln.line, ln.stream) for ln in lines] == [("boot", "stdout"), ("ready", "system")]
    assert lines[0].ts == datetime(2026, 11, 29, 10, 0, 1, tzinfo=UTC)
    sent = fake_api.seen[0]
    assert sent.headers["Accept"] == "text/event-stream"
    assert sent.query["node"] == "1"
    assert "Last-Event-ID" not in sent.headers


async def test_a_dropped_stream_resumes_with_last_event_id(fake_api, make_client, sleeps):
    async def dropping(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(sse_line("2026-11-29T10:00:01Z", "one"))
        await resp.write(b"id: 2026-11-29T10:00:02Z\ndata: {\"ts\"")  # cut mid-event
        assert request.transport is not None
        request.transport.close()
        return resp

    async def rest(request: web.Request) -> web.StreamResponse:
        assert request.headers["Last-Event-ID"] == "2026-11-29T10:00:01Z"
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(sse_line("2026-11-29T10:00:02Z", "two"))
        await resp.write_eof()
        return resp

    fake_api.on("GET", "/clusters/clu_1/logs", dropping, rest)
    lines = [ln.line async for ln in make_client().stream_cluster_logs("clu_1")]
    assert lines == ["one", "two"]
    assert len(sleeps.delays) == 1


async def test_stream_errors_are_typed(fake_api, make_client):
    fake_api.reply("GET", "/clusters/nope/logs", (404, error_body("not_found", 404)))
    with pytest.raises(e.NotFound):
        _ = [ln async for ln in make_client().stream_cluster_logs("nope")]


async def test_a_non_json_sse_event_is_a_clear_error(fake_api, make_client):
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b"data: plain text\n\n")
        await resp.write_eof()
        return resp

    fake_api.on("GET", "/clusters/clu_1/logs", handler)
    with pytest.raises(UnexpectedResponse, match="SSE"):
        _ = [ln async for ln in make_client().stream_cluster_logs("clu_1")]


# --- polling ----------------------------------------------------------------------------------


async def test_wait_for_cluster_polls_with_the_injected_sleep(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/clusters/clu_1", (200, cluster_json()), (200, cluster_json()),
                   (200, cluster_json(status="running")))
    cluster = await make_client().wait_for_cluster("clu_1", interval=10)
    assert cluster.status is ClusterStatus.RUNNING
    assert sleeps.delays == [10, 10]


async def test_wait_for_cluster_accepts_strings(fake_api, make_client):
    fake_api.reply("GET", "/clusters/clu_1", (200, cluster_json(status="degraded")))
    cluster = await make_client().wait_for_cluster("clu_1", until={"degraded"})
    assert cluster.status is ClusterStatus.DEGRADED


async def test_wait_for_cluster_times_out_on_the_clock(fake_api, make_client, sleeps):
    fake_api.reply("GET", "/clusters/clu_1", (200, cluster_json()))
    with pytest.raises(ClusterWaitTimeout) as caught:
        await make_client().wait_for_cluster("clu_1", interval=10, timeout=30)
    assert caught.value.cluster.status is ClusterStatus.PROVISIONING
    assert sleeps.delays == [10, 10, 10]
    assert len(fake_api.seen) == 4
    assert isinstance(caught.value, TimeoutError)


# --- logging ----------------------------------------------------------------------------------


async def test_debug_logs_never_carry_secrets(fake_api, make_client, caplog):
    caplog.set_level(logging.DEBUG)
    secret_env, ssh_key = "hf_SECRETVALUE_123", "ssh-ed25519 AAAAC3SECRETKEY bob@host"
    fake_api.reply("POST", "/clusters",
                   (503, error_body("service_unavailable", 503,
                                    message=f"echoing {secret_env} back"),
                    {"X-Request-Id": "req_busy"}),
                   (201, cluster_json(), {"X-Request-Id": "req_ok"}))
    await make_client().launch_cluster(
        "qte_1", idempotency_key="k-log", env={"HF_TOKEN": secret_env}, ssh_keys=[ssh_key])
    text = caplog.text
    for secret in (API_KEY, "Bearer", secret_env, ssh_key, "AAAAC3SECRETKEY"):
        assert secret not in text
    client_lines = [r.getMessage() for r in caplog.records if r.name == "bot.reserve.client"]
    assert all(r.levelno == logging.DEBUG for r in caplog.records
               if r.name == "bot.reserve.client")
    assert "POST /clusters -> 503 (request req_busy), attempt 1" in client_lines
    assert "POST /clusters -> 201 (request req_ok), attempt 2" in client_lines


async def test_client_satisfies_the_port(session):
    from bot.reserve.port import ClusterProvider

    client: ClusterProvider = AsyncAIReserveClient(session, "http://127.0.0.1:1/v1", "k")
    assert callable(client.get_cluster)


async def test_a_bad_item_is_skipped_with_one_line_and_the_page_goes_on(fake_api, make_client,
                                                                         caplog):
    wrong = {**cluster_json("clu_bad"), "billing": {"accruedCents": "a lot of secret text"}}
    no_billing = {k: v for k, v in cluster_json("clu_nobill").items() if k != "billing"}
    no_id = {**cluster_json(), "id": 42, "shape": None}
    page = [cluster_json("clu_1"), wrong, no_billing, no_id, cluster_json("clu_2")]
    fake_api.reply("GET", "/clusters", (200, {"data": page, "nextCursor": "p2"}),
                   (200, {"data": [cluster_json("clu_3")], "nextCursor": None}))
    skipped = []
    with caplog.at_level(logging.WARNING, logger="bot.reserve.client"):
        got = [c.id async for c in make_client().iter_clusters(on_skip=skipped.append)]
    assert got == ["clu_1", "clu_2", "clu_3"]  # the rest of the page, and the next page
    assert [(s.id, s.field) for s in skipped] == [
        ("clu_bad", "billing.accruedCents"), ("clu_nobill", "billing"), (None, "id")]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all("\n" not in x for x in lines)
    assert "clu_bad" in lines[0] and "billing.accruedCents" in lines[0]
    assert "secret" not in " ".join(lines)  # the field, never its value
    assert not [r for r in caplog.records if r.exc_info]
