"""The launch saga's storage: every quote a request held, launch intents, the linking upsert,
the lease compare-and-set, and migration 0004 (SQLite file and memory, PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.launch import IntentState, LaunchBody, LaunchIntent
from bot.domain.models import ClusterState, RequestStatus
from storage.db import Database
from tests.storage.conftest import T0, make_cluster, make_observation, make_quote, make_request
from tests.storage.test_migrations import _alembic, _insert_as_at_that_revision


def _intent(key: str = "k-1", request_id: str = "r-1", quote_id: str = "q-1",
            **changes) -> LaunchIntent:
    body = LaunchBody.of(make_request(request_id, quote_id=quote_id), make_quote(quote_id))
    return LaunchIntent(**{"idempotency_key": key, "request_id": request_id,
                           "quote_id": quote_id, "body": body, "created_at": T0,
                           "updated_at": T0, **changes})


async def test_every_quote_a_request_held_is_kept(db):
    async with db.transaction() as repos:
        for q in ("q-1", "q-2", "q-3", "q-9"):
            await repos.quotes.add(make_quote(q))
        await repos.requests.add(make_request())
        await repos.requests.add(make_request("r-9"))
        later = T0 + timedelta(minutes=20)
        await repos.requests.transition("r-1", from_=[RequestStatus.PENDING],
                                        to=RequestStatus.PENDING, now=later, new_quote_id="q-2")
        await repos.requests.transition("r-1", from_=[RequestStatus.PENDING],
                                        to=RequestStatus.PENDING, now=later + timedelta(1),
                                        new_quote_id="q-3")
        # A guarded transition that doesn't happen remembers nothing.
        assert await repos.requests.transition(
            "r-1", from_=[RequestStatus.APPROVED], to=RequestStatus.PENDING, now=later,
            new_quote_id="q-9") is None
    async with db.transaction() as repos:
        assert await repos.request_quotes.quotes_of("r-1") == ["q-3", "q-2", "q-1"]
        assert await repos.request_quotes.requests_of(["q-1", "q-3", "q-9", "q-x"]) == {
            "q-1": "r-1", "q-3": "r-1", "q-9": "r-9"}
        # A quote stays with the request that held it first.
        await repos.request_quotes.add(request_id="r-9", quote_id="q-1", now=T0)
        assert await repos.request_quotes.requests_of(["q-1"]) == {"q-1": "r-1"}


async def test_the_lease_is_a_compare_and_set(db):
    async with db.transaction() as repos:
        await repos.quotes.add(make_quote())
        await repos.requests.add(make_request(status=RequestStatus.LAUNCHING,
                                              idempotency_key="k-1"))
    stale_before = T0 + timedelta(seconds=30)
    winners = []
    for worker in range(2):  # two replicas saw the same stale lease
        async with db.transaction() as repos:
            winners.append(await repos.requests.transition(
                "r-1", from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHING,
                now=T0 + timedelta(seconds=31 + worker), updated_before=stale_before))
    assert winners[0] is not None and winners[1] is None
    async with db.transaction() as repos:  # a fresh key only replaces the key it replaces
        assert await repos.requests.transition(
            "r-1", from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHING, now=T0,
            idempotency_key_was="k-other", idempotency_key="k-2") is None
        moved = await repos.requests.transition(
            "r-1", from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHING, now=T0,
            idempotency_key_was="k-1", idempotency_key="k-2")
        assert moved is not None and moved.idempotency_key == "k-2"


async def test_an_intent_keeps_the_body_first_stored_under_its_key(db):
    async with db.transaction() as repos:
        await repos.quotes.add(make_quote())
        await repos.quotes.add(make_quote("q-2"))
        await repos.requests.add(make_request())
        first = await repos.launches.add(_intent())
        again = await repos.launches.add(_intent(quote_id="q-2"))
        assert again == first
        counted = await repos.launches.count_server_error("k-1", now=T0)
        counted = await repos.launches.count_server_error("k-1", now=T0)
        assert counted.server_errors == 2
        await repos.launches.add(_intent("k-2", quote_id="q-2", created_at=T0 + timedelta(1)))
        await repos.launches.settle_request("r-1", cluster_id="c-1", quote_id="q-2", now=T0)
        states = [(i.idempotency_key, i.state, i.cluster_id)
                  for i in await repos.launches.for_request("r-1")]
    assert states == [("k-1", IntentState.SUPERSEDED, None),
                      ("k-2", IntentState.ACCEPTED, "c-1")]


async def _seed_request(db: Database) -> None:
    async with db.transaction() as repos:
        await repos.quotes.add(make_quote())
        await repos.requests.add(make_request(status=RequestStatus.LAUNCHING))


async def test_a_sweeps_unlinked_row_is_linked_in_place(db):
    await _seed_request(db)
    adopted = make_cluster(request_id=None, owner_id=None, channel_id="C-APPROVALS",
                           adopted=True, status=ClusterState.RUNNING,
                           observed=make_observation(), accrued_cents=99)
    launched = make_cluster(lifetime_hours=8)
    async with db.transaction() as repos:
        await repos.clusters.add(adopted)
        assert await repos.clusters.untracked(["c-1", "c-new"]) == {"c-1": True, "c-new": False}
        linked = await repos.clusters.link(launched)
        assert await repos.clusters.untracked(["c-1"]) == {}
    # The link fields are the request's; what the sweep observed is kept.
    assert linked == adopted.model_copy(update={
        "request_id": "r-1", "owner_id": "U1", "channel_id": "C1", "adopted": False,
        "lifetime_hours": 8})


async def test_a_linked_row_is_never_unlinked(db):
    await _seed_request(db)
    launched = make_cluster()
    async with db.transaction() as repos:
        assert await repos.clusters.link(launched) == launched
        assert await repos.clusters.link(launched.model_copy(update={"owner_id": "U2"})) \
            == launched
        assert await repos.clusters.add(make_cluster(request_id=None, owner_id=None,
                                                     adopted=True)) == launched


async def test_0004_keeps_the_quote_of_every_stored_request(db_url):
    quote, request = make_quote(), make_request(status=RequestStatus.LAUNCHING,
                                                idempotency_key="k-1")
    db = Database(db_url)
    try:
        async with db.engine.begin() as conn:
            await conn.run_sync(_alembic, "upgrade", "0003")
            await conn.run_sync(_insert_as_at_that_revision, ("quotes", quote),
                                ("requests", request))
        await db.migrate()
        async with db.transaction() as repos:
            assert await repos.request_quotes.quotes_of("r-1") == ["q-1"]
            assert await repos.launches.for_request("r-1") == []
        async with db.engine.begin() as conn:
            await conn.run_sync(_alembic, "downgrade", "0003")
        await db.migrate()  # today's tables read it (later revisions add columns)
        async with db.transaction() as repos:
            assert await repos.requests.get("r-1") == request
    finally:
        await db.dispose()
