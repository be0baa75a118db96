"""Quote, approval, cluster and message repositories (requests: test_request_repo.py).

Every test runs on a SQLite file, on an in-memory SQLite database and on PostgreSQL (the `db`
fixture of conftest.py); domain models must compare equal after a round trip.
"""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest
from sqlalchemy.exc import IntegrityError

from bot.domain.errors import UnknownResource
from bot.domain.models import Approval, ClusterState, Decision, MessageRef, QuoteSpec
from tests.storage.conftest import SHAPE, T0, make_cluster, make_quote, make_request, seed

# -- quotes ------------------------------------------------------------------------------------


async def test_quote_round_trip(db):
    quote = make_quote()
    async with db.transaction() as repos:
        await repos.quotes.add(quote)
    async with db.transaction() as repos:
        assert await repos.quotes.get("q-1") == quote
        assert await repos.quotes.get("q-missing") is None


async def test_quote_with_minimal_spec_and_no_lines(db):
    quote = make_quote(spec=QuoteSpec(shape=SHAPE), lines=())
    async with db.transaction() as repos:
        await repos.quotes.add(quote)
    async with db.transaction() as repos:
        assert await repos.quotes.get("q-1") == quote


async def test_duplicate_quote_id_is_an_integrity_error(db):
    with pytest.raises(IntegrityError):
        async with db.transaction() as repos:
            await repos.quotes.add(make_quote())
            await repos.quotes.add(make_quote())


async def test_non_utc_datetimes_come_back_as_the_same_instant_in_utc(db):
    tokyo = timezone(timedelta(hours=9))
    quote = make_quote(created_at=T0.astimezone(tokyo))
    async with db.transaction() as repos:
        await repos.quotes.add(quote)
    async with db.transaction() as repos:
        stored = await repos.quotes.get("q-1")
    assert stored == quote
    assert stored.created_at.tzinfo is UTC


# -- approvals ---------------------------------------------------------------------------------


async def test_approvals_for_request_oldest_first(db):
    await seed(db, make_request("r-1"), make_request("r-2"))
    second = Approval(request_id="r-1", approver_id="U3", decision=Decision.APPROVE,
                      quote_id="q-1", hourly_cents=6_412, at=T0 + timedelta(minutes=2))
    first = second.model_copy(update={"approver_id": "U2", "decision": Decision.REJECT,
                                      "at": T0 + timedelta(minutes=1)})
    other = second.model_copy(update={"request_id": "r-2", "quote_id": "q-2"})
    async with db.transaction() as repos:
        for approval in (second, other, first):
            await repos.approvals.add(approval)
    async with db.transaction() as repos:
        assert await repos.approvals.for_request("r-1") == [first, second]
        assert await repos.approvals.for_request("r-2") == [other]
        assert await repos.approvals.for_request("r-none") == []


# -- clusters ----------------------------------------------------------------------------------


async def test_cluster_round_trip_and_idempotent_add(db):
    await seed(db)
    cluster = make_cluster(volume_id="vol-1", volume_created_with_cluster=True)
    async with db.transaction() as repos:
        assert await repos.clusters.add(cluster) == cluster
    async with db.transaction() as repos:
        again = await repos.clusters.add(make_cluster(status=ClusterState.RUNNING, name="other"))
        assert again == cluster
        assert await repos.clusters.get("c-1") == cluster
        assert await repos.clusters.get("c-missing") is None


async def test_adopted_cluster_without_request(db):
    adopted = make_cluster("c-adopted", request_id=None, status=ClusterState.RUNNING,
                           name=None, ready_at=T0)
    async with db.transaction() as repos:
        await repos.clusters.add(adopted)
    async with db.transaction() as repos:
        assert await repos.clusters.get("c-adopted") == adopted


async def test_cluster_update(db):
    await seed(db)
    ready = T0 + timedelta(minutes=2)
    async with db.transaction() as repos:
        await repos.clusters.add(make_cluster())
        updated = await repos.clusters.update(
            "c-1", now=ready, status=ClusterState.RUNNING, nodes_ready=2, ready_at=ready,
            accrued_cents=12_824, accrued_hours=2,
        )
    expected = make_cluster(status=ClusterState.RUNNING, nodes_ready=2, ready_at=ready,
                            accrued_cents=12_824, accrued_hours=2, updated_at=ready)
    assert updated == expected
    async with db.transaction() as repos:
        assert await repos.clusters.get("c-1") == expected
        with pytest.raises(UnknownResource):
            await repos.clusters.update("c-nowhere", now=ready, nodes_ready=1)
        with pytest.raises(TypeError):
            await repos.clusters.update("c-1", now=ready, nodes=3)


