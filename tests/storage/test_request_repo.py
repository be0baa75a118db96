"""RequestRepo: round trips, the compare-and-set transition, updates and listings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError

from bot.domain.errors import UnknownResource
from bot.domain.models import RequestStatus, Workload
from tests.storage.conftest import T0, make_quote, make_request, seed


async def test_request_round_trip(db):
    full = make_request(
        idempotency_key="idem-1", decided_by="U2", decided_at=T0, cluster_id="c-9",
        last_error="capacity", previous_hourly_cents=6_000,
    )
    minimal = make_request("r-2", workload=Workload(), team_id=None)
    superseding = make_request("r-3", supersedes_id="r-1")
    await seed(db, full, minimal, superseding)
    async with db.transaction() as repos:
        assert await repos.requests.get("r-1") == full
        assert await repos.requests.get("r-2") == minimal
        assert await repos.requests.get("r-3") == superseding
        assert await repos.requests.get("r-missing") is None


async def test_for_quote_finds_the_request_on_that_quote(db):
    await seed(db)
    async with db.transaction() as repos:
        await repos.quotes.add(make_quote("q-2"))
        assert await repos.requests.for_quote("q-2") is None
        assert await repos.requests.for_quote("q-1") == make_request()
        # Re-priced: the request moves to the fresh quote and the old one is free again.
        await repos.requests.update("r-1", now=T0, quote_id="q-2")
        assert await repos.requests.for_quote("q-1") is None
        await repos.requests.add(make_request("r-2", quote_id="q-1"))
        assert (await repos.requests.for_quote("q-1")).id == "r-2"
        assert (await repos.requests.for_quote("q-2")).id == "r-1"


async def test_a_quote_takes_one_request_only(db):
    await seed(db)
    with pytest.raises(IntegrityError, match="(?i)unique"):  # not the foreign key
        async with db.transaction() as repos:
            await repos.quotes.add(make_quote("q-2"))
            await repos.requests.add(make_request("r-2"))  # its own quote q-2: fine on its own
            await repos.requests.add(make_request("r-3", quote_id="q-1"))  # q-1 is r-1's
    async with db.transaction() as repos:  # the whole transaction rolled back
        assert await repos.requests.get("r-3") is None
        assert await repos.requests.get("r-2") is None
        assert await repos.quotes.get("q-2") is None
        assert await repos.requests.for_quote("q-1") == make_request()
        assert [r.id for r in await repos.requests.list_by_status(list(RequestStatus))] == ["r-1"]


async def test_request_needs_a_stored_quote(db):
    with pytest.raises(IntegrityError):
        async with db.transaction() as repos:
            await repos.requests.add(make_request(quote_id="q-nowhere"))


async def test_idempotency_key_is_unique_when_set(db):
    await seed(db, make_request("r-1"), make_request("r-2"), make_request("r-3"))  # 3 × None: ok
    async with db.transaction() as repos:
        await repos.requests.update("r-1", now=T0, idempotency_key="idem-1")
    with pytest.raises(IntegrityError):
        async with db.transaction() as repos:
            await repos.requests.update("r-2", now=T0, idempotency_key="idem-1")


async def test_transition_sets_status_updated_at_and_fields(db):
    await seed(db)
    later = T0 + timedelta(minutes=3)
    async with db.transaction() as repos:
        moved = await repos.requests.transition(
            "r-1", from_={RequestStatus.PENDING}, to=RequestStatus.APPROVED, now=later,
            quote_id="q-1", decided_by="U2", decided_at=later,
        )
    assert moved == make_request(
        status=RequestStatus.APPROVED, updated_at=later, decided_by="U2", decided_at=later
    )
    async with db.transaction() as repos:
        assert await repos.requests.get("r-1") == moved


async def test_transition_from_another_status_does_nothing(db):
    await seed(db)
    async with db.transaction() as repos:
        assert await repos.requests.transition(
            "r-1", from_=[RequestStatus.APPROVED, RequestStatus.LAUNCH_FAILED],
            to=RequestStatus.LAUNCHING, now=T0 + timedelta(minutes=1), idempotency_key="k",
        ) is None
        assert await repos.requests.transition(
            "r-1", from_=[], to=RequestStatus.LAUNCHING, now=T0
        ) is None
        assert await repos.requests.transition(
            "r-nowhere", from_=[RequestStatus.PENDING], to=RequestStatus.APPROVED, now=T0
        ) is None
        assert await repos.requests.get("r-1") == make_request()


async def test_transition_guards_on_the_quote(db):
    await seed(db)
    async with db.transaction() as repos:
        stale = await repos.requests.transition(
            "r-1", from_={RequestStatus.PENDING}, to=RequestStatus.APPROVED, now=T0,
            quote_id="q-old",
        )
        assert stale is None
        assert (await repos.requests.get("r-1")).status is RequestStatus.PENDING


async def test_transition_can_move_to_a_new_quote(db):
    await seed(db, make_request(status=RequestStatus.LAUNCH_FAILED))
    later = T0 + timedelta(hours=1)
    async with db.transaction() as repos:
        await repos.quotes.add(make_quote("q-2", hourly_cents=7_000))
        moved = await repos.requests.transition(
            "r-1", from_={RequestStatus.LAUNCH_FAILED}, to=RequestStatus.PENDING, now=later,
            quote_id="q-1", new_quote_id="q-2", hourly_cents=7_000, previous_hourly_cents=6_412,
            last_error=None,
        )
    assert moved is not None
    assert moved.quote_id == "q-2"
    assert (moved.hourly_cents, moved.previous_hourly_cents) == (7_000, 6_412)


async def test_transition_refuses_unknown_or_managed_fields_and_bad_values(db):
    await seed(db)
    pending = {RequestStatus.PENDING}
    async with db.transaction() as repos:
        with pytest.raises(TypeError, match="colour"):
            await repos.requests.transition(
                "r-1", from_=pending, to=RequestStatus.APPROVED, now=T0, colour="red"
            )
        for managed in ("status", "updated_at", "id"):
            with pytest.raises(TypeError, match=managed):
                await repos.requests.transition(
                    "r-1", from_=pending, to=RequestStatus.APPROVED, now=T0, **{managed: None}
                )
        with pytest.raises(ValidationError):
            await repos.requests.transition(
                "r-1", from_=pending, to=RequestStatus.APPROVED, now=T0, hourly_cents="lots"
            )
        assert await repos.requests.get("r-1") == make_request()


async def test_update_is_unconditional_and_validates(db):
    await seed(db, make_request(status=RequestStatus.REJECTED))
    later = T0 + timedelta(days=1)
    new_workload = Workload(name="again", env={"A": "1"})
    async with db.transaction() as repos:
        updated = await repos.requests.update(
            "r-1", now=later, status=RequestStatus.CANCELLED, workload=new_workload,
            last_error="cancelled by U1",
        )
        assert updated == make_request(
            status=RequestStatus.CANCELLED, workload=new_workload, last_error="cancelled by U1",
            updated_at=later,
        )
        assert await repos.requests.get("r-1") == updated
        with pytest.raises(UnknownResource):
            await repos.requests.update("r-nowhere", now=later, last_error="x")
        with pytest.raises(TypeError):
            await repos.requests.update("r-1", now=later, updated_at=later)


async def test_list_by_status(db):
    await seed(
        db,
        make_request("r-a", status=RequestStatus.APPROVED, updated_at=T0 + timedelta(minutes=5)),
        make_request("r-b", status=RequestStatus.PENDING, updated_at=T0 + timedelta(minutes=1)),
        make_request("r-c", status=RequestStatus.PENDING, updated_at=T0 + timedelta(minutes=9)),
        make_request("r-d", status=RequestStatus.REJECTED, updated_at=T0),
    )
    async with db.transaction() as repos:
        found = await repos.requests.list_by_status([RequestStatus.PENDING, RequestStatus.APPROVED])
        assert [r.id for r in found] == ["r-b", "r-a", "r-c"]  # oldest update first
        assert found[0] == make_request(
            "r-b", status=RequestStatus.PENDING, updated_at=T0 + timedelta(minutes=1)
        )
        before = await repos.requests.list_by_status(
            {RequestStatus.PENDING, RequestStatus.APPROVED},
            updated_before=T0 + timedelta(minutes=5),  # strictly before: r-a is not included
        )
        assert [r.id for r in before] == ["r-b"]
        assert await repos.requests.list_by_status([RequestStatus.LAUNCHED]) == []
        assert await repos.requests.list_by_status([]) == []
