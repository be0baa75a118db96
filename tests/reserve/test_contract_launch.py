"""Contract suite — launch: workload settings, price_changed, expiry, single use, replay."""

from __future__ import annotations

import json

import pytest

from bot.reserve import errors as e
from bot.reserve.schemas import Shape
from tests.reserve.conftest import API_KEY, H100, PROVISION_SECONDS, launch, raw


async def test_docs_workload_settings_are_free(sim_client):
    quote = await sim_client.quote_cluster(H100, 8, 2, location="us-tx")
    cluster = await sim_client.launch_cluster(
        quote.id, idempotency_key="wl-1", name="dsv3-serve", image="vllm/vllm-openai:latest",
        docker_start_cmd=["bash", "-lc", "/workspace/start.sh"],
        env={"MALLOC_ARENA_MAX": "1", "HF_TOKEN": "hf_secret_value"},
        ports=["8000/http", "22/tcp"], ssh_keys=["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA alice@x"],
        auto_recovery=True,
    )
    assert cluster.locked_rate == quote.rate
    assert cluster.status == "provisioning"
    assert cluster.workload.env_keys == ["HF_TOKEN", "MALLOC_ARENA_MAX"]
    assert cluster.workload.ssh_key_count == 1
    assert cluster.recovery.auto is True
    # Env values never come back (they would land in Slack).
    assert "hf_secret_value" not in json.dumps(cluster.to_wire())


async def test_inv4_repeating_nodes_with_another_value_is_price_changed(sim_client):
    quote = await sim_client.quote_cluster(H100, 8, 2, location="us-tx")
    with pytest.raises(e.PriceChanged) as caught:
        await sim_client.launch_cluster(
            quote.id, idempotency_key="pc-1",
            shape=Shape(accelerator=H100, gpus_per_node=8, nodes=4))
    err = caught.value
    assert (err.status, err.field, err.quoted, err.requested) == (409, "shape.nodes", 2, 4)
    cluster = await sim_client.launch_cluster(
        quote.id, idempotency_key="pc-2", shape=quote.shape)
    assert cluster.shape == quote.shape  # the identical repeat is a 201


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"location": "us-ga"}, "location"),
    ({"root_disk_gb": 200}, "rootDiskGb"),
    ({"storage_gb": 500}, "storage.sizeGb"),
    ({"orchestrator": "ray"}, "orchestrator"),
])
async def test_docs_repeating_a_priced_field_with_another_value_is_price_changed(
        sim_client, kwargs, field):
    quote = await sim_client.quote_cluster(H100, 8, 2, location="us-tx", root_disk_gb=100,
                                           storage_gb=1000)
    with pytest.raises(e.PriceChanged) as caught:
        await sim_client.launch_cluster(quote.id, idempotency_key="pc", **kwargs)
    assert caught.value.field == field
    assert caught.value.requested == next(iter(kwargs.values()))


async def test_docs_identical_repeats_of_every_priced_field_are_accepted(sim_client):
    quote = await sim_client.quote_cluster(H100, 8, 2, location="us-tx", root_disk_gb=100,
                                           storage_gb=1000, orchestrator="slurm")
    cluster = await sim_client.launch_cluster(
        quote.id, idempotency_key="same", shape=quote.shape, location="us-tx",
        root_disk_gb=100, storage_gb=1000, orchestrator="slurm")
    assert cluster.locked_rate == quote.rate


async def test_inv5_launch_after_expiry_is_quote_expired(sim_client, admin):
    quote = await sim_client.quote_cluster(H100, 8, 2)
    await admin.advance(901)
    with pytest.raises(e.QuoteExpired) as caught:
        await sim_client.launch_cluster(quote.id, idempotency_key="late")
    assert caught.value.expires_at is not None


async def test_inv5_a_quote_launches_once(sim_client):
    quote, first = await launch(sim_client, key="first")
    with pytest.raises(e.QuoteConsumed) as caught:
        await sim_client.launch_cluster(quote.id, idempotency_key="second")
    assert caught.value.cluster_id == first.id


async def test_inv5_same_key_same_body_replays_the_same_launch(sim_client, admin):
    quote = await sim_client.quote_cluster(H100, 8, 2)
    first = await sim_client.launch_cluster(quote.id, idempotency_key="dup", name="x")
    again = await sim_client.launch_cluster(quote.id, idempotency_key="dup", name="x")
    assert again == first  # the stored 201, replayed
    assert [c.id for c in await sim_client.list_clusters()] == [first.id]
    await admin.advance(PROVISION_SECONDS * 2 + 3600)  # ready, then one more hour
    hours = [x for x in await admin.ledger() if x["kind"] == "cluster_hour"]
    assert {x["resourceId"] for x in hours} == {first.id}
    assert len(hours) == 2


async def test_inv5_a_504_after_launching_is_reconciled_by_the_client(sim_client, admin):
    # The simulator runs the launch, then answers 504: the client re-sends the same key and
    # gets the stored 201 back instead of a second cluster (or quote_consumed).
    await admin.fault("POST /v1/clusters", status=504, count=1)
    quote = await sim_client.quote_cluster(H100, 8, 2)
    cluster = await sim_client.launch_cluster(quote.id, idempotency_key="k-504")
    assert cluster.quote_id == quote.id
    assert [c.id for c in await sim_client.list_clusters()] == [cluster.id]


async def test_inv5_same_key_other_body_is_idempotency_key_reused(sim_client):
    quote = await sim_client.quote_cluster(H100, 8, 2)
    await sim_client.launch_cluster(quote.id, idempotency_key="reuse", name="a")
    with pytest.raises(e.IdempotencyKeyReused):
        await sim_client.launch_cluster(quote.id, idempotency_key="reuse", name="b")


async def test_docs_platform_env_names_are_reserved(sim_client):
    quote = await sim_client.quote_cluster(H100, 8, 2)
    with pytest.raises(e.InvalidRequest) as caught:
        await sim_client.launch_cluster(quote.id, idempotency_key="env",
                                        env={"NODE_RANK": "3"})
    assert caught.value.reason == "reserved_env"


async def test_docs_malloc_arena_max_is_recommended_never_injected(sim_client):
    _, cluster = await launch(sim_client, env={"HF_HOME": "/workspace/hf"})
    assert "MALLOC_ARENA_MAX" not in cluster.workload.env_keys


async def test_docs_shm_sizing_is_not_exposed(sim_client, sim, session):
    quote = await sim_client.quote_cluster(H100, 8, 2)
    status, _, body = await raw(session, sim.base_url, "POST", "/clusters",
                                {"quoteId": quote.id, "shmSizeGb": 64})
    assert status == 400
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["details"]["field"] == "shmSizeGb"
    assert API_KEY not in json.dumps(body)
