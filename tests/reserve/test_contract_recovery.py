"""Contract suite — recovering a degraded cluster (§6, invariant 8)."""

from __future__ import annotations

import pytest

from bot.reserve import errors as e
from bot.reserve.schemas import ClusterStatus, NodeStatus, RecoveryState
from tests.reserve.conftest import advance_until, launch_running

HEALTH_PASS = 60
NODE_SECONDS = 3


async def degraded(sim_client, admin, *ranks: int, nodes: int = 3, **kw):
    quote, cluster = await launch_running(sim_client, admin, nodes=nodes, **kw)
    for rank in ranks:
        await admin.fail_node(cluster.id, rank, "stopped" if rank % 2 else "unhealthy")
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    return quote, cluster


async def test_inv8_recovery_is_off_by_default_and_nothing_changes(sim_client, admin):
    _, cluster = await degraded(sim_client, admin, 1)
    assert cluster.recovery.auto is False
    assert cluster.recovery.episode == 1 and cluster.recovery.attempts_used == 0
    await admin.advance(10 * HEALTH_PASS)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    assert cluster.recovery.attempts_used == 0
    assert cluster.nodes[1].status is NodeStatus.STOPPED


async def test_inv8_a_manual_attempt_brings_nodes_back_with_the_same_address(sim_client, admin):
    quote, cluster = await degraded(sim_client, admin, 0, 2)
    before = {n.rank: n.interconnect_address for n in cluster.nodes}
    healthy_ssh = (cluster.nodes[1].ssh_host, cluster.nodes[1].ssh_port)
    cluster = await sim_client.recover_cluster(cluster.id, idempotency_key="rec-1")
    assert cluster.recovery.state is RecoveryState.IN_PROGRESS
    with pytest.raises(e.RecoveryInProgress):
        await sim_client.recover_cluster(cluster.id, idempotency_key="rec-2")
    cluster = await advance_until(sim_client, admin, cluster.id, "running")
    assert {n.rank: n.interconnect_address for n in cluster.nodes} == before
    assert (cluster.nodes[1].ssh_host, cluster.nodes[1].ssh_port) == healthy_ssh
    assert cluster.nodes[1].last_recovered_at is None  # the healthy node was not touched
    assert cluster.nodes[0].last_recovered_at is not None
    assert cluster.recovery.state is RecoveryState.IDLE  # the episode closed
    assert (cluster.recovery.episode, cluster.recovery.attempts_used) == (1, 1)
    assert cluster.recovery.skipped_nodes == []
    assert cluster.last_error is None
    assert cluster.locked_rate == quote.rate


async def test_inv8_recover_on_a_running_cluster_is_not_degraded(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin)
    with pytest.raises(e.NotDegraded) as caught:
        await sim_client.recover_cluster(cluster.id, idempotency_key="nd")
    assert caught.value.cluster_status == "running"


async def test_inv8_auto_recovery_runs_on_the_next_health_pass(sim_client, admin):
    _, cluster = await degraded(sim_client, admin, 1)
    cluster = await sim_client.set_auto_recovery(cluster.id, True)
    assert cluster.recovery.auto is True
    cluster = await advance_until(sim_client, admin, cluster.id, "running", step=10,
                                  limit=2 * (HEALTH_PASS + NODE_SECONDS))
    events = [ev async for ev in sim_client.iter_events(cluster.id)]
    started = [ev for ev in events if ev.type == "recovery.attempt_started"]
    assert started and started[0].data.get("manual") is False


async def test_inv8_an_unrecoverable_node_is_skipped_and_the_rest_recover(sim_client, admin):
    _, cluster = await degraded(sim_client, admin, 0, 1, nodes=4)
    await admin.set_recoverable(cluster.id, 1, False)
    await sim_client.recover_cluster(cluster.id, idempotency_key="skip")
    await admin.advance(4 * NODE_SECONDS)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    assert cluster.nodes[0].status is NodeStatus.RUNNING
    assert cluster.nodes[1].status is NodeStatus.STOPPED
    assert cluster.nodes[1].last_error == "provider_unrecoverable"
    assert cluster.recovery.skipped_nodes == [1]
    assert cluster.recovery.attempts_used == 1


async def test_inv8_three_failed_attempts_exhaust_recovery(sim_client, admin):
    _, cluster = await degraded(sim_client, admin, 2)
    await admin.set_recoverable(cluster.id, 2, False)
    for n in range(3):
        await sim_client.recover_cluster(cluster.id, idempotency_key=f"ex-{n}")
        await admin.advance(2 * NODE_SECONDS)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    assert cluster.last_error == "recovery_exhausted"
    assert cluster.recovery.last_error == "recovery_exhausted"
    assert cluster.recovery.state is RecoveryState.EXHAUSTED
    assert (cluster.recovery.attempts_used, cluster.recovery.attempts_max) == (3, 3)
    with pytest.raises(e.RecoveryExhausted) as caught:
        await sim_client.recover_cluster(cluster.id, idempotency_key="ex-4")
    assert (caught.value.attempts_used, caught.value.attempts_max) == (3, 3)
    # Terminate is the way out.
    cluster = await sim_client.terminate_cluster(cluster.id)
    assert cluster.status is ClusterStatus.TERMINATING


async def test_inv8_a_new_episode_resets_the_attempts(sim_client, admin):
    _, cluster = await degraded(sim_client, admin, 1)
    await sim_client.recover_cluster(cluster.id, idempotency_key="ep1")
    cluster = await advance_until(sim_client, admin, cluster.id, "running")
    assert cluster.recovery.state is RecoveryState.IDLE
    await admin.fail_node(cluster.id, 2, "unhealthy")
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.recovery.episode == 2
    assert cluster.recovery.attempts_used == 0
