"""Engine: shared volumes (contract §2.5, §4.4, §5.4; invariant 9)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from aireserve_sim.engine import SimulatorEngine
from bot.reserve import errors as e
from bot.reserve.schemas import (
    ClusterStatus,
    Volume,
    VolumeCreateRequest,
    VolumeStatus,
    VolumeUpdateRequest,
)
from tests.reserve.simulator.test_engine_support import *

HOUR = timedelta(hours=1)


def create(engine: SimulatorEngine, size_gb: int = 1000, location: str = "us-ga",
           **kw: Any) -> Volume:
    return engine.create_volume(VolumeCreateRequest(size_gb=size_gb, location=location, **kw))


def test_create_read_and_list_volumes():
    engine, _ = make()
    first = create(engine, name="weights")
    engine.advance(1)
    second = create(engine, 10, "eu-ro")
    assert first.id.startswith("vol_")
    assert (first.name, first.size_gb, first.location, first.status, first.mount_path) == (
        "weights", 1000, "us-ga", VolumeStatus.AVAILABLE, "/workspace")
    assert (first.attached_cluster_id, first.created_with_cluster_id, first.created_at) == (
        None, None, START)
    assert (first.billing.cents_per_gb_month, first.billing.hourly_cents,
            first.billing.covered_by_cluster) == (7, 10, False)
    assert engine.get_volume(first.id) == first
    assert [v.id for v in engine.list_volumes()] == [second.id, first.id]
    with pytest.raises(e.NotFound) as caught:
        engine.get_volume("vol_missing")
    assert caught.value.resource == "volume"


@pytest.mark.parametrize(("kw", "field"), [
    ({"size_gb": 9}, "sizeGb"), ({"size_gb": 4097}, "sizeGb"), ({"size_gb": -1}, "sizeGb"),
    ({"size_gb": 10**30}, "sizeGb"), ({"location": "nowhere"}, "location"),
    ({"location": ""}, "location"), ({"name": ""}, "name"), ({"name": "n" * 65}, "name"),
])
def test_create_volume_validation(kw, field):
    engine, _ = make()
    body = {"size_gb": 100, "location": "us-tx", **kw}
    with pytest.raises(e.InvalidRequest) as caught:
        engine.create_volume(VolumeCreateRequest(**body))
    assert caught.value.field == field


def test_create_volume_needs_its_first_hour_of_balance():
    engine, _ = make()
    engine.set_balance(9)
    with pytest.raises(e.PaymentRequired) as caught:
        create(engine, 1000)
    assert (caught.value.required_cents, caught.value.balance_cents) == (10, 9)


def test_a_standalone_volume_bills_per_started_hour_until_deleted():
    engine, _ = make(volume_delete_seconds=2)
    volume = create(engine, 1000)
    engine.advance(2 * 3600 + 1)
    hours = charges(engine, volume.id, "volume_hour")
    assert [(x.at, x.cents) for x in hours] == [(START + k * HOUR, 10) for k in range(3)]
    deleting = engine.delete_volume(volume.id)
    assert deleting.status is VolumeStatus.DELETING and deleting.deleted_at is None
    engine.advance(2)
    gone = engine.get_volume(volume.id)
    assert gone.status is VolumeStatus.DELETED and gone.deleted_at == engine.clock.now()
    assert engine.list_volumes() == []
    engine.advance(10 * 3600)
    assert len(charges(engine, volume.id, "volume_hour")) == 3  # billing stopped at once
    assert engine.delete_volume(volume.id).status is VolumeStatus.DELETED  # idempotent
    with pytest.raises(e.InvalidState):
        engine.update_volume(volume.id, VolumeUpdateRequest(size_gb=2000))


def test_a_grown_volume_bills_at_its_new_size():
    engine, _ = make()
    volume = create(engine, 1000)
    engine.advance(600)
    grown = engine.update_volume(volume.id, VolumeUpdateRequest(size_gb=4096, name="big"))
    assert (grown.size_gb, grown.name, grown.billing.hourly_cents) == (4096, "big", 39)
    engine.advance(3600)
    assert [x.cents for x in charges(engine, volume.id, "volume_hour")] == [10, 39]


def test_inv9_shrink_is_400_and_same_size_is_a_no_op():
    engine, _ = make()
    volume = create(engine, 500)
    with pytest.raises(e.InvalidRequest) as caught:
        engine.update_volume(volume.id, VolumeUpdateRequest(size_gb=100))
    assert (caught.value.field, caught.value.reason) == ("sizeGb", "shrink_not_allowed")
    assert engine.update_volume(volume.id, VolumeUpdateRequest(size_gb=500)).size_gb == 500
    with pytest.raises(e.InvalidRequest):
        engine.update_volume(volume.id, VolumeUpdateRequest(size_gb=4097))


def test_inv9_an_attached_volume_cannot_be_deleted_or_grown():
    engine, clock = make()
    _, cluster = running(engine, clock, storage_gb=100)
    assert cluster.volume is not None
    volume_id = cluster.volume.id
    with pytest.raises(e.VolumeAttached) as caught:
        engine.delete_volume(volume_id)
    assert (caught.value.volume_id, caught.value.cluster_id) == (volume_id, cluster.id)
    with pytest.raises(e.VolumeAttached):
        engine.update_volume(volume_id, VolumeUpdateRequest(size_gb=200))
    with pytest.raises(e.InvalidRequest):  # a shrink is refused as a shrink, attached or not
        engine.update_volume(volume_id, VolumeUpdateRequest(size_gb=50))
    assert engine.update_volume(volume_id, VolumeUpdateRequest(name="renamed")).name == "renamed"
    engine.terminate(cluster.id)
    engine.advance(60)
    assert engine.update_volume(volume_id, VolumeUpdateRequest(size_gb=200)).size_gb == 200
    assert engine.delete_volume(volume_id).status is VolumeStatus.DELETING


def test_inv9_a_volume_made_with_the_cluster_survives_terminate_and_then_bills_alone():
    engine, clock = make(terminate_seconds=2)
    q = quote(engine, storage_gb=1000)
    cluster = launch(engine, q)
    assert cluster.volume is not None
    volume_id = cluster.volume.id
    engine.advance(2 * PROVISION)
    ready = engine.get_cluster(cluster.id).ready_at
    assert ready is not None
    volume = engine.get_volume(volume_id)
    assert volume.status is VolumeStatus.ATTACHED and volume.billing.covered_by_cluster
    clock.set(ready + timedelta(hours=2, minutes=10))
    engine.terminate(cluster.id)
    engine.advance(2)
    volume = engine.get_volume(volume_id)
    assert (volume.status, volume.attached_cluster_id, volume.billing.covered_by_cluster) == (
        VolumeStatus.AVAILABLE, None, False)
    assert charges(engine, volume_id, "volume_hour") == []  # provisioning and cluster hours
    engine.advance(3 * 3600)
    hours = charges(engine, volume_id, "volume_hour")
    # the cluster paid up to ready + 3 h; the volume's own hours start exactly there
    assert [x.at for x in hours] == [ready + 3 * HOUR + k * HOUR for k in range(3)]
    assert {x.cents for x in hours} == {10}
    assert engine.get_cluster(cluster.id).status is ClusterStatus.TERMINATED


def test_a_mounted_volume_is_never_charged_for_an_hour_the_cluster_paid():
    engine, clock = make()
    volume = create(engine, 1000, "us-tx")
    engine.advance(1800)  # its own hour 10:00–11:00 is paid
    q = quote(engine, volume_id=volume.id)
    assert q.location == "us-tx" and q.breakdown.shared_volume is not None
    assert q.breakdown.shared_volume.size_gb == 1000
    cluster = launch(engine, q)
    assert cluster.volume is not None and not cluster.volume.created_with_cluster
    engine.advance(6 * 3600)
    own = [x.at for x in charges(engine, volume.id, "volume_hour")]
    assert own == [START]  # covered from readyAt (10:30:10) on
    engine.terminate(cluster.id)
    engine.advance(3600)
    cluster_hours = [x.at for x in charges(engine, cluster.id)]
    own = [x.at for x in charges(engine, volume.id, "volume_hour")]
    assert own[1] == cluster_hours[-1] + HOUR  # resumes where the cluster's last hour ends


def test_inv9_a_volume_id_quote_inherits_the_volume_location():
    engine, _ = make()
    volume = create(engine, 1000, "us-ga")
    q = quote(engine, volume_id=volume.id)
    assert (q.location, q.volume_id, q.storage) == ("us-ga", volume.id, None)
    assert quote(engine, volume_id=volume.id, location="us-ga").location == "us-ga"
    with pytest.raises(e.InvalidRequest) as caught:
        quote(engine, volume_id=volume.id, location="us-tx")
    assert (caught.value.reason, caught.value.details["volumeLocation"]) == (
        "volume_location_mismatch", "us-ga")


def test_a_volume_held_by_a_live_cluster_cannot_be_quoted_or_launched_again():
    engine, _ = make()
    volume = create(engine, 100, "us-tx")
    q1 = quote(engine, volume_id=volume.id)
    q2 = quote(engine, volume_id=volume.id)
    cluster = launch(engine, q1)
    assert engine.get_volume(volume.id).attached_cluster_id == cluster.id
    with pytest.raises(e.VolumeAttached) as caught:
        quote(engine, volume_id=volume.id)
    assert caught.value.cluster_id == cluster.id
    with pytest.raises(e.VolumeAttached):
        launch(engine, q2)
    assert engine.get_quote(q2.id).launched_cluster_id is None


def test_a_volume_being_deleted_cannot_be_mounted():
    engine, _ = make()
    volume = create(engine, 100, "us-tx")
    q = quote(engine, volume_id=volume.id)
    engine.delete_volume(volume.id)
    with pytest.raises(e.NotFound):
        launch(engine, q)
    with pytest.raises(e.NotFound):
        quote(engine, volume_id=volume.id)
