"""Lists: `{data, nextCursor}`, limit/cursor paging, `?status=` filters (contract §1, §3)."""

from __future__ import annotations

from tests.reserve.simulator.conftest import Api, assert_error


async def _launch_n(api: Api, n: int) -> list[str]:
    ids = []
    for i in range(n):
        quote = await api.quote()
        reply = await api.launch(quote["id"], name=f"c{i}")
        assert reply.status == 201, reply.text
        ids.append(reply.body["id"])
        await api.advance(1)  # distinct createdAt, so "newest first" is unambiguous
    return ids


async def _all_pages(api: Api, path: str, **params: str) -> tuple[list[str], int]:
    seen: list[str] = []
    pages = 0
    cursor = None
    while True:
        query = dict(params, **({"cursor": cursor} if cursor else {}))
        reply = await api.call("GET", path, params=query)
        assert reply.status == 200, reply.text
        assert set(reply.body) == {"data", "nextCursor"}
        pages += 1
        seen += [item["id"] for item in reply.body["data"]]
        cursor = reply.body["nextCursor"]
        if cursor is None:
            return seen, pages


async def test_seven_clusters_in_pages_of_three(api: Api) -> None:
    ids = await _launch_n(api, 7)
    seen, pages = await _all_pages(api, "/v1/clusters", limit="3")
    assert pages == 3
    assert seen == list(reversed(ids))  # newest first, nothing lost or repeated


async def test_default_limit_and_one_page(api: Api) -> None:
    ids = await _launch_n(api, 3)
    reply = await api.call("GET", "/v1/clusters")
    assert [c["id"] for c in reply.body["data"]] == list(reversed(ids))
    assert reply.body["nextCursor"] is None


async def test_pages_stay_stable_when_new_clusters_arrive(api: Api) -> None:
    ids = await _launch_n(api, 4)
    first = await api.call("GET", "/v1/clusters", params={"limit": "2"})
    assert [c["id"] for c in first.body["data"]] == [ids[3], ids[2]]
    await _launch_n(api, 2)  # two newer clusters push everything down by two
    second = await api.call("GET", "/v1/clusters",
                            params={"limit": "2", "cursor": first.body["nextCursor"]})
    assert [c["id"] for c in second.body["data"]] == [ids[1], ids[0]]


async def test_status_filter(api: Api) -> None:
    ids = await _launch_n(api, 3)
    await api.advance(120)  # all running
    reply = await api.call("DELETE", f"/v1/clusters/{ids[0]}")
    assert reply.status == 202
    running = await api.call("GET", "/v1/clusters", params={"status": "running"})
    assert {c["id"] for c in running.body["data"]} == {ids[1], ids[2]}
    both = await api.call("GET", "/v1/clusters", params={"status": "running,terminating"})
    assert {c["id"] for c in both.body["data"]} == set(ids)
    none = await api.call("GET", "/v1/clusters", params={"status": "failed"})
    assert none.body == {"data": [], "nextCursor": None}


async def test_volumes_and_catalog_lists(api: Api) -> None:
    for size in (100, 200, 300):
        created = await api.call("POST", "/v1/volumes", json={"sizeGb": size, "location": "us-tx"})
        assert created.status == 201, created.text
        assert created.headers["Location"] == f"/v1/volumes/{created.body['id']}"
    seen, pages = await _all_pages(api, "/v1/volumes", limit="2")
    assert len(seen) == 3 and len(set(seen)) == 3 and pages == 2

    accelerators = await api.call("GET", "/v1/accelerators")
    ids = [a["id"] for a in accelerators.body["data"]]
    assert "h100-sxm-80gb" in ids and accelerators.body["nextCursor"] is None
    locations = await api.call("GET", "/v1/locations")
    assert {loc["id"] for loc in locations.body["data"]} >= {"us-tx", "eu-ro"}


async def test_events_feed_pages_oldest_first(api: Api) -> None:
    cluster = await api.running_cluster()
    path = f"/v1/clusters/{cluster['id']}/events"
    everything = await api.call("GET", path, params={"limit": "200"})
    assert everything.status == 200
    events = everything.body["data"]
    assert events[0]["type"] == "cluster.provisioning"
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    seen, _ = await _all_pages(api, path, limit="1")
    assert seen == [e["id"] for e in events]


async def test_cursor_from_elsewhere_is_refused(api: Api) -> None:
    reply = await api.call("GET", "/v1/clusters", params={"cursor": "%%%"})
    assert_error(reply, 400, "invalid_request")
