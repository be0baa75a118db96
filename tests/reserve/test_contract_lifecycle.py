"""Contract suite — lifecycle and billing: readyAt, hourly accruals, terminate, degraded, access."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest

from bot.reserve import errors as e
from bot.reserve.schemas import ClusterStatus, NodeStatus
from tests.reserve.conftest import (
    PROVISION_SECONDS,
    advance_until,
    launch,
    launch_running,
    raw,
)


async def cluster_hours(admin, cluster_id: str) -> list[dict]:
    return [x for x in await admin.ledger()
            if x["kind"] == "cluster_hour" and x["resourceId"] == cluster_id]


async def test_inv2_nothing_accrues_before_ready_at(sim_client, admin):
    _, cluster = await launch(sim_client, nodes=4)
    await admin.advance(PROVISION_SECONDS * 4 - 1)  # the last node is still booting
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.PROVISIONING
    assert cluster.ready_at is None
    assert (cluster.billing.accrued_hours, cluster.billing.accrued_cents) == (0, 0)
    assert [n.status for n in cluster.nodes].count(NodeStatus.RUNNING) == 3  # progress shows
    assert await cluster_hours(admin, cluster.id) == []


async def test_docs_billing_starts_at_ready_at_and_accrues_hourly(sim_client, admin, sim):
    quote, cluster = await launch_running(sim_client, admin)
    assert cluster.ready_at == cluster.created_at + timedelta(seconds=PROVISION_SECONDS * 2)
    assert cluster.billing.accrued_hours == 1  # the first hour accrues at readyAt
    assert cluster.billing.accrued_cents == quote.rate.hourly_cents
    assert cluster.billing.next_accrual_at == cluster.ready_at + timedelta(hours=1)
    await admin.advance(3600)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.billing.accrued_hours == 2
    hours = await cluster_hours(admin, cluster.id)
    assert [x["cents"] for x in hours] == [quote.rate.hourly_cents] * 2


@pytest.mark.parametrize("seconds", [1, 3599, 3600, 3601, 7200, 7800, 5 * 3600 - 1])
async def test_inv2_accrual_count_is_ceil_of_hours_from_ready_to_terminate(
        sim_client, admin, seconds):
    quote, cluster = await launch_running(sim_client, admin)
    await admin.advance(seconds)
    await sim_client.terminate_cluster(cluster.id)
    await admin.advance(5 * 3600)  # long after terminate: nothing more
    cluster = await sim_client.get_cluster(cluster.id)
    expected = math.ceil(seconds / 3600)
    assert cluster.billing.accrued_hours == expected
    assert cluster.billing.accrued_cents == expected * quote.rate.hourly_cents
    assert len(await cluster_hours(admin, cluster.id)) == expected


async def test_docs_ready_at_ten_terminated_at_twelve_ten_is_three_hours(sim_client, admin):
    quote, cluster = await launch_running(sim_client, admin, storage_gb=1000)
    assert quote.rate.hourly_cents == 6253
    await admin.advance(2 * 3600 + 600)
    await sim_client.terminate_cluster(cluster.id)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.billing.accrued_cents == 18_759


async def test_inv6_terminate_mid_provision_is_accepted_and_never_billed(sim_client, admin, sim,
                                                                        session):
    _, cluster = await launch(sim_client, nodes=8)
    await admin.advance(PROVISION_SECONDS * 3)
    cluster = await sim_client.terminate_cluster(cluster.id)
    assert cluster.status is ClusterStatus.TERMINATING
    cluster = await advance_until(sim_client, admin, cluster.id, "terminated")
    assert cluster.ready_at is None and cluster.terminated_at is not None
    await admin.advance(3 * 3600)
    cluster = await sim_client.get_cluster(cluster.id)
    assert (cluster.billing.accrued_hours, cluster.billing.accrued_cents) == (0, 0)
    assert await cluster_hours(admin, cluster.id) == []
    # A second DELETE is a 200 no-op (the client just returns the cluster).
    again = await sim_client.terminate_cluster(cluster.id)
    assert again.status is ClusterStatus.TERMINATED
    status, _, body = await raw(session, sim.base_url, "DELETE", f"/clusters/{cluster.id}")
    assert (status, body["status"]) == (200, "terminated")


async def test_inv6_first_delete_is_202_and_terminate_alias_is_a_no_op(sim_client, sim, session):
    _, cluster = await launch(sim_client)
    status, _, body = await raw(session, sim.base_url, "DELETE", f"/clusters/{cluster.id}")
    assert (status, body["status"]) == (202, "terminating")
    status, _, _ = await raw(session, sim.base_url, "POST", f"/clusters/{cluster.id}/terminate")
    assert status == 200


async def test_docs_terminate_is_accepted_while_running_and_stops_accruals(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin)
    cluster = await sim_client.terminate_cluster(cluster.id)
    assert cluster.status is ClusterStatus.TERMINATING
    cluster = await advance_until(sim_client, admin, cluster.id, "terminated")
    assert cluster.termination_reason == "requested"
    assert all(n.status is NodeStatus.TERMINATED for n in cluster.nodes)


async def test_inv7_degraded_keeps_billing_at_the_full_locked_rate(sim_client, admin):
    quote, cluster = await launch_running(sim_client, admin, nodes=4)
    await admin.advance(60)
    await admin.fail_node(cluster.id, 2, "unhealthy")
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    assert cluster.nodes[2].status is NodeStatus.UNHEALTHY
    await admin.advance(3 * 3600)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED  # nobody acted: it stays, and bills
    assert cluster.billing.accrued_hours == 4
    assert cluster.billing.accrued_cents == 4 * quote.rate.hourly_cents
    assert cluster.locked_rate == quote.rate  # inv1: the lock holds while degraded
    hours = await cluster_hours(admin, cluster.id)
    assert {x["cents"] for x in hours} == {quote.rate.hourly_cents}


async def test_docs_nothing_accrues_while_no_node_runs(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin)
    await admin.fail_node(cluster.id, 0, "stopped")
    await admin.fail_node(cluster.id, 1, "unhealthy")
    await admin.advance(3 * 3600)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    assert cluster.billing.accrued_hours == 1  # only the hour accrued at readyAt


async def test_inv1_the_locked_rate_never_changes_after_launch(sim_client, admin):
    quote, cluster = await launch(sim_client, storage_gb=500)
    seen = [cluster.locked_rate]
    cluster = await advance_until(sim_client, admin, cluster.id, "running")
    seen.append(cluster.locked_rate)
    await admin.fail_node(cluster.id, 1, "stopped")
    seen.append((await sim_client.get_cluster(cluster.id)).locked_rate)
    await sim_client.recover_cluster(cluster.id, idempotency_key="inv1")
    cluster = await advance_until(sim_client, admin, cluster.id, "running")
    seen.append(cluster.locked_rate)
    await admin.advance(5 * 3600)
    await sim_client.terminate_cluster(cluster.id)
    seen.append((await advance_until(sim_client, admin, cluster.id, "terminated")).locked_rate)
    assert seen == [quote.rate] * 5


async def test_docs_there_is_no_stop(sim_client, sim, session):
    _, cluster = await launch(sim_client)
    status, _, body = await raw(session, sim.base_url, "POST", f"/clusters/{cluster.id}/stop")
    assert status == 404
    assert body["error"]["code"] == "not_found"
    assert not hasattr(sim_client, "stop_cluster")


async def test_docs_connections_list_primary_every_node_and_interconnect(sim_client, admin):
    _, cluster = await launch(sim_client, nodes=3)
    assert cluster.connections is None  # nothing to connect to while provisioning
    assert all(n.ssh_host is None and n.ssh_port is None for n in cluster.nodes)
    cluster = await advance_until(sim_client, admin, cluster.id, "running")
    conn = cluster.connections
    assert conn is not None and conn.primary is not None
    assert conn.primary.rank == 0
    assert [n.rank for n in conn.nodes] == [0, 1, 2]
    by_rank = {n.rank: n for n in cluster.nodes}
    assert by_rank[0].role == "primary" and {by_rank[1].role, by_rank[2].role} == {"worker"}
    for entry in conn.nodes:
        node = by_rank[entry.rank]
        assert entry.ssh is not None
        assert (entry.ssh.host, entry.ssh.port) == (node.ssh_host, node.ssh_port)
        assert entry.ssh.command == f"ssh -p {node.ssh_port} {entry.ssh.user}@{node.ssh_host}"
        assert entry.interconnect_address == node.interconnect_address
    assert conn.primary.ssh == conn.nodes[0].ssh
    addresses = [n.interconnect_address for n in cluster.nodes]
    assert None not in addresses and len(set(addresses)) == 3


async def test_docs_logs_stream_per_node_rank_zero_by_default(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin)
    await admin.advance(30)
    primary = await sim_client.cluster_logs(cluster.id)
    assert primary.node == 0 and primary.lines
    worker = await sim_client.cluster_logs(cluster.id, node=1)
    assert worker.node == 1 and worker.lines
    streamed = [line async for line in sim_client.stream_cluster_logs(cluster.id)]
    assert streamed == primary.lines
    with pytest.raises(e.InvalidRequest) as caught:
        await sim_client.cluster_logs(cluster.id, node=2)
    assert caught.value.field == "node"


async def test_docs_log_stream_resumes_after_the_last_event_id(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin)
    first = [line async for line in sim_client.stream_cluster_logs(cluster.id, tail=5000)]
    await admin.fail_node(cluster.id, 0, "stopped")
    await sim_client.recover_cluster(cluster.id, idempotency_key="log-rec")
    await advance_until(sim_client, admin, cluster.id, "running")
    last_id = first[-1].ts.strftime("%Y-%m-%dT%H:%M:%SZ")
    later = [line async for line in sim_client.stream_cluster_logs(
        cluster.id, tail=5000, last_event_id=last_id)]
    assert later and all(line.ts > first[-1].ts for line in later)


async def test_docs_a_cluster_names_no_provider_or_fabric(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin)
    text = json.dumps(cluster.to_wire()).lower()
    for word in ("runpod", "infiniband", "rdma", "nvlink", "lambda", "crusoe"):
        assert word not in text


async def test_docs_events_feed_tells_the_story_in_order(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin)
    await sim_client.terminate_cluster(cluster.id)
    await advance_until(sim_client, admin, cluster.id, "terminated")
    events = [ev async for ev in sim_client.iter_events(cluster.id)]
    types = [ev.type for ev in events]
    for before, after in [("cluster.provisioning", "cluster.running"),
                          ("cluster.running", "billing.hour_accrued"),
                          ("cluster.terminating", "cluster.terminated")]:
        assert types.index(before) < types.index(after)
    assert [ev.at for ev in events] == sorted(ev.at for ev in events)


async def test_docs_a_node_lost_before_admission_is_never_billed(sim_client, admin):
    _, cluster = await launch(sim_client)
    await admin.fail_node(cluster.id, 0, "unhealthy")
    await admin.fail_node(cluster.id, 0, "unhealthy")  # re-placed once, then the launch fails
    cluster = await advance_until(sim_client, admin, cluster.id, "failed")
    assert cluster.last_error == "provision_failed" and cluster.ready_at is None
    assert cluster.billing.accrued_cents == 0
