"""Engine: node failures, degraded clusters and recovery (contract §4.2, §6; invariants 7, 8)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.reserve import errors as e
from bot.reserve.schemas import ClusterStatus, NodeStatus, RecoveryState, VolumeStatus
from tests.reserve.simulator.test_engine_support import *

# --- before admission -----------------------------------------------------------------------


def test_a_node_lost_before_admission_is_re_placed_once():
    engine, _ = make()
    cluster = launch(engine, quote(engine, nodes=3))
    engine.advance(PROVISION)  # node 0 is up, 1 and 2 boot
    cluster = engine.fail_node(cluster.id, 0, "unhealthy")
    assert cluster.status is ClusterStatus.PROVISIONING
    assert cluster.nodes[0].status is NodeStatus.PROVISIONING
    engine.advance(2 * PROVISION)  # nodes 1, 2 up; node 0 boots again at fail + PROVISION
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING
    assert cluster.ready_at == START + timedelta(seconds=3 * PROVISION)
    assert cluster.nodes[0].interconnect_address == "10.65.0.2"
    assert "cluster.degraded" not in event_types(engine, cluster.id)


def test_a_second_failure_before_admission_fails_the_launch_never_billed():
    engine, _ = make()
    cluster = launch(engine, quote(engine, storage_gb=100))
    engine.fail_node(cluster.id, 1, "stopped")
    cluster = engine.fail_node(cluster.id, 1, "stopped")
    assert cluster.status is ClusterStatus.FAILED
    assert (cluster.last_error, cluster.ready_at, cluster.connections) == (
        "provision_failed", None, None)
    assert {n.status for n in cluster.nodes} == {NodeStatus.TERMINATED}
    assert event_types(engine, cluster.id)[-1] == "cluster.failed"
    engine.advance(3 * 3600)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.FAILED and cluster.billing.accrued_cents == 0
    assert charges(engine, cluster.id) == []
    assert cluster.volume is not None
    volume = engine.get_volume(cluster.volume.id)
    assert volume.status is VolumeStatus.AVAILABLE
    assert len(charges(engine, volume.id, "volume_hour")) == 4  # bills alone from the failure
    assert engine.terminate(cluster.id)[1] is False  # DELETE on failed: 200 no-op
    with pytest.raises(e.InvalidState):
        engine.fail_node(cluster.id, 0, "stopped")


# --- degraded ---------------------------------------------------------------------------------


def test_a_node_lost_after_ready_opens_an_episode():
    engine, clock = make()
    _, cluster = running(engine, clock, nodes=3)
    engine.advance(30)
    cluster = engine.fail_node(cluster.id, 1, "unhealthy")
    assert cluster.status is ClusterStatus.DEGRADED
    node = cluster.nodes[1]
    assert (node.status, node.ssh_host, node.ssh_port) == (NodeStatus.UNHEALTHY, None, None)
    assert cluster.connections is not None and cluster.connections.nodes[1].ssh is None
    r = cluster.recovery
    assert (r.episode, r.episode_started_at, r.attempts_used, r.state) == (
        1, clock.now(), 0, RecoveryState.IDLE)
    degraded = engine.events(cluster.id)[-1]
    assert (degraded.type, degraded.at, degraded.data["nodesDown"]) == (
        "cluster.degraded", clock.now(), [1])
    cluster = engine.fail_node(cluster.id, 2, "stopped")  # same episode
    assert cluster.recovery.episode == 1 and cluster.nodes[2].status is NodeStatus.STOPPED


def test_inv8_with_auto_off_nothing_changes_until_recover():
    engine, clock = make()
    _, cluster = running(engine, clock)
    engine.fail_node(cluster.id, 0, "stopped")
    engine.advance(6 * 3600)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED and cluster.recovery.attempts_used == 0
    assert not any(t.startswith("recovery.") for t in event_types(engine, cluster.id))


def test_inv8_recover_brings_the_node_back_with_the_same_interconnect_address():
    engine, clock = make(recovery_node_seconds=3)
    _, cluster = running(engine, clock)
    address = cluster.nodes[1].interconnect_address
    ssh = (cluster.nodes[1].ssh_host, cluster.nodes[1].ssh_port)
    engine.fail_node(cluster.id, 1, "unhealthy")
    cluster = engine.recover(cluster.id)
    assert cluster.recovery.state is RecoveryState.IN_PROGRESS
    assert cluster.nodes[1].status is NodeStatus.RECOVERING
    with pytest.raises(e.RecoveryInProgress) as caught:
        engine.recover(cluster.id)
    assert caught.value.details["lastAttemptAt"] == "2026-11-29T10:00:10Z"
    engine.advance(3)
    cluster = engine.get_cluster(cluster.id)
    node = cluster.nodes[1]
    assert cluster.status is ClusterStatus.RUNNING
    assert (node.status, node.interconnect_address, node.last_recovered_at) == (
        NodeStatus.RUNNING, address, clock.now())
    assert (node.ssh_host, node.ssh_port) == ssh  # same hardware
    r = cluster.recovery
    assert (r.state, r.attempts_used, r.last_attempt_at, r.last_error, r.skipped_nodes) == (
        RecoveryState.IDLE, 1, clock.now(), None, [])
    assert event_types(engine, cluster.id)[-5:] == [
        "cluster.degraded", "recovery.attempt_started", "recovery.node_recovered",
        "recovery.attempt_finished", "cluster.recovered"]
    started = next(ev for ev in engine.events(cluster.id)
                   if ev.type == "recovery.attempt_started")
    assert started.data["attempt"] == 1 and started.data["manual"] is True


def test_recover_refuses_a_cluster_that_is_not_degraded():
    engine, clock = make()
    _, cluster = running(engine, clock)
    with pytest.raises(e.NotDegraded) as caught:
        engine.recover(cluster.id)
    assert caught.value.cluster_status == "running"
    engine.terminate(cluster.id)
    with pytest.raises(e.NotDegraded):
        engine.recover(cluster.id)


def test_nodes_are_recovered_one_by_one_in_rank_order():
    engine, clock = make(recovery_node_seconds=3)
    _, cluster = running(engine, clock, nodes=4)
    for rank in (3, 1):
        engine.fail_node(cluster.id, rank, "stopped")
    cluster = engine.recover(cluster.id)
    assert [n.status for n in cluster.nodes] == ["running", "recovering", "running", "stopped"]
    engine.advance(3)
    cluster = engine.get_cluster(cluster.id)
    assert [n.status for n in cluster.nodes] == ["running", "running", "running", "recovering"]
    engine.advance(3)
    assert engine.get_cluster(cluster.id).status is ClusterStatus.RUNNING
    recovered = [ev for ev in engine.events(cluster.id) if ev.type == "recovery.node_recovered"]
    assert [(ev.data["rank"], ev.at - recovered[0].at) for ev in recovered] == [
        (1, timedelta(0)), (3, timedelta(seconds=3))]


def test_inv8_an_unrecoverable_node_is_skipped_while_the_others_recover():
    engine, clock = make()
    _, cluster = running(engine, clock, nodes=3)
    engine.fail_node(cluster.id, 0, "unhealthy")
    engine.fail_node(cluster.id, 2, "stopped")
    engine.set_recoverable(cluster.id, 0, False)
    engine.recover(cluster.id)
    engine.advance(60)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    assert [n.status for n in cluster.nodes] == ["unhealthy", "running", "running"]
    assert cluster.nodes[0].last_error == "provider_unrecoverable"
    r = cluster.recovery
    assert (r.state, r.attempts_used, r.skipped_nodes) == (RecoveryState.IDLE, 1, [0])
    assert "recovery.node_skipped" in event_types(engine, cluster.id)


def test_inv8_three_failed_attempts_exhaust_the_episode():
    engine, clock = make(recovery_attempts_max=3)
    _, cluster = running(engine, clock)
    engine.fail_node(cluster.id, 1, "stopped")
    engine.set_recoverable(cluster.id, 1, False)
    for _ in range(3):
        engine.recover(cluster.id)
        engine.advance(10)
    cluster = engine.get_cluster(cluster.id)
    r = cluster.recovery
    assert cluster.status is ClusterStatus.DEGRADED
    assert (cluster.last_error, r.last_error, r.state) == (
        "recovery_exhausted", "recovery_exhausted", RecoveryState.EXHAUSTED)
    assert (r.attempts_used, r.attempts_max) == (3, 3)
    with pytest.raises(e.RecoveryExhausted) as caught:
        engine.recover(cluster.id)
    assert (caught.value.attempts_used, caught.value.attempts_max) == (3, 3)
    assert event_types(engine, cluster.id).count("recovery.exhausted") == 1
    assert engine.terminate(cluster.id)[1] is True  # terminate is the way out


def test_inv8_a_new_episode_resets_the_attempts():
    engine, clock = make()
    _, cluster = running(engine, clock)
    engine.fail_node(cluster.id, 0, "stopped")
    engine.set_recoverable(cluster.id, 0, False)
    engine.recover(cluster.id)
    engine.advance(10)
    assert engine.get_cluster(cluster.id).recovery.attempts_used == 1
    engine.set_recoverable(cluster.id, 0, True)
    engine.recover(cluster.id)
    engine.advance(10)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING and cluster.recovery.attempts_used == 2
    engine.advance(100)
    cluster = engine.fail_node(cluster.id, 1, "unhealthy")
    r = cluster.recovery
    assert (r.episode, r.attempts_used, r.episode_started_at, r.skipped_nodes) == (
        2, 0, clock.now(), [])


# --- automatic recovery -----------------------------------------------------------------------


def test_auto_recovery_starts_one_attempt_on_the_next_health_pass():
    engine, clock = make(health_pass_seconds=60, recovery_node_seconds=3)
    _, cluster = running(engine, clock)  # ready at 10:00:10
    engine.set_auto_recovery(cluster.id, True)
    engine.advance(15)
    engine.fail_node(cluster.id, 1, "stopped")  # 10:00:25
    engine.advance(34)  # 10:00:59: no pass yet
    assert engine.get_cluster(cluster.id).recovery.state is RecoveryState.IDLE
    engine.advance(600)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING
    started = next(ev for ev in engine.events(cluster.id)
                   if ev.type == "recovery.attempt_started")
    assert started.at == START + timedelta(minutes=1) and started.data["manual"] is False
    assert cluster.nodes[1].last_recovered_at == START + timedelta(minutes=1, seconds=3)


def test_auto_recovery_retries_on_later_passes_until_exhausted():
    engine, clock = make(health_pass_seconds=60)
    _, cluster = running(engine, clock, launch_kw={"recovery": {"auto": True}})
    engine.fail_node(cluster.id, 0, "unhealthy")
    engine.set_recoverable(cluster.id, 0, False)
    engine.advance(3600)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.recovery.state is RecoveryState.EXHAUSTED
    starts = [ev.at for ev in engine.events(cluster.id) if ev.type == "recovery.attempt_started"]
    assert starts == [START + timedelta(minutes=m) for m in (1, 2, 3)]


def test_turning_auto_on_while_degraded_acts_at_the_next_pass():
    engine, clock = make(health_pass_seconds=60)
    _, cluster = running(engine, clock)
    engine.fail_node(cluster.id, 1, "stopped")
    engine.advance(300)
    assert engine.get_cluster(cluster.id).recovery.attempts_used == 0
    engine.set_auto_recovery(cluster.id, True)  # at 10:05:10
    engine.advance(60)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING
    assert cluster.recovery.last_attempt_at == START + timedelta(minutes=6, seconds=3)


def test_turning_auto_off_stops_the_pending_pass():
    engine, clock = make(health_pass_seconds=60)
    _, cluster = running(engine, clock, launch_kw={"recovery": {"auto": True}})
    engine.fail_node(cluster.id, 1, "stopped")
    engine.set_auto_recovery(cluster.id, False)
    engine.advance(600)
    assert engine.get_cluster(cluster.id).recovery.attempts_used == 0


def test_terminate_abandons_a_running_attempt():
    engine, clock = make(recovery_node_seconds=30, terminate_seconds=2)
    _, cluster = running(engine, clock)
    engine.fail_node(cluster.id, 1, "stopped")
    engine.recover(cluster.id)
    engine.advance(10)
    cluster, accepted = engine.terminate(cluster.id)
    assert accepted and cluster.recovery.state is RecoveryState.IDLE
    engine.advance(60)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.TERMINATED
    assert "recovery.attempt_finished" not in event_types(engine, cluster.id)


# --- control-surface validation ------------------------------------------------------------


def test_fail_node_and_set_recoverable_validate_their_input():
    engine, clock = make()
    _, cluster = running(engine, clock)
    for rank in (-1, 2, 10**30):
        with pytest.raises(e.InvalidRequest) as caught:
            engine.fail_node(cluster.id, rank, "stopped")
        assert caught.value.field == "rank"
        with pytest.raises(e.InvalidRequest):
            engine.set_recoverable(cluster.id, rank, False)
    with pytest.raises(e.InvalidRequest) as caught:
        engine.fail_node(cluster.id, 0, "exploded")  # type: ignore[arg-type]
    assert caught.value.field == "mode"
    engine.fail_node(cluster.id, 0, "stopped")
    with pytest.raises(e.InvalidState):  # only a running node can fail
        engine.fail_node(cluster.id, 0, "unhealthy")


def test_auto_recovery_cannot_change_once_the_cluster_is_gone():
    engine, clock = make(terminate_seconds=2)
    _, cluster = running(engine, clock)
    engine.terminate(cluster.id)
    with pytest.raises(e.InvalidState) as caught:
        engine.set_auto_recovery(cluster.id, True)
    assert caught.value.cluster_status == "terminating"
    engine.advance(2)
    with pytest.raises(e.InvalidState) as caught:
        engine.set_auto_recovery(cluster.id, True)
    assert caught.value.cluster_status == "terminated"
