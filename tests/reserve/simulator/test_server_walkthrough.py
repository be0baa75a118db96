"""The curl-style walkthrough, end to end over HTTP on the virtual clock: quote 4 × 8 H100,
launch with an Idempotency-Key, boot, lose a node, recover it (same interconnect address), read
the accrued cost, terminate."""

from __future__ import annotations

from tests.reserve.simulator.conftest import Api, assert_error

SHAPE_4x8 = {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 4}


async def test_walkthrough(api: Api) -> None:
    # 1. Quote: the whole cluster, priced as a sum of its components.
    quoted = await api.call("POST", "/v1/clusters/quote",
                            json={"shape": SHAPE_4x8, "location": "us-tx",
                                  "storage": {"sizeGb": 1000}})
    assert quoted.status == 201, quoted.text
    quote = quoted.body
    assert quote["totalGpus"] == 32 and quote["id"].startswith("qte_")
    breakdown = quote["breakdown"]
    assert breakdown["gpus"]["hourlyCents"] == 32 * 390
    assert quote["rate"]["hourlyCents"] == sum(
        line["hourlyCents"] for line in breakdown.values() if line
    )
    assert (await api.call("GET", f"/v1/clusters/quotes/{quote['id']}")).body == quote

    # 2. Launch with an Idempotency-Key; a retried click gets the same cluster.
    body = {"quoteId": quote["id"], "name": "dsv3-serve", "image": "vllm/vllm-openai:latest",
            "env": {"MALLOC_ARENA_MAX": "1"}, "ports": ["8000/http"]}
    key = {"Idempotency-Key": "6f1c1d8e-launch"}
    launched = await api.call("POST", "/v1/clusters", json=body, headers=key)
    assert launched.status == 201, launched.text
    cluster_id = launched.body["id"]
    assert launched.headers["Location"] == f"/v1/clusters/{cluster_id}"
    assert launched.body["status"] == "provisioning" and launched.body["connections"] is None
    retried = await api.call("POST", "/v1/clusters", json=body, headers=key)
    assert retried.body["id"] == cluster_id and retried.headers["Idempotent-Replayed"] == "true"

    # 3. Time passes on the virtual clock until every node runs.
    await api.advance(60)
    running = (await api.call("GET", f"/v1/clusters/{cluster_id}")).body
    assert running["status"] == "running" and running["readyAt"] is not None
    assert running["lockedRate"] == quote["rate"]
    assert len(running["connections"]["nodes"]) == 4
    address = running["nodes"][2]["interconnectAddress"]

    # 4. A node is lost: degraded, still billing at the locked rate.
    failed = await api.admin("POST", f"/clusters/{cluster_id}/nodes/2/fail", {"mode": "stopped"})
    assert failed.body["status"] == "degraded"
    assert failed.body["recovery"]["episode"] == 1

    # 5. One recovery attempt now: 202 in progress, then running with the same address.
    recovering = await api.call("POST", f"/v1/clusters/{cluster_id}/recover", json={},
                                headers={"Idempotency-Key": "recover-1"})
    assert recovering.status == 202, recovering.text
    assert recovering.body["recovery"]["state"] == "in_progress"
    await api.advance(30)
    recovered = (await api.call("GET", f"/v1/clusters/{cluster_id}")).body
    assert recovered["status"] == "running"
    assert recovered["nodes"][2]["interconnectAddress"] == address
    assert recovered["recovery"]["attemptsUsed"] == 1
    assert_error(await api.call("POST", f"/v1/clusters/{cluster_id}/recover", json={}),
                 409, "not_degraded")

    # 6. An hour later: two started hours at the locked rate.
    await api.advance(3600)
    billed = (await api.call("GET", f"/v1/clusters/{cluster_id}")).body["billing"]
    assert billed["accruedHours"] == 2
    assert billed["accruedCents"] == 2 * quote["rate"]["hourlyCents"]

    # 7. Terminate: 202, then a no-op 200; the volume survives.
    terminated = await api.call("DELETE", f"/v1/clusters/{cluster_id}")
    assert terminated.status == 202 and terminated.body["status"] == "terminating"
    again = await api.call("POST", f"/v1/clusters/{cluster_id}/terminate", json={})
    assert again.status == 200
    await api.advance(60)
    final = (await api.call("GET", f"/v1/clusters/{cluster_id}")).body
    assert final["status"] == "terminated"
    assert final["billing"]["accruedCents"] == billed["accruedCents"]
    volume = (await api.call("GET", f"/v1/volumes/{final['volume']['id']}")).body
    assert volume["status"] == "available"
    events = (await api.call("GET", f"/v1/clusters/{cluster_id}/events",
                             params={"limit": "200"})).body["data"]
    types = [e["type"] for e in events]
    for expected in ("cluster.running", "cluster.degraded", "cluster.recovered",
                     "cluster.terminated"):
        assert expected in types
