"""What AI Reserve charged (bot/domain/charges.py): charged and uncharged hour marks, and a
volume's own hours replayed across grows, remounts and clusters it was not made with."""

from datetime import timedelta

from bot.domain.charges import (
    Mount,
    charges_between,
    hour_in_progress,
    mount_of,
    volume_charges,
    volume_span,
)
from bot.domain.models import ClusterState, Observation, PriceStep, VolumeRecord
from tests.domain import HOUR, NOW, make_cluster

MIN = timedelta(minutes=1)


def test_the_issue_case_grown_remounted_then_deleted_is_charged_hour_by_hour():
    """A kept volume (2,000 GB, 19 ¢/h) grown to 4,000 GB (38 ¢/h), mounted by a new cluster,
    then deleted: the hours the new cluster paid are not charged again, and the hours before
    the grow stay at the old size."""
    made = NOW - 10 * HOUR
    first = make_cluster("c1", status=ClusterState.TERMINATED, created_at=made,
                         ready_at=made + 5 * MIN, accrued_hours=2, accrued_cents=2 * 6253,
                         terminated_at=made + 90 * MIN, volume_id="v")
    second = make_cluster("c2", status=ClusterState.TERMINATED, created_at=made + 4 * HOUR,
                          ready_at=made + 4 * HOUR + 10 * MIN, accrued_hours=2,
                          accrued_cents=2 * 6253, terminated_at=made + 5 * HOUR + 30 * MIN,
                          volume_id="v")
    grown = made + 2 * HOUR + 30 * MIN
    deleted = made + 8 * HOUR + 30 * MIN
    span = volume_span(id="v", owner_id="U0ALICE", created_at=made, with_cluster=True,
                       prices=[PriceStep(at=made, hourly_cents=19),
                               PriceStep(at=grown, hourly_cents=38)],
                       hourly_cents=38, mounts=[mount_of(first), mount_of(second)],
                       until=deleted, now=NOW)
    own = made + 2 * HOUR + 5 * MIN  # c1's second paid hour ended here
    assert span.charged == (
        (own, 19), (own + HOUR, 38),  # 2:05 before the grow, 3:05 after it
        # 4:05 is still its own hour (c2 provisions); c2 pays 4:10–6:10; own again from 6:10
        (own + 2 * HOUR, 38),
        (made + 6 * HOUR + 10 * MIN, 38), (made + 7 * HOUR + 10 * MIN, 38),
        (made + 8 * HOUR + 10 * MIN, 38),
    )
    assert span.own_from is None  # deleted: nothing more
    assert volume_charges(span, made, NOW) == 19 + 5 * 38


def test_a_volume_made_outside_the_bot_bills_from_its_creation_until_a_cluster_pays():
    made = NOW - 5 * HOUR - 17 * MIN
    holder = make_cluster("c1", created_at=made + 2 * HOUR + 30 * MIN,
                          ready_at=made + 2 * HOUR + 40 * MIN, accrued_hours=3,
                          accrued_cents=3 * 6253, volume_id="v")
    span = volume_span(id="v", owner_id=None, created_at=made, with_cluster=False, prices=[],
                       hourly_cents=10, mounts=[mount_of(holder)], until=None, now=NOW)
    # 0:00, 1:00, 2:00 alone (2:00 while the cluster provisions); the cluster pays from 2:40.
    assert [at for at, _ in span.charged] == [made, made + HOUR, made + 2 * HOUR]
    assert span.own_from is None  # a cluster pays for it now


def test_a_volume_attached_now_keeps_what_it_billed_before():
    """A volume a live cluster holds when the report runs still shows its earlier own hours."""
    made = NOW - 3 * HOUR
    live = make_cluster("c1", created_at=NOW - HOUR, ready_at=NOW - HOUR + MIN, volume_id="v")
    span = volume_span(id="v", owner_id="U0ALICE", created_at=made, with_cluster=False,
                       prices=[], hourly_cents=10, mounts=[mount_of(live)], until=None, now=NOW)
    assert volume_charges(span, made, NOW + MIN) == 3 * 10


def test_an_uncharged_mark_bills_the_volume_alone_for_that_hour():
    ready = NOW - 4 * HOUR
    down = make_cluster("c1", created_at=ready - MIN, ready_at=ready, accrued_hours=3,
                        accrued_cents=3 * 6253, volume_id="v",
                        observed=Observation(status=ClusterState.RUNNING,
                                             skipped_marks=(ready + 2 * HOUR,)))
    span = volume_span(id="v", owner_id="U0ALICE", created_at=ready - MIN, with_cluster=True,
                       prices=[], hourly_cents=10, mounts=[mount_of(down)], until=None, now=NOW)
    assert span.charged == ((ready + 2 * HOUR, 10),)
    assert charges_between(down, ready + HOUR, NOW) == 2  # 1:00 and 3:00, not 2:00


def test_the_hour_in_progress_says_whether_it_was_charged():
    ready = NOW - 2 * HOUR - 10 * MIN
    c = make_cluster(ready_at=ready, accrued_hours=2, accrued_cents=2 * 6253,
                     observed=Observation(status=ClusterState.DEGRADED,
                                          skipped_marks=(ready + 2 * HOUR,)),
                     status=ClusterState.DEGRADED)
    assert hour_in_progress(c, NOW) == (ready + 2 * HOUR, False)
    assert hour_in_progress(c, ready + 90 * MIN) == (ready + HOUR, True)
    assert hour_in_progress(c.model_copy(update={"status": ClusterState.TERMINATED}), NOW) \
        is None


def test_monthly_price_is_the_providers_not_the_rounded_hourly_times_730():
    volume = VolumeRecord(id="v", owner_id=None, cluster_id=None, size_gb=2670,
                          location="us-tx", hourly_cents=26, status="available",
                          updated_at=NOW, cents_per_gb_month=7)
    assert volume.monthly_cents == 18690  # $186.90, not 26 × 730 = $189.80
    small = volume.model_copy(update={"size_gb": 50, "hourly_cents": 0})
    assert small.monthly_cents == 350  # $3.50 a month, not $0.00


def test_a_mount_that_never_became_ready_releases_the_volume_when_it_ended():
    made = NOW - 3 * HOUR
    failed = make_cluster("c1", created_at=made, ready_at=None, accrued_hours=0,
                          accrued_cents=0, status=ClusterState.FAILED, volume_id="v",
                          updated_at=made + 20 * MIN)
    span = volume_span(id="v", owner_id=None, created_at=made, with_cluster=True, prices=[],
                       hourly_cents=5, mounts=[Mount(cluster_id="c1", attached_at=made,
                                                     ended_at=made + 20 * MIN)],
                       until=None, now=NOW)
    assert mount_of(failed).ended_at == made + 20 * MIN
    assert [at for at, _ in span.charged] == [made + 20 * MIN + k * HOUR for k in range(3)]
