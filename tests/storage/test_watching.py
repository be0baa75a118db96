"""Storage for the watcher: cluster observation fields, the notices outbox, volumes.

Every test that takes `db` runs on a SQLite file, on an in-memory database and on PostgreSQL
(conftest.py).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError

from bot.domain.errors import UnknownResource
from bot.domain.models import ClusterState, NodeState
from bot.domain.watch import NoticeFacts, NoticeKind
from storage.db import Database
from tests.storage.conftest import (
    T0,
    make_cluster,
    make_notice,
    make_observation,
    make_volume,
    seed,
)

TOKYO = timezone(timedelta(hours=9))

WATCHING = {
    "observed": make_observation(),
    "last_reminded_hours": 3,
    "accrued_at_degrade": 19_236,
    "manual_recoveries": ("2:1", "2:2"),
    "terminate_requested_by": "U7",
    "notify_channels": ("C1", "C9"),
    "auto_recovery": True,
    "adopted": True,
}


async def _raw(db: Database, sql: str, **params):
    async with db.transaction() as repos:
        return (await repos.session.execute(sa.text(sql), params)).all()


async def _add_clusters(db: Database, *clusters):
    async with db.transaction() as repos:
        for cluster in clusters:
            await repos.clusters.add(cluster)


# -- cluster fields ----------------------------------------------------------------------------


async def test_every_watching_field_round_trips(db):
    await seed(db)
    cluster = make_cluster(status=ClusterState.DEGRADED, **WATCHING)
    async with db.transaction() as repos:
        assert await repos.clusters.add(cluster) == cluster
    async with db.transaction() as repos:
        stored = await repos.clusters.get("c-1")
    assert stored == cluster
    assert stored.observed.nodes[0].last_recovered_at.tzinfo is UTC
    assert stored.observed.episode_started_at.tzinfo is UTC


async def test_defaults_round_trip_and_never_observed_is_sql_null(db):
    await seed(db)
    cluster = make_cluster()
    await _add_clusters(db, cluster)
    async with db.transaction() as repos:
        assert await repos.clusters.get("c-1") == cluster
    assert await _raw(db, "SELECT count(*) FROM clusters WHERE observed IS NULL") == [(1,)]


async def test_unclaimed_adopted_cluster_has_no_owner(db):
    adopted = make_cluster("c-adopted", request_id=None, owner_id=None, adopted=True,
                           status=ClusterState.RUNNING, ready_at=T0)
    await _add_clusters(db, adopted)
    async with db.transaction() as repos:
        assert await repos.clusters.get("c-adopted") == adopted
        claimed = await repos.clusters.update("c-adopted", now=T0, owner_id="U3")
    assert claimed.owner_id == "U3"


async def test_datetimes_inside_the_observation_are_stored_as_utc_iso_strings(db):
    recovered = datetime(2026, 11, 29, 19, 42, 5, 123_456, tzinfo=TOKYO)  # 10:42:05 UTC
    observed = make_observation(
        episode_started_at=T0.astimezone(TOKYO),
        nodes=(NodeState(rank=0, status="running", last_recovered_at=recovered),),
    )
    await _add_clusters(db, make_cluster(request_id=None, observed=observed))
    # As text: PostgreSQL's driver would hand back the JSON column already parsed.
    [(raw,)] = await _raw(db, "SELECT CAST(observed AS TEXT) FROM clusters")
    stored_json = json.loads(raw)
    assert stored_json["episode_started_at"] == "2026-11-29T10:00:00+00:00"
    assert stored_json["nodes"][0]["last_recovered_at"] == "2026-11-29T10:42:05.123456+00:00"
    async with db.transaction() as repos:
        back = (await repos.clusters.get("c-1")).observed
    assert back == observed  # the same instants …
    assert back.nodes[0].last_recovered_at.tzinfo is UTC  # … in UTC
    assert back.nodes[0].last_recovered_at.hour == 10


async def test_a_naive_datetime_inside_the_observation_is_refused(db):
    naive = make_observation(episode_started_at=datetime(2026, 11, 29, 10, 0))
    with pytest.raises(ValueError, match="naive"):
        await _add_clusters(db, make_cluster(request_id=None, observed=naive))
    await _add_clusters(db, make_cluster(request_id=None))
    async with db.transaction() as repos:
        with pytest.raises(ValueError, match="naive"):
            await repos.clusters.update("c-1", now=T0, observed=naive)
        assert (await repos.clusters.get("c-1")).observed is None


async def test_update_sets_every_watching_field(db):
    await seed(db)
    await _add_clusters(db, make_cluster())
    later = T0 + timedelta(hours=4)
    async with db.transaction() as repos:
        updated = await repos.clusters.update("c-1", now=later, owner_id=None, **WATCHING)
    expected = make_cluster(owner_id=None, updated_at=later, **WATCHING)
    assert updated == expected
    async with db.transaction() as repos:
        assert await repos.clusters.get("c-1") == expected
        cleared = await repos.clusters.update(
            "c-1", now=later, observed=None, accrued_at_degrade=None, manual_recoveries=(),
            notify_channels=[],
        )
    assert cleared.observed is None
    assert cleared.accrued_at_degrade is None
    assert cleared.manual_recoveries == cleared.notify_channels == ()


async def test_update_validates_the_new_fields_like_the_others(db):
    await _add_clusters(db, make_cluster(request_id=None))
    async with db.transaction() as repos:
        # Plain data is validated into the model, as pydantic would for the record itself.
        as_data = make_observation().model_dump(mode="json")
        updated = await repos.clusters.update("c-1", now=T0, observed=as_data)
        assert updated.observed == make_observation()
        for bad in ({"observed": {"status": "exploded"}}, {"last_reminded_hours": "many"},
                    {"manual_recoveries": "2:1"}, {"adopted": "perhaps"}):
            with pytest.raises(ValidationError):
                await repos.clusters.update("c-1", now=T0, **bad)
        with pytest.raises(TypeError):
            await repos.clusters.update("c-1", now=T0, observation=None)
        assert await repos.clusters.get("c-1") == updated


async def test_ids_says_which_clusters_are_known(db):
    await _add_clusters(db, make_cluster("c-1", request_id=None),
                        make_cluster("c-2", request_id=None))
    many = [f"c-{n}" for n in range(1_200)]  # more than one IN (…) chunk
    async with db.transaction() as repos:
        assert await repos.clusters.ids(["c-2", "c-x", "c-1", "c-2"]) == {"c-1", "c-2"}
        assert await repos.clusters.ids(set()) == set()
        assert await repos.clusters.ids(many) == {"c-1", "c-2"}
        assert await repos.clusters.ids(("c-x",)) == set()


async def test_list_all_is_every_cluster_oldest_first(db):
    states = [ClusterState.TERMINATED, ClusterState.RUNNING, ClusterState.FAILED]
    async with db.transaction() as repos:
        assert await repos.clusters.list_all() == []
        for n, state in reversed(list(enumerate(states))):
            await repos.clusters.add(make_cluster(f"c-{n}", request_id=None, status=state,
                                                  created_at=T0 + timedelta(minutes=n)))
    async with db.transaction() as repos:
        assert [c.id for c in await repos.clusters.list_all()] == ["c-0", "c-1", "c-2"]


# -- notices -----------------------------------------------------------------------------------


async def test_add_new_returns_only_the_new_keys_in_input_order(db):
    await _add_clusters(db, make_cluster("c-1", request_id=None),
                        make_cluster("c-2", request_id=None))
    degraded, attempt = make_notice("degraded:2"), make_notice(
        "attempt:2:1", kind=NoticeKind.RECOVERY_STARTED,
        facts=NoticeFacts(episode=2, attempt=1, attempts_max=3, manual=True))
    async with db.transaction() as repos:
        assert await repos.notices.add_new([degraded]) == [degraded]
    recovered = make_notice("recovered:2", kind=NoticeKind.RECOVERED, created_at=T0 + timedelta(
        minutes=5), facts=NoticeFacts(episode=2, degraded_seconds=300, degraded_cost_cents=534))
    elsewhere = make_notice("degraded:2", cluster_id="c-2")  # same key, another cluster
    async with db.transaction() as repos:
        added = await repos.notices.add_new([attempt, degraded, recovered, attempt, elsewhere])
    assert added == [attempt, recovered, elsewhere]
    async with db.transaction() as repos:  # idempotent: seen again, announced never
        assert await repos.notices.add_new([degraded, attempt, recovered, elsewhere]) == []
        assert await repos.notices.add_new([]) == []
        assert await repos.notices.for_cluster("c-1") == [degraded, attempt, recovered]
        assert await repos.notices.for_cluster("c-2") == [elsewhere]
        assert await repos.notices.for_cluster("c-x") == []


async def test_a_key_seen_again_keeps_what_was_stored_first(db):
    await _add_clusters(db, make_cluster(request_id=None))
    first = make_notice()
    async with db.transaction() as repos:
        await repos.notices.add_new([first])
        again = make_notice(created_at=T0 + timedelta(hours=1), facts=NoticeFacts(episode=9))
        assert await repos.notices.add_new([again]) == []
        assert await repos.notices.for_cluster("c-1") == [first]


async def test_a_notice_needs_a_stored_cluster(db):
    with pytest.raises(IntegrityError):
        async with db.transaction() as repos:
            await repos.notices.add_new([make_notice(cluster_id="c-nowhere")])


async def _announce(db: Database, notice):
    async with db.transaction() as repos:
        return await repos.notices.add_new([notice])


async def test_ten_concurrent_add_new_store_one_row_without_errors(db):
    await _add_clusters(db, make_cluster(request_id=None))
    notice = make_notice()
    results = await asyncio.gather(*(_announce(db, notice) for _ in range(10)))
    assert sorted(results, key=len) == [[]] * 9 + [[notice]]
    assert await _raw(db, "SELECT count(*) FROM notices") == [(1,)]


async def test_concurrent_add_new_across_engines_on_one_database(db_url):
    # Several Database objects on one database behave like several replicas/processes.
    dbs = [Database(db_url) for _ in range(3)]
    try:
        await dbs[0].migrate()
        await _add_clusters(dbs[0], make_cluster(request_id=None))
        notice = make_notice()
        results = await asyncio.gather(*(_announce(dbs[n % 3], notice) for n in range(10)))
    finally:
        for each in dbs:
            await each.dispose()
    assert sorted(results, key=len) == [[]] * 9 + [[notice]]


async def test_pending_and_mark_delivered(db):
    await _add_clusters(db, make_cluster("c-1", request_id=None),
                        make_cluster("c-2", request_id=None))
    # Stored order decides, not created_at: the outbox is delivered as it was written.
    notices = [make_notice(f"k{n}", cluster_id=f"c-{1 + n % 2}",
                           created_at=T0 - timedelta(minutes=n)) for n in range(4)]
    async with db.transaction() as repos:
        await repos.notices.add_new(notices)
        assert await repos.notices.pending() == notices
        assert await repos.notices.pending(limit=2) == notices[:2]
    delivered_at = T0 + timedelta(seconds=3)
    async with db.transaction() as repos:
        await repos.notices.mark_delivered("c-1", "k0", now=delivered_at)
        await repos.notices.mark_delivered("c-2", "k3", now=delivered_at)
    async with db.transaction() as repos:
        assert await repos.notices.pending() == notices[1:3]
        # Delivering twice is harmless and keeps the first delivery time.
        await repos.notices.mark_delivered("c-1", "k0", now=delivered_at + timedelta(hours=1))
        assert (await repos.notices.for_cluster("c-1"))[0] == notices[0].model_copy(
            update={"delivered_at": delivered_at})
        with pytest.raises(UnknownResource):
            await repos.notices.mark_delivered("c-1", "k1", now=delivered_at)  # k1 is c-2's
        await repos.notices.mark_delivered("c-2", "k1", now=delivered_at)
        await repos.notices.mark_delivered("c-1", "k2", now=delivered_at)
        assert await repos.notices.pending() == []


async def test_notice_kinds_and_facts_round_trip(db):
    await _add_clusters(db, make_cluster(request_id=None))
    notices = [
        make_notice(f"k-{kind.value}", kind=kind, created_at=T0.astimezone(TOKYO),
                    facts=NoticeFacts(episode=1, down_ranks=(0, 2), rank=2, attempt=1,
                                      attempts_max=3, manual=False, degraded_seconds=61,
                                      degraded_cost_cents=107, accrued_cents=9,
                                      termination_reason="payment_grace_expired", hour=3,
                                      running_seconds=7_200))
        for kind in NoticeKind
    ]
    async with db.transaction() as repos:
        assert await repos.notices.add_new(notices) == notices
    async with db.transaction() as repos:
        back = await repos.notices.for_cluster("c-1")
    assert back == notices
    assert all(n.created_at.tzinfo is UTC for n in back)


# -- volumes -----------------------------------------------------------------------------------


async def test_volume_upsert_inserts_then_replaces_every_field(db):
    volume = make_volume()
    async with db.transaction() as repos:
        assert await repos.volumes.get("vol-1") is None
        assert await repos.volumes.upsert(volume) == volume
    orphaned = make_volume(
        owner_id=None, cluster_id="c-never-stored", name=None, size_gb=2_000,
        location="eu-west-1", hourly_cents=56, status="available",
        orphaned_since=T0.astimezone(TOKYO), next_reminder_at=T0 + timedelta(days=1),
        updated_at=T0 + timedelta(hours=2),
    )
    async with db.transaction() as repos:
        assert await repos.volumes.upsert(orphaned) == orphaned
    async with db.transaction() as repos:
        assert await repos.volumes.get("vol-1") == orphaned
        assert await repos.volumes.upsert(volume) == volume  # and back: NULLs replace values
        assert await repos.volumes.list_all() == [volume]


async def test_volume_update(db):
    async with db.transaction() as repos:
        await repos.volumes.upsert(make_volume())
    later = T0 + timedelta(hours=1)
    async with db.transaction() as repos:
        updated = await repos.volumes.update(
            "vol-1", now=later, status="available", orphaned_since=later,
            next_reminder_at=later + timedelta(days=1), cluster_id=None,
        )
    expected = make_volume(status="available", orphaned_since=later, cluster_id=None,
                           next_reminder_at=later + timedelta(days=1), updated_at=later)
    assert updated == expected
    async with db.transaction() as repos:
        assert await repos.volumes.get("vol-1") == expected
        with pytest.raises(UnknownResource):
            await repos.volumes.update("vol-x", now=later, status="deleted")
        for managed in ({"id": "vol-2"}, {"updated_at": later}, {"colour": "red"}):
            with pytest.raises(TypeError):
                await repos.volumes.update("vol-1", now=later, **managed)
        with pytest.raises(ValidationError):
            await repos.volumes.update("vol-1", now=later, size_gb="huge")


async def test_due_volumes(db):
    now = T0 + timedelta(days=2)
    volumes = [
        make_volume("vol-late", status="available", next_reminder_at=now - timedelta(hours=5)),
        make_volume("vol-now", status="available", next_reminder_at=now),
        make_volume("vol-later", status="available", next_reminder_at=now + timedelta(seconds=1)),
        make_volume("vol-unset", status="available"),
        make_volume("vol-attached", next_reminder_at=now - timedelta(days=1)),
        make_volume("vol-deleted", status="deleted", next_reminder_at=now - timedelta(days=1)),
        make_volume("vol-a-late", status="available", next_reminder_at=now - timedelta(hours=5)),
    ]
    async with db.transaction() as repos:
        for volume in volumes:
            await repos.volumes.upsert(volume)
    async with db.transaction() as repos:
        due = await repos.volumes.due(now)
        assert [v.id for v in due] == ["vol-a-late", "vol-late", "vol-now"]
        assert due[1] == volumes[0]
        # Another offset for the same instant: the comparison is on instants, not text.
        assert [v.id for v in await repos.volumes.due(now.astimezone(TOKYO))] == [
            "vol-a-late", "vol-late", "vol-now"]
        assert await repos.volumes.due(T0) == []
        assert [v.id for v in await repos.volumes.list_all()] == sorted(v.id for v in volumes)
