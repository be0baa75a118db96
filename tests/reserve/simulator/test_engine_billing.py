"""Engine: billing (contract §5; invariants 2, 6, 7, 10) — accruals, grace, the ledger."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest

from aireserve_sim.engine import SimulatorEngine
from bot.clock import ManualClock
from bot.reserve import errors as e
from bot.reserve.schemas import Cluster, ClusterStatus, PaymentStatus, Quote, VolumeStatus
from tests.reserve.simulator.test_engine_support import *

HOUR = timedelta(hours=1)


def test_inv2_nothing_accrues_before_ready_at():
    engine, _ = make()
    cluster = launch(engine, quote(engine, nodes=4))
    engine.advance(4 * PROVISION - 1)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.PROVISIONING
    assert (cluster.billing.accrued_hours, cluster.billing.accrued_cents) == (0, 0)
    assert cluster.billing.next_accrual_at is None
    assert charges(engine, cluster.id) == []


def test_inv2_first_hour_accrues_at_ready_at_then_hourly():
    engine, clock = make()
    q, cluster = running(engine, clock)
    assert cluster.ready_at is not None
    b = cluster.billing
    assert (b.accrued_hours, b.accrued_cents) == (1, q.rate.hourly_cents)
    assert b.next_accrual_at == cluster.ready_at + HOUR
    engine.advance(3599)
    assert engine.get_cluster(cluster.id).billing.accrued_hours == 1
    engine.advance(1)
    b = engine.get_cluster(cluster.id).billing
    assert (b.accrued_hours, b.next_accrual_at) == (2, cluster.ready_at + 2 * HOUR)
    assert [x.at for x in charges(engine, cluster.id)] == [cluster.ready_at,
                                                           cluster.ready_at + HOUR]
    assert all(x.cents == q.rate.hourly_cents and x.paid for x in charges(engine, cluster.id))


@pytest.mark.parametrize("seconds", [1, 1799, 3599, 3600, 3601, 7200, 7800, 5 * 3600 - 1,
                                     5 * 3600])
def test_inv2_accrual_count_is_ceil_of_ready_to_terminate(seconds):
    engine, clock = make()
    q, cluster = running(engine, clock)
    engine.advance(seconds)
    terminated, accepted = engine.terminate(cluster.id)
    assert accepted and terminated.status is ClusterStatus.TERMINATING
    engine.advance(10 * 3600)  # long after: nothing more
    cluster = engine.get_cluster(cluster.id)
    expected = math.ceil(seconds / 3600)
    assert cluster.billing.accrued_hours == expected
    assert cluster.billing.accrued_cents == expected * q.rate.hourly_cents
    assert len(charges(engine, cluster.id)) == expected
    assert event_types(engine, cluster.id).count("billing.hour_accrued") == expected
    assert cluster.billing.next_accrual_at is None


def test_terminate_at_the_ready_instant_keeps_the_first_hour():
    engine, clock = make()
    _, cluster = running(engine, clock)
    engine.terminate(cluster.id)
    assert engine.get_cluster(cluster.id).billing.accrued_hours == 1  # §4.1: it came with readyAt


def test_ready_at_ten_terminated_at_twelve_ten_is_three_accruals_18759():
    engine, clock = make()
    q = quote(engine, storage_gb=1000)
    cluster = launch(engine, q)
    engine.advance(2 * PROVISION)
    ready_at = engine.get_cluster(cluster.id).ready_at
    assert ready_at is not None and q.rate.hourly_cents == 6253
    clock.set(ready_at + timedelta(hours=2, minutes=10))
    cluster, _ = engine.terminate(cluster.id)
    assert cluster.billing.accrued_hours == 3 and cluster.billing.accrued_cents == 18_759
    assert [x.at for x in charges(engine, cluster.id)] == [ready_at + k * HOUR for k in range(3)]


def test_inv6_terminate_mid_provision_is_accepted_never_billed_and_idempotent():
    engine, _ = make(terminate_seconds=2)
    cluster = launch(engine, quote(engine, nodes=8))
    engine.advance(3 * PROVISION)
    cluster, accepted = engine.terminate(cluster.id)
    assert accepted and cluster.status is ClusterStatus.TERMINATING
    assert cluster.termination_reason == "requested" and cluster.terminated_at is None
    again, accepted_again = engine.terminate(cluster.id)
    assert not accepted_again and again.status is ClusterStatus.TERMINATING
    engine.advance(2)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.TERMINATED
    assert cluster.terminated_at == cluster.created_at + timedelta(seconds=3 * PROVISION + 2)
    assert cluster.ready_at is None and {n.status for n in cluster.nodes} == {"terminated"}
    engine.advance(5 * 3600)
    assert engine.get_cluster(cluster.id).billing.accrued_cents == 0
    assert charges(engine, cluster.id) == []
    assert engine.terminate(cluster.id)[1] is False


def test_inv7_degraded_keeps_billing_at_the_full_locked_rate():
    engine, clock = make()
    q, cluster = running(engine, clock, nodes=4)
    engine.advance(600)
    engine.fail_node(cluster.id, 2, "unhealthy")
    engine.fail_node(cluster.id, 3, "stopped")
    engine.advance(3 * 3600)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.DEGRADED
    assert cluster.locked_rate == q.rate
    assert cluster.billing.accrued_hours == 4
    assert {x.cents for x in charges(engine, cluster.id)} == {q.rate.hourly_cents}


def test_no_node_running_means_no_charge_for_that_hour():
    engine, clock = make()
    _, cluster = running(engine, clock)
    engine.advance(60)
    engine.fail_node(cluster.id, 0, "stopped")
    engine.fail_node(cluster.id, 1, "stopped")
    engine.advance(2 * 3600)
    assert engine.get_cluster(cluster.id).billing.accrued_hours == 1


def test_accruals_are_stamped_at_their_own_instant_after_one_big_jump():
    engine, clock = make()
    q = quote(engine)
    cluster = launch(engine, q)
    engine.advance(5 * 3600 + 17)  # boots, readyAt and five more hours in one step
    cluster = engine.get_cluster(cluster.id)
    ready = cluster.ready_at
    assert ready is not None and ready == cluster.created_at + timedelta(seconds=2 * PROVISION)
    hours = [ev for ev in engine.events(cluster.id) if ev.type == "billing.hour_accrued"]
    assert [ev.at for ev in hours] == [ready + k * HOUR for k in range(6)]
    assert [ev.data["hour"] for ev in hours] == [1, 2, 3, 4, 5, 6]
    assert [x.at for x in charges(engine, cluster.id)] == [ready + k * HOUR for k in range(6)]


# --- second mode ----------------------------------------------------------------------------


def test_second_mode_ready_ten_terminated_twelve_ten_is_13548():
    engine, clock = make(billing_increment="second")
    q = quote(engine, storage_gb=1000)
    cluster = launch(engine, q)
    engine.advance(2 * PROVISION)
    ready_at = engine.get_cluster(cluster.id).ready_at
    assert ready_at is not None
    engine.advance(3600)
    mid = engine.get_cluster(cluster.id).billing
    assert (mid.accrued_hours, mid.accrued_cents) == (1, 6253)
    clock.set(ready_at + timedelta(hours=2, minutes=10))
    cluster, _ = engine.terminate(cluster.id)
    assert cluster.billing.accrued_cents == 13_548  # round_half_up(7800 × 6253 / 3600)
    assert cluster.billing.accrued_hours == 2
    booked = charges(engine, cluster.id, "cluster_seconds")
    assert sum(x.cents for x in booked) == 13_548
    assert [x.at for x in booked] == [ready_at + HOUR, ready_at + 2 * HOUR, clock.now()]
    engine.advance(3 * 3600)
    assert engine.get_cluster(cluster.id).billing.accrued_cents == 13_548


def test_second_mode_live_figure_and_no_meter_while_no_node_runs():
    engine, clock = make(billing_increment="second")
    q, cluster = running(engine, clock)
    engine.advance(90)
    assert engine.get_cluster(cluster.id).billing.accrued_cents == round(
        90 * q.rate.hourly_cents / 3600)
    engine.fail_node(cluster.id, 0, "stopped")
    engine.fail_node(cluster.id, 1, "stopped")
    engine.advance(1000)  # nothing runs: the meter stands still
    assert engine.get_cluster(cluster.id).billing.accrued_cents == round(
        90 * q.rate.hourly_cents / 3600)


# --- payment and grace (invariant 10) ---------------------------------------------------------


def _poor_cluster(engine: SimulatorEngine, clock: ManualClock, **quote_kw: Any
                  ) -> tuple[Quote, Cluster]:
    """A running cluster whose balance covers exactly its first hour."""
    q = quote(engine, **quote_kw)
    engine.set_balance(q.rate.hourly_cents)
    cluster = launch(engine, q)
    engine.advance(PROVISION * q.shape.nodes)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.billing.payment_status is PaymentStatus.CURRENT
    return q, cluster


def test_inv10_past_due_then_grace_then_terminated_with_the_volume_kept():
    engine, clock = make(payment_grace_seconds=3600, terminate_seconds=2)
    q, cluster = _poor_cluster(engine, clock, storage_gb=100)
    assert engine.account().balance_cents == 0
    ready = cluster.ready_at
    assert ready is not None
    engine.advance(3600)  # the second hour cannot be paid
    cluster = engine.get_cluster(cluster.id)
    b = cluster.billing
    assert (b.payment_status, b.unpaid_cents) == (PaymentStatus.PAST_DUE, q.rate.hourly_cents)
    assert b.grace_ends_at == ready + HOUR + timedelta(seconds=3600)
    assert engine.account().payment_status is PaymentStatus.PAST_DUE
    with pytest.raises(e.PaymentRequired):  # a past-due account cannot launch more
        launch(engine, quote(engine))
    engine.advance(3599)
    assert engine.get_cluster(cluster.id).status is ClusterStatus.RUNNING
    engine.advance(1)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.TERMINATING
    assert cluster.termination_reason == "payment_grace_expired"
    assert cluster.billing.accrued_hours == 2  # hours kept accruing in grace, not after
    engine.advance(2)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.TERMINATED and cluster.terminated_at == b.grace_ends_at \
        + timedelta(seconds=2)
    assert cluster.volume is not None
    volume = engine.get_volume(cluster.volume.id)
    assert volume.status is VolumeStatus.AVAILABLE and volume.attached_cluster_id is None
    types = event_types(engine, cluster.id)
    assert types.index("billing.payment_failed") < types.index("billing.grace_expired") \
        < types.index("cluster.terminating")
    unpaid = [x for x in charges(engine, cluster.id) if not x.paid]
    assert len(unpaid) == 1


def test_inv10_paying_within_grace_restores_current_and_keeps_the_cluster():
    engine, clock = make()
    q, cluster = _poor_cluster(engine, clock)
    engine.advance(3600)
    assert engine.get_cluster(cluster.id).billing.payment_status is PaymentStatus.PAST_DUE
    engine.advance(1800)
    account = engine.set_balance(10 * q.rate.hourly_cents)
    assert account.payment_status is PaymentStatus.CURRENT
    assert account.balance_cents == 9 * q.rate.hourly_cents  # the unpaid hour was settled
    cluster = engine.get_cluster(cluster.id)
    assert (cluster.billing.payment_status, cluster.billing.unpaid_cents,
            cluster.billing.grace_ends_at) == (PaymentStatus.CURRENT, 0, None)
    engine.advance(2 * 3600)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING and cluster.billing.accrued_hours == 4
    assert [x.kind for x in engine.ledger() if x.kind == "payment"] == ["payment"]


def test_a_top_up_too_small_for_the_debt_pays_nothing():
    engine, clock = make()
    q, cluster = _poor_cluster(engine, clock)
    engine.advance(3600)
    engine.set_balance(q.rate.hourly_cents - 1)
    assert engine.get_cluster(cluster.id).billing.unpaid_cents == q.rate.hourly_cents
    assert engine.account().balance_cents == q.rate.hourly_cents - 1


def test_terminating_at_an_unpaid_hour_takes_back_the_debt_of_that_instant():
    engine, clock = make()
    q, cluster = _poor_cluster(engine, clock)
    engine.advance(3600)  # hour 2 unpaid
    engine.terminate(cluster.id)  # at that very instant: hour 2 never ran
    cluster = engine.get_cluster(cluster.id)
    assert cluster.billing.accrued_hours == 1 and cluster.billing.unpaid_cents == 0
    assert engine.account().payment_status is PaymentStatus.CURRENT


def test_set_balance_is_validated_and_recorded():
    engine, _ = make()
    for bad in (-1, 10**30):
        with pytest.raises(e.InvalidRequest) as caught:
            engine.set_balance(bad)
        assert caught.value.field == "balanceCents"
    account = engine.set_balance(500)
    assert (account.balance_cents, account.payment_grace_seconds) == (500, 3600)
    assert (account.self_serve.max_nodes, account.self_serve.max_gpus_per_node) == (8, 8)
    top_up = [x for x in engine.ledger() if x.kind == "balance_set"]
    assert top_up[-1].cents == 500 - 10_000_000


def test_initial_account():
    engine, _ = make()
    account = engine.account()
    assert (account.balance_cents, account.payment_status) == (10_000_000, PaymentStatus.CURRENT)
