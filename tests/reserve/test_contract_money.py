"""Contract suite — volumes (invariant 9) and payment (invariant 10)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from bot.reserve import errors as e
from bot.reserve.schemas import ClusterStatus, PaymentStatus, VolumeStatus
from tests.reserve.conftest import H100, advance_until, launch, launch_running


async def volume_hours(admin, volume_id: str) -> list[dict]:
    return [x for x in await admin.ledger()
            if x["kind"] == "volume_hour" and x["resourceId"] == volume_id]


async def test_inv9_a_volume_made_with_the_cluster_survives_terminate_and_bills_alone(
        sim_client, admin):
    _, cluster = await launch_running(sim_client, admin, storage_gb=1000)
    assert cluster.volume is not None and cluster.volume.created_with_cluster
    assert cluster.volume.mount_path == "/workspace"
    volume = await sim_client.get_volume(cluster.volume.id)
    assert volume.status is VolumeStatus.ATTACHED
    assert volume.billing.covered_by_cluster is True
    await admin.advance(2 * 3600 - 60)
    assert await volume_hours(admin, volume.id) == []  # the cluster rate covers it
    await sim_client.terminate_cluster(cluster.id)
    await advance_until(sim_client, admin, cluster.id, "terminated")
    volume = await sim_client.get_volume(volume.id)
    assert volume.status is VolumeStatus.AVAILABLE and volume.attached_cluster_id is None
    assert volume.billing.covered_by_cluster is False
    await admin.advance(3 * 3600)
    hours = await volume_hours(admin, volume.id)
    assert [x["cents"] for x in hours] == [10, 10, 10]  # 1000 GB x 7 / 730, half-up
    # Never charged twice: the volume's own hours start where the last cluster hour ends.
    last_cluster_hour = [x for x in await admin.ledger() if x["kind"] == "cluster_hour"][-1]
    gap = datetime.fromisoformat(hours[0]["at"]) - datetime.fromisoformat(last_cluster_hour["at"])
    assert gap == timedelta(hours=1)
    assert [v.id async for v in sim_client.iter_volumes()] == [volume.id]


async def test_inv9_an_attached_volume_cannot_be_deleted_or_grown(sim_client, admin):
    _, cluster = await launch_running(sim_client, admin, storage_gb=100)
    volume_id = cluster.volume.id
    with pytest.raises(e.VolumeAttached) as deleting:
        await sim_client.delete_volume(volume_id)
    assert (deleting.value.volume_id, deleting.value.cluster_id) == (volume_id, cluster.id)
    with pytest.raises(e.VolumeAttached):
        await sim_client.resize_volume(volume_id, 200)
    await sim_client.terminate_cluster(cluster.id)
    await advance_until(sim_client, admin, cluster.id, "terminated")
    assert (await sim_client.resize_volume(volume_id, 200)).size_gb == 200
    assert (await sim_client.delete_volume(volume_id)).status in (
        VolumeStatus.DELETING, VolumeStatus.DELETED)


async def test_inv9_a_volume_never_shrinks(sim_client):
    volume = await sim_client.create_volume(500, "us-ga", name="w")
    with pytest.raises(e.InvalidRequest):
        await sim_client.resize_volume(volume.id, 100)


async def test_inv9_a_volume_id_quote_inherits_the_volume_location(sim_client):
    volume = await sim_client.create_volume(1000, "us-ga", idempotency_key="vol-ga")
    quote = await sim_client.quote_cluster(H100, 8, 2, volume_id=volume.id)
    assert quote.location == "us-ga" and quote.volume_id == volume.id
    assert quote.breakdown.shared_volume is not None
    assert quote.breakdown.shared_volume.size_gb == 1000
    with pytest.raises(e.InvalidRequest) as caught:
        await sim_client.quote_cluster(H100, 8, 2, volume_id=volume.id, location="us-tx")
    assert caught.value.reason == "volume_location_mismatch"


async def test_docs_a_cluster_mounts_at_most_one_volume(sim_client):
    volume = await sim_client.create_volume(100, "us-tx")
    with pytest.raises(e.InvalidRequest):
        await sim_client.quote_cluster(H100, 8, 2, volume_id=volume.id, storage_gb=100)


async def test_docs_a_volume_held_by_a_live_cluster_cannot_be_quoted_again(sim_client):
    volume = await sim_client.create_volume(100, "us-tx")
    _, cluster = await launch(sim_client, volume_id=volume.id, location="us-tx")
    assert cluster.volume is not None and cluster.volume.id == volume.id
    assert not cluster.volume.created_with_cluster
    with pytest.raises(e.VolumeAttached):
        await sim_client.quote_cluster(H100, 8, 2, volume_id=volume.id)


async def test_inv10_launch_needs_one_hour_of_balance(sim_client, admin):
    quote = await sim_client.quote_cluster(H100, 8, 2)
    await admin.balance(quote.rate.hourly_cents - 1)
    with pytest.raises(e.PaymentRequired) as caught:
        await sim_client.launch_cluster(quote.id, idempotency_key="poor")
    assert caught.value.required_cents == quote.rate.hourly_cents
    assert caught.value.balance_cents == quote.rate.hourly_cents - 1
    await admin.balance(quote.rate.hourly_cents)
    await sim_client.launch_cluster(quote.id, idempotency_key="enough")


async def test_inv10_payment_grace_expiry_terminates_and_keeps_the_volume(sim_client, admin,
                                                                           sim):
    quote = await sim_client.quote_cluster(H100, 8, 2, storage_gb=100)
    await admin.balance(quote.rate.hourly_cents)  # exactly the first hour
    cluster = await sim_client.launch_cluster(quote.id, idempotency_key="grace")
    cluster = await advance_until(sim_client, admin, cluster.id, "running")
    assert cluster.billing.payment_status is PaymentStatus.CURRENT
    await admin.advance(3600)  # the second hour cannot be paid
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.billing.payment_status is PaymentStatus.PAST_DUE
    assert cluster.billing.unpaid_cents == quote.rate.hourly_cents
    assert cluster.billing.grace_ends_at is not None
    account = await sim_client.get_account()
    assert account.payment_status is PaymentStatus.PAST_DUE
    with pytest.raises(e.PaymentRequired):  # a past-due account cannot launch more
        await launch(sim_client)
    grace_ends_at = cluster.billing.grace_ends_at
    await admin.advance((grace_ends_at - sim.clock.now()).total_seconds() - 1)
    assert (await sim_client.get_cluster(cluster.id)).status is ClusterStatus.RUNNING
    cluster = await advance_until(sim_client, admin, cluster.id, "terminated")
    assert cluster.termination_reason == "payment_grace_expired"
    assert cluster.terminated_at is not None and cluster.terminated_at >= grace_ends_at
    assert cluster.volume is not None
    volume = await sim_client.get_volume(cluster.volume.id)
    assert volume.status is VolumeStatus.AVAILABLE  # terminated, not stopped; data kept


async def test_docs_paying_within_grace_keeps_the_cluster(sim_client, admin):
    quote = await sim_client.quote_cluster(H100, 8, 2)
    await admin.balance(quote.rate.hourly_cents)
    cluster = await sim_client.launch_cluster(quote.id, idempotency_key="payer")
    await advance_until(sim_client, admin, cluster.id, "running")
    await admin.advance(3600)
    assert (await sim_client.get_cluster(cluster.id)).billing.payment_status == "past_due"
    await admin.balance(10 * quote.rate.hourly_cents)
    await admin.advance(2 * 3600)
    cluster = await sim_client.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING
    assert cluster.billing.payment_status is PaymentStatus.CURRENT
    assert cluster.billing.unpaid_cents == 0
