"""Storage for the spend policy: request and envelope fields, pending requests, approvers, the
cluster queries behind reports. Every test that takes `db` runs on a SQLite file, in memory and
on PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError
from sqlalchemy.exc import StatementError

from bot.domain.models import Approval, ClusterState, Decision, RequestStatus
from tests.storage.conftest import T0, make_cluster, make_request, seed

TOKYO = timezone(timedelta(hours=9))
TICK = timedelta(microseconds=1)

# -- request fields ----------------------------------------------------------------------------


async def test_request_policy_fields_round_trip(db):
    strict = make_request(approvals_needed=3, override_rule="max_hourly_cents", lifetime_hours=48)
    plain = make_request("r-2")
    await seed(db, strict, plain)
    async with db.transaction() as repos:
        assert await repos.requests.get("r-1") == strict
        stored = await repos.requests.get("r-2")
    assert stored == plain
    assert (stored.approvals_needed, stored.override_rule, stored.lifetime_hours) == (1, None, None)


async def test_transition_and_update_set_the_policy_fields(db):
    await seed(db)
    later = T0 + timedelta(minutes=1)
    async with db.transaction() as repos:
        moved = await repos.requests.transition(
            "r-1", from_={RequestStatus.PENDING}, to=RequestStatus.PENDING, now=later,
            approvals_needed=2, override_rule="max_lifetime_hours", lifetime_hours=200,
        )
        assert moved == make_request(updated_at=later, approvals_needed=2,
                                     override_rule="max_lifetime_hours", lifetime_hours=200)
        cleared = await repos.requests.update(
            "r-1", now=later, override_rule=None, lifetime_hours=None
        )
        assert cleared == make_request(updated_at=later, approvals_needed=2)
        with pytest.raises(ValidationError):
            await repos.requests.update("r-1", now=later, approvals_needed="two")
    async with db.transaction() as repos:
        assert await repos.requests.get("r-1") == cleared


async def test_list_pending_oldest_created_first(db):
    await seed(
        db,
        # Created last but updated first: pending order is by creation, not by update.
        make_request("r-late", created_at=T0 + timedelta(minutes=9), updated_at=T0),
        make_request("r-b", created_at=T0 + timedelta(minutes=1),
                     updated_at=T0 + timedelta(minutes=8)),
        make_request("r-a", created_at=T0 + timedelta(minutes=1)),  # same instant: by id
        make_request("r-first", created_at=T0 - timedelta(minutes=5)),
        make_request("r-approved", status=RequestStatus.APPROVED),
        make_request("r-rejected", status=RequestStatus.REJECTED),
        make_request("r-failed", status=RequestStatus.LAUNCH_FAILED),
    )
    async with db.transaction() as repos:
        pending = await repos.requests.list_pending()
    assert [r.id for r in pending] == ["r-first", "r-a", "r-b", "r-late"]
    assert pending[0] == make_request("r-first", created_at=T0 - timedelta(minutes=5))


async def test_list_pending_when_none_are(db):
    await seed(db, make_request(status=RequestStatus.LAUNCHED))
    async with db.transaction() as repos:
        assert await repos.requests.list_pending() == []


# -- approvers ---------------------------------------------------------------------------------


def _approval(approver: str, decision: Decision = Decision.APPROVE, *, request_id: str = "r-1",
              quote_id: str = "q-1", minute: int = 0) -> Approval:
    return Approval(request_id=request_id, approver_id=approver, decision=decision,
                    quote_id=quote_id, hourly_cents=6_412, at=T0 + timedelta(minutes=minute))


async def test_distinct_approvers_counts_each_approval_of_that_quote_once(db):
    await seed(db, make_request("r-1"), make_request("r-2"))
    async with db.transaction() as repos:
        for approval in (
            _approval("U2"),
            _approval("U2", minute=1),  # a second click by the same approver
            _approval("U3", minute=2),
            _approval("U4", Decision.REJECT, minute=3),
            _approval("U5", quote_id="q-old"),  # approved an earlier price of the request
            _approval("U6", request_id="r-2", quote_id="q-2"),
        ):
            await repos.approvals.add(approval)
    async with db.transaction() as repos:
        assert await repos.approvals.distinct_approvers("r-1", "q-1") == {"U2", "U3"}
        assert await repos.approvals.distinct_approvers("r-1", "q-old") == {"U5"}
        assert await repos.approvals.distinct_approvers("r-2", "q-2") == {"U6"}
        assert await repos.approvals.distinct_approvers("r-2", "q-1") == set()
        assert await repos.approvals.distinct_approvers("r-none", "q-1") == set()


# -- cluster fields ----------------------------------------------------------------------------


async def test_cluster_envelope_fields_round_trip_and_update(db):
    enveloped = make_cluster("c-1", request_id=None, lifetime_hours=24, envelope_stage="warned")
    plain = make_cluster("c-2", request_id=None)
    later = T0 + timedelta(hours=20)
    async with db.transaction() as repos:
        await repos.clusters.add(enveloped)
        await repos.clusters.add(plain)
    async with db.transaction() as repos:
        assert await repos.clusters.get("c-1") == enveloped
        stored = await repos.clusters.get("c-2")
        assert (stored.lifetime_hours, stored.envelope_stage, stored.extended_by) == (
            None, "none", None)
        extended = await repos.clusters.update(
            "c-1", now=later, lifetime_hours=48, envelope_stage="extended", extended_by="U9"
        )
    assert extended == make_cluster("c-1", request_id=None, lifetime_hours=48,
                                    envelope_stage="extended", extended_by="U9", updated_at=later)
    async with db.transaction() as repos:
        assert await repos.clusters.get("c-1") == extended


async def test_list_for_owner(db):
    async with db.transaction() as repos:
        for minute, (cid, owner, state) in reversed(list(enumerate([
            ("c-1", "U1", ClusterState.TERMINATED), ("c-2", "U2", ClusterState.RUNNING),
            ("c-3", "U1", ClusterState.RUNNING), ("c-4", None, ClusterState.RUNNING),
        ]))):
            await repos.clusters.add(make_cluster(
                cid, request_id=None, owner_id=owner, status=state,
                created_at=T0 + timedelta(minutes=minute),
            ))
    async with db.transaction() as repos:
        mine = await repos.clusters.list_for_owner("U1")
        assert [c.id for c in mine] == ["c-1", "c-3"]  # live or not, oldest first
        assert mine[1] == make_cluster("c-3", request_id=None, status=ClusterState.RUNNING,
                                       created_at=T0 + timedelta(minutes=2))
        assert [c.id for c in await repos.clusters.list_for_owner("U2")] == ["c-2"]
        assert await repos.clusters.list_for_owner("U-nobody") == []


# -- clusters in a period ----------------------------------------------------------------------

START = datetime(2026, 12, 1, tzinfo=UTC)
END = datetime(2027, 1, 1, tzinfo=UTC)

# id: (ready_at, terminated_at); the period is [START, END).
SPANS = {
    "c-ended-before": (START - timedelta(days=3), START - timedelta(days=1)),
    "c-ended-at-start": (START - timedelta(days=1), START),
    "c-ended-just-after-start": (START - timedelta(days=1), START + TICK),
    "c-ready-at-start": (START, None),
    "c-live-from-before": (START - timedelta(days=40), None),
    "c-spanning": (START - timedelta(days=1), END + timedelta(days=1)),
    "c-inside": (START + timedelta(days=3), START + timedelta(days=4)),
    "c-ready-just-before-end": (END - TICK, None),
    "c-ready-at-end": (END, None),
    "c-ready-after": (END + timedelta(days=1), END + timedelta(days=2)),
    "c-never-ready": (None, START + timedelta(days=2)),  # failed while provisioning
}
IN_PERIOD = [  # by ready_at
    "c-live-from-before", "c-ended-just-after-start", "c-spanning", "c-ready-at-start",
    "c-inside", "c-ready-just-before-end",
]


async def _add_spans(db):
    async with db.transaction() as repos:
        for cid, (ready_at, terminated_at) in SPANS.items():
            ended = terminated_at is not None
            await repos.clusters.add(make_cluster(
                cid, request_id=None, ready_at=ready_at, terminated_at=terminated_at,
                status=ClusterState.TERMINATED if ended else ClusterState.RUNNING,
                created_at=START - timedelta(days=50),
            ))


async def test_list_in_period_takes_the_clusters_up_in_the_half_open_period(db):
    await _add_spans(db)
    async with db.transaction() as repos:
        found = await repos.clusters.list_in_period(START, END)
    assert [c.id for c in found] == IN_PERIOD
    assert found[0] == make_cluster(
        "c-live-from-before", request_id=None, status=ClusterState.RUNNING,
        ready_at=START - timedelta(days=40), created_at=START - timedelta(days=50),
    )


async def test_list_in_period_compares_instants_whatever_the_offset(db):
    await _add_spans(db)
    async with db.transaction() as repos:
        found = await repos.clusters.list_in_period(START.astimezone(TOKYO), END.astimezone(TOKYO))
        assert [c.id for c in found] == IN_PERIOD
        # A one-tick period at the start: only what is up at that very instant.
        first = await repos.clusters.list_in_period(START, START + TICK)
    assert [c.id for c in first] == [
        "c-live-from-before", "c-ended-just-after-start", "c-spanning", "c-ready-at-start"]


async def test_list_in_period_refuses_empty_periods_and_naive_datetimes(db):
    async with db.transaction() as repos:
        with pytest.raises(ValueError, match="empty period"):
            await repos.clusters.list_in_period(END, START)
        with pytest.raises(ValueError, match="empty period"):
            await repos.clusters.list_in_period(START, START)
    with pytest.raises(StatementError) as caught:  # UtcDateTime refuses them at the bind
        async with db.transaction() as repos:
            await repos.clusters.list_in_period(START.replace(tzinfo=None),
                                                END.replace(tzinfo=None))
    assert isinstance(caught.value.orig, ValueError)
    assert "naive" in str(caught.value.orig)


async def test_the_period_and_live_lists_read_only_the_owners_asked_for(db):
    """The budget check reads the clusters of the people a budget covers, not the month's."""
    async with db.transaction() as repos:
        for n, owner in enumerate(("U1", "U2", "U3", None)):
            await repos.clusters.add(make_cluster(
                f"c-{n}", request_id=None, owner_id=owner, status=ClusterState.RUNNING,
                ready_at=START + timedelta(days=1), created_at=START + timedelta(hours=n)))
    async with db.transaction() as repos:
        month = await repos.clusters.list_in_period(START, END, owners={"U1", "U3"})
        live = await repos.clusters.list_live(owners={"U2"})
        nobody = await repos.clusters.list_live(owners=set())
        everyone = await repos.clusters.list_live()
    assert [c.id for c in month] == ["c-0", "c-2"]
    assert [c.id for c in live] == ["c-1"]
    assert nobody == []
    assert [c.id for c in everyone] == ["c-0", "c-1", "c-2", "c-3"]
