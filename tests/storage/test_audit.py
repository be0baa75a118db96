"""The audit trail: append, read newest first, page, count — and nothing else.

Every test runs on a SQLite file, on an in-memory database and on PostgreSQL (the `db` fixture
of conftest.py).
"""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest
import sqlalchemy as sa

from storage.audit import AuditRepo
from tests.storage.conftest import T0, make_audit

TOKYO = timezone(timedelta(hours=9))


async def _append(db, *entries):
    async with db.transaction() as repos:
        for entry in entries:
            await repos.audit.add(entry)


async def _ids(db) -> list[int]:
    """The ids the entries got, newest first: AuditEntry itself carries none."""
    async with db.transaction() as repos:
        found = await repos.session.execute(sa.text("SELECT id FROM audit ORDER BY id DESC"))
        return list(found.scalars())


async def test_entries_round_trip_with_every_field_and_with_none(db):
    full = make_audit(idempotency_key="idem-1", at=T0.astimezone(TOKYO))
    by_the_bot = make_audit("c-1", actor_id=None, team_id=None, action="terminate",
                            amount_cents=None, outcome="failed", detail="")
    await _append(db, full, by_the_bot)
    async with db.transaction() as repos:
        newest, oldest = await repos.audit.list()
    assert (newest, oldest) == (by_the_bot, full)
    assert oldest.at == T0
    assert oldest.at.tzinfo is UTC


async def test_list_is_newest_appended_first_and_filters_by_subject(db):
    entries = [
        make_audit("r-1", action="request", at=T0),
        make_audit("r-2", action="request", at=T0 + timedelta(minutes=1)),
        # `at` is what the caller says; the order is the order of appending.
        make_audit("r-1", action="approve", at=T0 - timedelta(minutes=1)),
        make_audit("r-1", action="launch", outcome="refused", at=T0 + timedelta(minutes=2)),
    ]
    await _append(db, *entries)
    async with db.transaction() as repos:
        assert await repos.audit.list() == entries[::-1]
        assert await repos.audit.list(subject_id="r-1") == [entries[3], entries[2], entries[0]]
        assert await repos.audit.list(subject_id="r-2") == [entries[1]]
        assert await repos.audit.list(subject_id="r-none") == []
        assert await repos.audit.list(limit=2) == [entries[3], entries[2]]
        assert await repos.audit.count() == 4


async def test_paging_with_before_id_visits_every_entry_once(db):
    entries = [make_audit(f"r-{n % 3}", amount_cents=n) for n in range(7)]
    await _append(db, *entries)
    ids = await _ids(db)  # newest first
    pages, before = [], None
    async with db.transaction() as repos:
        while page := await repos.audit.list(limit=3, before_id=before):
            pages.append(page)
            before = ids[sum(len(p) for p in pages) - 1]  # the id of the page's last entry
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [e for p in pages for e in p] == entries[::-1]
    async with db.transaction() as repos:
        # Paging and the subject filter together: r-0 holds entries 0, 3 and 6.
        assert await repos.audit.list(subject_id="r-0", before_id=ids[0]) == [
            entries[3], entries[0]]
        assert await repos.audit.list(before_id=ids[-1]) == []


async def test_count_and_list_of_an_empty_trail(db):
    async with db.transaction() as repos:
        assert await repos.audit.count() == 0
        assert await repos.audit.list() == []
        assert await repos.audit.list(subject_id="r-1", before_id=10) == []


async def test_limit_must_be_positive(db):
    await _append(db, make_audit())
    async with db.transaction() as repos:
        for limit in (0, -1):
            with pytest.raises(ValueError, match="limit"):
                await repos.audit.list(limit=limit)


async def test_an_entry_rolls_back_with_its_transaction(db):
    with pytest.raises(RuntimeError):
        async with db.transaction() as repos:
            await repos.audit.add(make_audit())
            raise RuntimeError("the change it describes failed")
    await _append(db, make_audit("r-2"))
    async with db.transaction() as repos:
        assert await repos.audit.list() == [make_audit("r-2")]
        assert await repos.audit.count() == 1


async def test_entries_about_the_same_thing_may_repeat_exactly(db):
    # No unique constraints: a retried launch is audited once per attempt, key and all.
    attempt = make_audit("r-1", action="launch", outcome="failed", idempotency_key="idem-1")
    await _append(db, attempt, attempt)
    async with db.transaction() as repos:
        assert await repos.audit.list() == [attempt, attempt]


def test_the_repository_can_only_append_and_read():
    public = {name for name in vars(AuditRepo) if not name.startswith("_")}
    assert public == {"add", "add_many", "list", "in_period", "count"}


async def test_many_entries_are_appended_in_their_order(db):
    entries = [make_audit(f"c-{i}", action="adopt") for i in range(3)]
    async with db.transaction() as repos:
        await repos.audit.add_many(entries)
        await repos.audit.add_many([])
        newest_first = await repos.audit.list()
    assert newest_first == entries[::-1]


async def test_a_period_reads_the_entries_stated_in_it_oldest_first(db):
    first = make_audit("r-1", action="quote")
    inside = first.model_copy(update={"at": first.at + timedelta(minutes=5), "action": "request"})
    later = first.model_copy(update={"at": first.at + timedelta(days=40), "action": "approve"})
    await _append(db, later, first, inside)
    async with db.transaction() as repos:
        found = await repos.audit.in_period(first.at, first.at + timedelta(days=1))
    assert found == [first, inside]


async def test_a_period_is_oldest_first_even_when_an_earlier_instant_was_appended_later(db):
    """Issue 27.5: the export is oldest-first, as the README says, not in appended order."""
    first = make_audit("r-1", action="quote")
    late = first.model_copy(update={"at": first.at + timedelta(minutes=9), "action": "approve"})
    early = first.model_copy(update={"at": first.at + timedelta(minutes=1), "action": "request"})
    same = early.model_copy(update={"action": "terminate"})
    await _append(db, first, late, early, same)
    async with db.transaction() as repos:
        found = await repos.audit.in_period(first.at, first.at + timedelta(days=1))
    assert [e.action for e in found] == ["quote", "request", "terminate", "approve"]
