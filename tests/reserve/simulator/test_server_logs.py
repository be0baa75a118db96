"""Node logs (contract §3): JSON by default, SSE on `Accept: text/event-stream`, finite, with
`id:` = the line's timestamp and resume by `Last-Event-ID`."""

from __future__ import annotations

import json
from typing import Any

from tests.reserve.simulator.conftest import Api, assert_error


def _parse_sse(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            fields[name] = value
        events.append({"id": fields["id"], **json.loads(fields["data"])})
    return events


async def test_json_logs_default_to_rank_0(api: Api) -> None:
    cluster = await api.running_cluster()
    reply = await api.call("GET", f"/v1/clusters/{cluster['id']}/logs")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
    assert reply.body["clusterId"] == cluster["id"] and reply.body["node"] == 0
    assert reply.body["lines"] and reply.body["nextSince"] == reply.body["lines"][-1]["ts"]
    assert set(reply.body["lines"][0]) == {"ts", "stream", "line"}


async def test_json_logs_filters(api: Api) -> None:
    cluster = await api.running_cluster()
    path = f"/v1/clusters/{cluster['id']}/logs"
    node1 = await api.call("GET", path, params={"node": "1", "tail": "2", "stream": "stdout"})
    assert node1.body["node"] == 1 and len(node1.body["lines"]) == 2
    assert {line["stream"] for line in node1.body["lines"]} == {"stdout"}
    everything = (await api.call("GET", path, params={"tail": "5000"})).body["lines"]
    since = everything[0]["ts"]
    later = (await api.call("GET", path, params={"since": since, "tail": "5000"})).body["lines"]
    assert later and all(line["ts"] > since for line in later)
    also_later = await api.call("GET", path, params={"since": since.replace("Z", "+00:00")})
    assert also_later.status == 200


async def test_sse_sends_what_exists_and_closes(api: Api) -> None:
    cluster = await api.running_cluster()
    path = f"/v1/clusters/{cluster['id']}/logs"
    as_json = (await api.call("GET", path, params={"tail": "5000"})).body["lines"]
    reply = await api.call("GET", path, params={"tail": "5000"},
                           headers={"Accept": "text/event-stream"})
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/event-stream")
    assert reply.headers["X-Request-Id"].startswith("req_")
    assert "RateLimit" in reply.headers
    events = _parse_sse(reply.text)
    assert [{k: e[k] for k in ("ts", "stream", "line")} for e in events] == as_json
    assert all(e["id"] == e["ts"] for e in events)


async def test_sse_resumes_after_last_event_id(api: Api) -> None:
    cluster = await api.running_cluster()
    path = f"/v1/clusters/{cluster['id']}/logs"
    sse = {"Accept": "text/event-stream"}
    first = _parse_sse((await api.call("GET", path, params={"tail": "5000"}, headers=sse)).text)
    # Something new happens on rank 0 after the first read.
    await api.admin("POST", f"/clusters/{cluster['id']}/nodes/0/fail", {"mode": "unhealthy"})
    await api.advance(5)
    resumed = await api.call("GET", path, params={"tail": "5000"},
                             headers={**sse, "Last-Event-ID": first[-1]["id"]})
    events = _parse_sse(resumed.text)
    assert events and all(e["ts"] > first[-1]["ts"] for e in events)
    assert any("unhealthy" in e["line"] for e in events)


async def test_sse_errors_are_json_envelopes(api: Api) -> None:
    reply = await api.call("GET", "/v1/clusters/clu_nope/logs",
                           headers={"Accept": "text/event-stream"})
    assert_error(reply, 404, "not_found")
    cluster = await api.running_cluster()
    bad = await api.call("GET", f"/v1/clusters/{cluster['id']}/logs",
                         headers={"Accept": "text/event-stream", "Last-Event-ID": "garbage"})
    assert assert_error(bad, 400, "invalid_request")["details"]["field"] == "Last-Event-ID"