async def test_cluster_lists(db):
    await seed(db, make_request("r-1"), make_request("r-2"))
    states = [
        ("c-1", ClusterState.TERMINATED), ("c-2", ClusterState.RUNNING),
        ("c-3", ClusterState.PROVISIONING), ("c-4", ClusterState.FAILED),
        ("c-5", ClusterState.DEGRADED), ("c-6", ClusterState.TERMINATING),
    ]
    async with db.transaction() as repos:
        for minute, (cid, state) in reversed(list(enumerate(states))):
            await repos.clusters.add(make_cluster(
                cid, request_id="r-2" if cid == "c-5" else None, status=state,
                created_at=T0 + timedelta(minutes=minute),
            ))
    async with db.transaction() as repos:
        assert [c.id for c in await repos.clusters.list_live()] == ["c-2", "c-3", "c-5", "c-6"]
        # A page of `/cluster list`, and the totals of every live cluster in one query.
        assert [c.id for c in await repos.clusters.list_live(offset=1, limit=2)] == ["c-3", "c-5"]
        assert await repos.clusters.live_totals() == dict.fromkeys(
            (ClusterState.RUNNING, ClusterState.PROVISIONING, ClusterState.DEGRADED,
             ClusterState.TERMINATING), (1, 6412))
        assert [c.id for c in await repos.clusters.list_recent()] == [
            "c-6", "c-5", "c-4", "c-3", "c-2", "c-1"]
        assert [c.id for c in await repos.clusters.list_recent(limit=2)] == ["c-6", "c-5"]
        assert await repos.clusters.by_request("r-2") == make_cluster(
            "c-5", request_id="r-2", status=ClusterState.DEGRADED,
            created_at=T0 + timedelta(minutes=4))
        assert await repos.clusters.by_request("r-1") is None


# -- messages ----------------------------------------------------------------------------------


async def test_message_put_get_and_upsert(db):
    card = MessageRef(channel_id="C1", ts="1764410400.000100")
    async with db.transaction() as repos:
        assert await repos.messages.get("approval", "r-1") is None
        await repos.messages.put("approval", "r-1", card, now=T0)
        await repos.messages.put("cluster", "r-1", MessageRef(channel_id="C2", ts="2.0"), now=T0)
    async with db.transaction() as repos:
        assert await repos.messages.get("approval", "r-1") == card
        moved = MessageRef(channel_id="C9", ts="1764410999.000200")
        await repos.messages.put("approval", "r-1", moved, now=T0 + timedelta(hours=1))
    async with db.transaction() as repos:
        assert await repos.messages.get("approval", "r-1") == moved
        assert await repos.messages.get("cluster", "r-1") == MessageRef(channel_id="C2", ts="2.0")
        assert await repos.messages.get("approval", "r-2") is None


async def test_many_cluster_rows_convert_in_one_batch_like_one(db):
    """Past MANY_ROWS the rows are converted on a thread: the same records either way."""
    from storage.rows import MANY_ROWS

    await seed(db)
    many = [make_cluster(f"c-{i:03}", request_id=None, owner_id="U1" if i % 2 else "U2",
                         status=ClusterState.RUNNING if i % 3 else ClusterState.TERMINATED,
                         lifetime_hours=4 if i % 5 == 0 else None,
                         created_at=T0 + timedelta(minutes=i)) for i in range(MANY_ROWS * 2)]
    async with db.transaction() as repos:
        for c in many:
            await repos.clusters.add(c)
    async with db.transaction() as repos:
        live = [c for c in many if c.status.is_live]
        assert await repos.clusters.list_live() == live
        assert await repos.clusters.list_live(with_lifetime=True) == [
            c for c in live if c.lifetime_hours is not None]
        assert await repos.clusters.list_for_owner("U2", live=True) == [
            c for c in live if c.owner_id == "U2"]
        assert await repos.clusters.list_all() == many


async def test_lists_of_clusters_reuse_the_raw_columns_built_once(db, monkeypatch):
    """Each list reads through the same column elements: none built again per query (37
    labels over new types, and the statement's cache key over them, were ~0.7 ms a list)."""
    import sqlalchemy as sa

    built: list[object] = []
    coerce = sa.type_coerce

    def counted(*args, **kwargs):
        built.append(args[0])
        return coerce(*args, **kwargs)

    await seed(db)
    async with db.transaction() as repos:
        await repos.clusters.add(make_cluster("c-1", request_id=None, owner_id="U1"))
    async with db.transaction() as repos:
        first = await repos.clusters.list_all()
    monkeypatch.setattr(sa, "type_coerce", counted)
    async with db.transaction() as repos:
        assert await repos.clusters.list_all() == first
        assert await repos.clusters.list_for_owner("U1", live=True) == [
            c for c in first if c.status.is_live]
    assert built == []
