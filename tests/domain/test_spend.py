"""Month maths: accruals inside a month, what live clusters will still cost, the spend report."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from bot.domain.charges import mount_of, volume_span
from bot.domain.models import ClusterState
from bot.domain.spend import (
    MonthSpend,
    Team,
    VolumeSpan,
    accruals_before,
    accrued_in,
    month_bounds,
    month_spend,
    projected_in,
    spend_report,
    volume_charges,
)
from tests.domain import HOUR, NOW, make_cluster

NOV = (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
OCT = (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))


# --- month_bounds -----------------------------------------------------------------------------

def test_month_bounds_of_now_and_of_a_named_month():
    assert month_bounds(None, NOW) == NOV
    assert month_bounds("2026-10", NOW) == OCT
    assert month_bounds("2026-12", NOW) == (datetime(2026, 12, 1, tzinfo=UTC),
                                            datetime(2027, 1, 1, tzinfo=UTC))
    start, end = month_bounds("2028-02", NOW)
    assert (end - start).days == 29  # a leap year
    assert start.tzinfo is UTC


def test_month_bounds_uses_the_utc_month_of_an_aware_now():
    late_in_new_york = datetime(2026, 11, 30, 22, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert month_bounds(None, late_in_new_york)[0] == datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize("bad", ["2026-13", "2026-00", "26-11", "2026/11", "november", ""])
def test_month_bounds_refuses_what_is_not_a_month(bad):
    with pytest.raises(ValueError, match="not a month like 2026-11"):
        month_bounds(bad, NOW)


def test_accruals_before_counts_started_hours():
    assert accruals_before(NOW, NOW) == 0
    assert accruals_before(NOW, NOW - HOUR) == 0
    assert accruals_before(NOW, NOW + HOUR / 60) == 1  # the first accrues at the anchor
    assert accruals_before(NOW, NOW + HOUR) == 1
    assert accruals_before(NOW, NOW + 2 * HOUR + HOUR / 3600) == 3


# --- accrued_in -------------------------------------------------------------------------------

def test_accrued_in_splits_a_cluster_across_the_month_boundary():
    # Ready 31 Oct 22:00, terminated 1 Nov 02:00: accruals at 22, 23, 00 and 01 → 2 + 2.
    ready = datetime(2026, 10, 31, 22, 0, tzinfo=UTC)
    c = make_cluster(status=ClusterState.TERMINATED, ready_at=ready,
                     terminated_at=datetime(2026, 11, 1, 2, 0, tzinfo=UTC),
                     accrued_hours=4, accrued_cents=4 * 6253)
    assert accrued_in(c, *OCT) == 2 * 6253
    assert accrued_in(c, *NOV) == 2 * 6253


def test_an_accrual_exactly_at_the_month_start_belongs_to_the_new_month():
    c = make_cluster(ready_at=NOV[0], accrued_hours=1, accrued_cents=6253)
    assert accrued_in(c, *OCT) == 0
    assert accrued_in(c, *NOV) == 6253


def test_accrued_in_prices_from_the_providers_figure_and_months_add_up():
    # 3 accruals charged 10 001 ¢ in all (not 3 × the rate): the months still sum exactly.
    c = make_cluster(ready_at=datetime(2026, 10, 31, 23, 0, tzinfo=UTC), accrued_hours=3,
                     accrued_cents=10_001)
    october, november = accrued_in(c, *OCT), accrued_in(c, *NOV)
    assert october + november == 10_001
    assert october == 10_001 // 3


def test_accrued_in_ignores_clusters_that_never_billed():
    never_ready = make_cluster(status=ClusterState.FAILED, ready_at=None, accrued_hours=0,
                               accrued_cents=0)
    assert accrued_in(never_ready, *NOV) == 0


def test_accrued_in_with_cents_but_no_hour_count_puts_them_at_ready_at():
    per_second = make_cluster(accrued_hours=0, accrued_cents=1234)
    assert accrued_in(per_second, *NOV) == 1234
    assert accrued_in(per_second, *OCT) == 0


# --- projected_in -----------------------------------------------------------------------------

def test_projection_counts_the_accruals_still_to_come_before_the_end():
    c = make_cluster()  # ready NOW-1h, 2 accruals (NOW-1h, NOW): next at NOW+1h
    assert projected_in(c, now=NOW, end=NOW + 3 * HOUR, lifetime_hours=None) == 2 * 6253
    assert projected_in(c, now=NOW, end=NOW + 3 * HOUR + HOUR / 2, lifetime_hours=None) == \
        3 * 6253


def test_projection_is_capped_by_the_lifetime_envelope():
    c = make_cluster()
    assert projected_in(c, now=NOW, end=NOV[1], lifetime_hours=5) == 3 * 6253
    assert projected_in(c, now=NOW, end=NOV[1], lifetime_hours=2) == 0
    assert projected_in(c, now=NOW, end=NOV[1], lifetime_hours=1) == 0  # already past it


def test_projection_is_capped_by_the_month_end():
    # Ready NOW-1h = 29 Nov 09:00 → accruals on the hour until 30 Nov 23:00: 39 in November.
    c = make_cluster()
    assert projected_in(c, now=NOW, end=NOV[1], lifetime_hours=None) == (39 - 2) * 6253
    assert projected_in(c, now=NOW, end=NOV[1], lifetime_hours=72) == (39 - 2) * 6253


def test_projection_counts_accruals_the_stale_record_has_not_seen_yet():
    c = make_cluster(accrued_hours=1, accrued_cents=6253)  # last refreshed before NOW's accrual
    assert projected_in(c, now=NOW, end=NOW + HOUR, lifetime_hours=None) == 6253


def test_a_provisioning_cluster_is_projected_from_now():
    c = make_cluster(status=ClusterState.PROVISIONING, ready_at=None, accrued_hours=0,
                     accrued_cents=0)
    assert projected_in(c, now=NOW, end=NOW + 2 * HOUR, lifetime_hours=None) == 2 * 6253
    assert projected_in(c, now=NOW, end=NOV[1], lifetime_hours=3) == 3 * 6253


@pytest.mark.parametrize("status", [ClusterState.TERMINATING, ClusterState.TERMINATED,
                                    ClusterState.FAILED])
def test_stopped_clusters_project_nothing(status):
    assert projected_in(make_cluster(status=status), now=NOW, end=NOV[1],
                        lifetime_hours=None) == 0


def test_a_degraded_cluster_keeps_billing_in_the_projection():
    c = make_cluster(status=ClusterState.DEGRADED)
    assert projected_in(c, now=NOW, end=NOW + 2 * HOUR, lifetime_hours=None) == 6253


# --- month_spend ------------------------------------------------------------------------------

RESEARCH = Team(name="research", members=frozenset({"U0ALICE", "U0DAVE"}), monthly_cents=1)
INFRA = Team(name="infra", members=frozenset({"U0ALICE"}), monthly_cents=1)


def test_month_spend_adds_spent_and_projected_per_user_and_team():
    lifetime = {"lifetime_hours": 4}  # 2 accrued + 2 to come
    clusters = [
        make_cluster("a", **lifetime),
        make_cluster("d", owner_id="U0DAVE", hourly_cents=100, accrued_cents=200, **lifetime),
        make_cluster("b", owner_id="U0BOB", **lifetime),
        make_cluster("x", owner_id=None, **lifetime),  # adopted, unclaimed: nobody's budget
        make_cluster("old", status=ClusterState.TERMINATED, lifetime_hours=None,
                     ready_at=datetime(2026, 10, 31, 23, 0, tzinfo=UTC)),  # 1 Oct + 1 Nov
    ]
    spend = month_spend(clusters, user="U0ALICE", teams=[RESEARCH, INFRA], now=NOW)
    alice = 4 * 6253 + 6253
    assert spend == MonthSpend(user_cents=alice,
                               team_cents={"research": alice + 400, "infra": alice})


def test_month_spend_of_someone_without_clusters_is_zero():
    spend = month_spend([make_cluster()], user="U0EVE", teams=[], now=NOW)
    assert spend.user_cents == 0 and spend.team_cents == {}


# --- spend_report -----------------------------------------------------------------------------

def test_spend_report_of_this_month_largest_first_with_projection():
    big = make_cluster("big", owner_id="U0BOB", accrued_hours=2, accrued_cents=20_000,
                       hourly_cents=10_000, lifetime_hours=3)
    small = make_cluster("small", lifetime_hours=2)
    unclaimed = make_cluster("adopted", owner_id=None, lifetime_hours=2)
    idle = make_cluster("idle", status=ClusterState.FAILED, ready_at=None, accrued_hours=0,
                        accrued_cents=0)
    report = spend_report([small, idle, unclaimed, big], None, NOW, enforce_lifetime=True)
    assert report.month == "2026-11"
    assert [(c.id, cents) for c, cents in report.by_cluster] == [
        ("big", 20_000), ("adopted", 2 * 6253), ("small", 2 * 6253)]
    assert report.by_owner == [("U0BOB", 20_000), ("U0ALICE", 2 * 6253), (None, 2 * 6253)]
    assert report.total_cents == 20_000 + 4 * 6253
    assert report.projected_cents == 10_000  # big's third hour; the others are at their cap
    # Without enforcement an envelope stops nothing: the projection runs to the month's end.
    _, end = month_bounds(None, NOW)
    uncapped = spend_report([small, idle, unclaimed, big], None, NOW)
    assert uncapped.projected_cents == sum(
        projected_in(c, now=NOW, end=end, lifetime_hours=None) for c in (small, unclaimed, big))
    assert uncapped.projected_cents > 10_000 and uncapped.month_end == end


def test_spend_report_counts_volumes_billing_on_their_own():
    ready = NOW - 10 * HOUR - HOUR / 2
    ended = make_cluster("gone", status=ClusterState.TERMINATED, ready_at=ready,
                         accrued_hours=3, accrued_cents=3 * 6253, volume_id="vol_1",
                         terminated_at=ready + 2 * HOUR + HOUR / 2)
    own_from = ready + 3 * HOUR  # where the cluster's last paid hour ended
    mounts = [mount_of(ended)]

    def span(id, owner, cents, until=None):
        return volume_span(id=id, owner_id=owner, created_at=ended.created_at,
                           with_cluster=True, prices=[], hourly_cents=cents, mounts=mounts,
                           until=until, now=NOW)
    kept = span("vol_1", "U0ALICE", 10)
    assert kept.charged[0] == (own_from, 10) and kept.own_from == NOW + HOUR / 2
    deleted = span("vol_2", "U0BOB", 7, until=own_from + 2 * HOUR + HOUR / 4)
    live = VolumeSpan(id="vol_3", owner_id="U0BOB", hourly_cents=5, own_from=None)
    report = spend_report([ended], None, NOW, volumes=[kept, deleted, live])
    charged = accruals_before(own_from, NOW + timedelta(microseconds=1))
    assert [(v.id, cents) for v, cents in report.by_volume] == [
        ("vol_1", charged * 10), ("vol_2", 3 * 7)]
    assert report.volumes_cents == charged * 10 + 21
    assert report.total_cents == 6253 * 3 + report.volumes_cents  # all in November
    _, end = month_bounds(None, NOW)
    assert report.projected_cents == (accruals_before(own_from, end) - charged) * 10
    assert dict(report.by_owner)["U0BOB"] == 21


def test_spend_report_of_a_past_month_projects_nothing():
    c = make_cluster(status=ClusterState.TERMINATED, ready_at=datetime(2026, 10, 31, 22, 0,
                                                                      tzinfo=UTC),
                     accrued_hours=4, accrued_cents=4 * 6253)
    report = spend_report([c], "2026-10", NOW)
    assert report.month == "2026-10"
    assert report.total_cents == 2 * 6253 and report.projected_cents == 0
    assert report.by_owner == [("U0ALICE", 2 * 6253)]


def test_spend_report_of_an_empty_month():
    report = spend_report([make_cluster()], "2026-09", NOW)
    assert report.by_cluster == [] and report.by_owner == [] and report.total_cents == 0


# --- committed_spend --------------------------------------------------------------------------

def _held(id, status, *, who="U0ALICE", cents=100_00, lifetime=None):
    from tests.storage.conftest import make_request
    return make_request(id, status=status, requester_id=who, hourly_cents=cents,
                        lifetime_hours=lifetime)


def test_committed_spend_counts_approved_and_launching_requests_once_and_not_the_decided_one():
    from bot.domain.models import RequestStatus as S
    from bot.domain.spend import committed_spend
    team = Team(name="research", members=frozenset({"U0ALICE", "U0DAVE"}), monthly_cents=1)
    cluster = make_cluster()  # Alice's, ready 09:00: 39 accruals this month
    requests = [_held("r-a", S.APPROVED), _held("r-b", S.LAUNCHING, lifetime=3),
                _held("r-c", S.PENDING), _held("r-d", S.LAUNCHED), _held("r-e", S.APPROVED),
                _held("r-f", S.APPROVED, who="U0DAVE"), _held("r-g", S.APPROVED, who="U0ERIN"),
                _held("r-h", S.LAUNCH_FAILED, lifetime=1), _held("r-i", S.REJECTED),
                _held("r-j", S.WAITING, lifetime=2)]  # waiting for stock: holds its room
    got = committed_spend([cluster, cluster], requests, user="U0ALICE", teams=[team], now=NOW,
                          excluding="r-e")
    on_cluster = 39 * 6253  # the record listed twice counts once
    assert got.user_cents == on_cluster + 38 * 100_00 + 3 * 100_00 + 1 * 100_00 + 2 * 100_00
    assert got.team_cents == {"research": got.user_cents + 38 * 100_00}
    assert [c.request_id for c in got.requests] == ["r-a", "r-b", "r-f", "r-h", "r-j"]


def test_a_request_read_beside_its_cluster_counts_as_the_cluster_only():
    # Read in separate statements, a launch committing between them shows as both its request
    # (still launching) and its cluster (bot/services/budgets.py): one spend, not two.
    from bot.domain.models import RequestStatus as S
    from bot.domain.spend import committed_spend
    cluster = make_cluster(request_id="r-b")  # Alice's, ready 09:00: 39 accruals this month
    requests = [_held("r-a", S.APPROVED), _held("r-b", S.LAUNCHING)]
    got = committed_spend([cluster], requests, user="U0ALICE", teams=[], now=NOW)
    assert got.user_cents == 39 * 6253 + 38 * 100_00
    assert [c.request_id for c in got.requests] == ["r-a"]


def test_uncharged_marks_move_charges_and_bill_the_volume_alone():
    from bot.domain.models import ClusterState as S
    from bot.domain.models import Observation
    ready = datetime(2026, 11, 30, 22, 30, tzinfo=UTC)
    # Marks 22:30 charged, 23:30 uncharged (every node down), 00:30 and 01:30 charged.
    observed = Observation(status=S.TERMINATED, skipped_marks=(ready + HOUR,))
    c = make_cluster("skip", status=S.TERMINATED, ready_at=ready, accrued_hours=3,
                     accrued_cents=3 * 6253, terminated_at=ready + 3 * HOUR + HOUR / 2,
                     observed=observed)
    nov, dec = month_bounds("2026-11", NOW), month_bounds("2026-12", NOW)
    assert accrued_in(c, *nov) == 6253 and accrued_in(c, *dec) == 2 * 6253
    volume = volume_span(id="v", owner_id="U0ALICE", created_at=ready - HOUR,
                         with_cluster=True, prices=[], hourly_cents=10, mounts=[mount_of(c)],
                         until=None, now=ready + 6 * HOUR)
    assert volume.charged == ((ready + HOUR, 10), (ready + 4 * HOUR, 10),
                              (ready + 5 * HOUR, 10), (ready + 6 * HOUR, 10))
    assert volume_charges(volume, *nov) == 10  # the hour it paid alone at 23:30
    assert volume_charges(volume, dec[0], ready + 6 * HOUR) == 2 * 10  # 02:30, 03:30
