"""The readiness checks' repository: cursors round-trip, and each move is a compare-and-set, so
Serving is settled once and the owner asked once per limit (SQLite, PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

from bot.domain.readiness import ReadinessState, ReadinessWatch, ServedSpan
from tests.storage.conftest import T0, make_cluster, seed


async def _watching(db) -> None:
    await seed(db)
    async with db.transaction() as repos:
        await repos.clusters.add(make_cluster())
        await repos.readiness.add(ReadinessWatch(
            cluster_id="c-1", pattern=r"Application startup complete", limit_minutes=45,
            updated_at=T0))
        await repos.readiness.add(ReadinessWatch(  # a second start keeps the first
            cluster_id="c-1", pattern="other", limit_minutes=5, updated_at=T0))


async def test_cursors_round_trip_and_only_watching_rows_are_listed(db):
    await _watching(db)
    cursor = T0 + timedelta(seconds=61)
    async with db.transaction() as repos:
        assert await repos.readiness.advance("c-1", now=T0, cursors={"0": cursor, "1": cursor},
                                             matched_ranks=[1],
                                             deadline_at=T0 + timedelta(minutes=45))
    async with db.transaction() as repos:
        [watch] = await repos.readiness.watching()
    assert watch.pattern == "Application startup complete" and watch.limit_minutes == 45
    assert watch.cursors == {"0": cursor, "1": cursor} and watch.cursors["0"].tzinfo is not None
    assert watch.matched_ranks == (1,)
    async with db.transaction() as repos:
        assert await repos.readiness.settle("c-1", to=ReadinessState.SERVING, now=T0,
                                            serving_at=cursor)
        assert not await repos.readiness.settle("c-1", to=ReadinessState.ENDED, now=T0)
        assert not await repos.readiness.advance("c-1", now=T0, matched_ranks=[0, 1])
        assert await repos.readiness.watching() == []
        settled = await repos.readiness.get("c-1")
    assert settled is not None and settled.serving_at == cursor
    assert settled.state is ReadinessState.SERVING and settled.matched_ranks == (1,)


async def test_asked_once_per_limit_and_keep_waiting_once_per_prompt(db):
    await _watching(db)
    later = T0 + timedelta(minutes=90)
    async with db.transaction() as repos:
        assert not await repos.readiness.ask("c-1", shown=0, now=T0)  # no deadline yet
        await repos.readiness.advance("c-1", now=T0, deadline_at=T0 + timedelta(minutes=45))
        assert await repos.readiness.ask("c-1", shown=0, now=T0)
        assert not await repos.readiness.ask("c-1", shown=0, now=T0)  # a second replica
        assert not await repos.readiness.keep_waiting("c-1", prompt=2, until=later, now=T0)
        assert await repos.readiness.keep_waiting("c-1", prompt=1, until=later, now=T0)
        assert not await repos.readiness.keep_waiting("c-1", prompt=1, until=later, now=T0)
        watch = await repos.readiness.get("c-1")
    assert watch is not None and (watch.prompts, watch.deadline_at) == (1, later)


async def test_serving_stops_and_watches_again_once_and_the_history_round_trips(db):
    """A lost node ends the serving period (compare-and-set on the state it was decided on),
    and the restart arms the check again; both stored once, whoever moves first."""
    await _watching(db)
    began, lost = T0 + timedelta(minutes=2), T0 + timedelta(minutes=40)
    back = lost + timedelta(minutes=5)
    async with db.transaction() as repos:
        assert await repos.readiness.settle("c-1", to=ReadinessState.SERVING, now=T0,
                                            serving_at=began)
        span = (ServedSpan(began=began, ended=lost),)
        assert await repos.readiness.move("c-1", expected=ReadinessState.SERVING, now=lost,
                                          state=ReadinessState.STOPPED, served=span)
        assert not await repos.readiness.move("c-1", expected=ReadinessState.SERVING, now=lost,
                                              state=ReadinessState.STOPPED, served=span * 2)
        assert await repos.readiness.watching() == []  # stopped: not followed
        assert await repos.readiness.move("c-1", expected=ReadinessState.STOPPED, now=back,
                                          state=ReadinessState.WATCHING, rearmed_at=back,
                                          cursors={"0": back}, matched_ranks=(),
                                          deadline_at=back + timedelta(minutes=45))
        [watch] = await repos.readiness.watching()
    assert watch.served == span and watch.stopped_at == lost
    assert watch.served[0].ended.tzinfo is not None and watch.rearmed_at == back
    assert watch.cursors == {"0": back} and watch.serving_at == began


async def test_idle_moves_are_compare_and_set_and_the_follower_lists_idle_rows(db):
    """An idle-only row (no readiness pattern) is followed while its rule is in play; firing,
    keeping and terminating each happen once per episode; the shared cursor is stored after
    serving but never over a re-arm."""
    from bot.domain.idle import IdleState
    from bot.domain.models import IdleRule

    await seed(db)
    async with db.transaction() as repos:
        await repos.clusters.add(make_cluster())
        await repos.readiness.add(ReadinessWatch(
            cluster_id="c-1", pattern=None, limit_minutes=45, state=ReadinessState.NONE,
            idle=IdleRule(quiet_minutes=30, done="Training completed"),
            idle_state=IdleState.ACTIVE, updated_at=T0))
    cursor = T0 + timedelta(minutes=3)
    async with db.transaction() as repos:
        [watch] = await repos.readiness.followed()
        assert watch.pattern is None and watch.idle == IdleRule(quiet_minutes=30,
                                                                done="Training completed")
        assert await repos.readiness.watching() == []  # no readiness check to watch
        assert await repos.readiness.read_to(watch, cursors={"0": cursor}, last_line_at=cursor,
                                             now=T0)
        stale = watch.model_copy(update={"rearmed_at": T0})  # decided before a re-arm
        assert not await repos.readiness.read_to(stale, cursors={"0": T0}, last_line_at=T0,
                                                 now=T0)
        fired = {"idle_episode": 1, "idle_since": cursor, "idle_fired_at": T0}
        assert await repos.readiness.idle_move("c-1", from_=IdleState.ACTIVE, episode=0,
                                               to=IdleState.IDLE, now=T0, **fired)
        assert not await repos.readiness.idle_move("c-1", from_=IdleState.ACTIVE, episode=0,
                                                   to=IdleState.IDLE, now=T0, **fired)
        assert not await repos.readiness.idle_move("c-1", from_=IdleState.IDLE, episode=0,
                                                   to=IdleState.ACTIVE, now=T0)  # old episode
        assert await repos.readiness.idle_move("c-1", from_=IdleState.IDLE, episode=1,
                                               to=IdleState.TERMINATING, now=T0)
        assert not await repos.readiness.idle_move("c-1", from_=IdleState.IDLE, episode=1,
                                                   to=IdleState.ACTIVE, now=T0)  # too late
        [followed] = await repos.readiness.followed()
        assert followed.cursors == {"0": cursor} and followed.last_line_at == cursor
        assert (followed.idle_state, followed.idle_episode) == (IdleState.TERMINATING, 1)
        assert await repos.readiness.idle_end("c-1", now=T0)
        assert not await repos.readiness.idle_end("c-1", now=T0)
        assert await repos.readiness.followed() == []
