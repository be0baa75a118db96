"""The terminate intents' repository: every move is a compare-and-set, so replicas sharing the
database never take the same attempt twice nor announce one outcome twice (SQLite, PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.termination import TerminationIntent, TerminationState, retry_delay
from tests.storage.conftest import T0, make_cluster, seed

LEASE = timedelta(minutes=2)


def _intent(**changes) -> TerminationIntent:
    return TerminationIntent(**{"cluster_id": "c-1", "requested_by": "U1", "requested_at": T0,
                                "next_attempt_at": T0, "updated_at": T0, **changes})


async def _with_cluster(db) -> None:
    await seed(db)
    async with db.transaction() as repos:
        await repos.clusters.add(make_cluster())


async def test_an_attempt_is_claimed_once_and_a_second_terminate_keeps_the_first(db):
    await _with_cluster(db)
    async with db.transaction() as repos:
        await repos.terminations.add(_intent())
        again = await repos.terminations.add(_intent(requested_by="U2"))
    assert again.requested_by == "U1"  # the first asker is the one told
    async with db.transaction() as repos:
        first = await repos.terminations.claim("c-1", now=T0, lease=LEASE)
        second = await repos.terminations.claim("c-1", now=T0, lease=LEASE)
    assert first is not None and first.attempts == 1 and second is None
    assert first.next_attempt_at == T0 + LEASE
    async with db.transaction() as repos:
        await repos.terminations.failed("c-1", now=T0, error="internal_error",
                                        retry_at=T0 + retry_delay(1))
        assert await repos.terminations.due(now=T0) == []
        [due] = await repos.terminations.due(now=T0 + timedelta(seconds=5))
    assert (due.attempts, due.last_error) == (1, "internal_error")


async def test_moves_and_the_warning_happen_once(db):
    await _with_cluster(db)
    async with db.transaction() as repos:
        await repos.terminations.add(_intent())
        assert await repos.terminations.warn_once("c-1", now=T0)
        assert not await repos.terminations.warn_once("c-1", now=T0)
        pending, accepted, done = (TerminationState.PENDING, TerminationState.ACCEPTED,
                                   TerminationState.DONE)
        assert await repos.terminations.move("c-1", from_=pending, to=accepted, now=T0)
        assert not await repos.terminations.move("c-1", from_=pending, to=accepted, now=T0)
        assert await repos.terminations.claim("c-1", now=T0, lease=LEASE) is None
        assert [i.cluster_id for i in await repos.terminations.in_state(accepted)] == ["c-1"]
        assert await repos.terminations.move("c-1", from_=accepted, to=done, now=T0)
        assert not await repos.terminations.move("c-1", from_=accepted, to=done, now=T0)
        stored = await repos.terminations.get("c-1")
    assert stored.state is done and stored.done_at == T0 and stored.warned_at == T0
