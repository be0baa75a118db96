"""The sweeps run on the replica holding the `sweeps` lease (bot/jobs/scheduler.py)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.jobs import sweeps
from bot.jobs.scheduler import build_scheduler, leased, sweeps_lease_ttl, tracked
from bot.jobs.tracker import Sweeps
from bot.observability import metrics
from bot.slack.acks_first import HOLD_AT_MOST, PASS_TURNS, AcksFirstLoop, behind_acks
from storage.db import Database
from storage.replica import Lease


@dataclass
class FakeLease:
    """A lease the scheduler can hold and renew (`held`: this replica holds it now)."""

    held: bool
    since: float = 0.0
    ttl: timedelta = timedelta(seconds=18)

    async def hold(self) -> bool:
        return True

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def test_only_the_lease_holder_sweeps_and_another_takes_over(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'bot.db'}")
    await db.migrate()
    now = [T0]
    ttl = sweeps_lease_ttl(30)
    leases = [Lease(db=db, name="sweeps", holder=f"r{n}", ttl=ttl, now=lambda: now[0])
              for n in range(3)]
    ran: list[Any] = []

    async def sweep(services: Any) -> None:
        ran.append(services)

    try:
        for _ in range(3):  # every replica ticks; the first one holds and renews
            for n, lease in enumerate(leases):
                await leased(lease, sweep)(n)
            now[0] += timedelta(seconds=10)
        assert ran == [0, 0, 0]
        now[0] += ttl  # replica 0 died: its lease expired; the next replica to tick takes over
        for n, lease in enumerate(leases[1:], start=1):
            await leased(lease, sweep)(n)
        assert ran == [0, 0, 0, 1]
    finally:
        await db.dispose()


def test_the_lease_lasts_under_one_poll_interval_and_is_renewed_thrice_in_it():
    assert sweeps_lease_ttl(30) == timedelta(seconds=18)
    assert sweeps_lease_ttl(1) == timedelta(seconds=2)  # not shorter: a busy loop would flap

    scheduler = build_scheduler(Any, poll_interval_seconds=30, lease=FakeLease(held=False))  # type: ignore[arg-type]
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"watch_clusters", "finish_terminations", "resume_launches",
                         "remind_volumes", "look_for_stock", "keep_lease", "enforce_envelopes",
                         "deliver_outbox"}
    assert set(jobs) == set(metrics.SWEEPS)  # each one's failure counter starts at 0
    assert jobs["keep_lease"].trigger.interval == timedelta(seconds=6)
    assert jobs["watch_clusters"].func.__name__ == sweeps.watch_clusters.__name__


class ProviderDown(Exception):
    pass


async def test_only_a_completed_sweep_is_finished_a_raised_one_fails_a_skipped_one_is_nothing(
        monkeypatch):
    from bot.jobs import scheduler as module
    from bot.jobs.scheduler import tracked
    from bot.jobs.tracker import Sweeps

    monkeypatch.setattr(module, "is_provider_trouble", lambda exc: isinstance(exc, ProviderDown))
    observed: list[str] = []
    failed: list[str] = []
    tracker = Sweeps(observe=lambda name, _: observed.append(name), failed=failed.append)

    async def watch_clusters(_: Any) -> None:
        raise ProviderDown("AI Reserve answers 503")

    await tracked(watch_clusters, tracker)(None)
    assert tracker.finished == {} and observed == [] and failed == ["watch_clusters"]

    class NotHeld:
        held = False
        since = 0.0

        async def hold(self) -> bool:
            return False

    async def remind_volumes(_: Any) -> None:
        raise AssertionError("a replica without the lease must not sweep")

    await tracked(leased(NotHeld(), remind_volumes), tracker)(None)  # type: ignore[arg-type]
    assert tracker.finished == {} and observed == [] and failed == ["watch_clusters"]
    assert tracker.running == 0

    async def finish_terminations(_: Any) -> None:
        return None

    await tracked(finish_terminations, tracker)(None)
    assert set(tracker.finished) == {"finish_terminations"}
    assert observed == ["finish_terminations"] and tracker.running == 0


async def test_a_newer_capability_takes_a_live_lease_an_older_one_never_does(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'bot.db'}")
    await db.migrate()
    now = [T0]
    ttl = sweeps_lease_ttl(30)
    old = Lease(db=db, name="sweeps", holder="old", ttl=ttl, capability=1, now=lambda: now[0])
    new = Lease(db=db, name="sweeps", holder="new", ttl=ttl, capability=2, now=lambda: now[0])
    twin = Lease(db=db, name="sweeps", holder="twin", ttl=ttl, capability=2,
                 now=lambda: now[0])
    try:
        assert await old.hold()  # alone, the old build sweeps (availability over purity)
        assert await new.hold()  # live or not, a newer build takes it over at once
        assert not await old.hold()  # and the old one never takes it back while it renews
        assert not await twin.hold()  # nor does another replica of the same build
        now[0] += ttl  # the new one died: its lease expired
        assert await old.hold()  # the old one sweeps again rather than nobody
        assert await twin.hold() and not await old.hold()
    finally:
        await db.dispose()


def test_a_skipped_tick_of_any_sweep_is_not_a_warning(caplog):
    """APScheduler skips a tick while that sweep still runs (a storm's backlog; every call
    waiting on a database that is down): the plan, not a line a second. Other warnings stay."""
    import logging

    build_scheduler(object(), poll_interval_seconds=30)  # type: ignore[arg-type]
    scheduler_log = logging.getLogger("apscheduler.scheduler")
    with caplog.at_level(logging.WARNING, logger="apscheduler.scheduler"):
        for job in ("watch_clusters", "deliver_outbox", "keep_lease"):
            scheduler_log.warning('Execution of job "%s (trigger: interval[0:00:01], next run '
                                  'at: 2026-12-02 00:46:34 UTC)" skipped: maximum number of '
                                  'running instances reached (1)', job)
        scheduler_log.warning("Run time of job %s was missed by 0:00:05", "watch_clusters")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "Run time of job watch_clusters was missed by 0:00:05"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


SWEEP_STEPS = 100  # a sweep's steps (a page compared, a transaction), each SWEEP_STEP of CPU
SWEEP_STEP = 0.003  # more than a slice of work (WORK_PER_TURN): a step a slice
TURN = 0.001  # a request's turn before its ack (its body read, its middleware, …)


def test_a_sweep_takes_its_turns_behind_the_acks_and_a_burst_never_starves_it():
    """On the bot's loop (bot/slack/acks_first.py) a sweep marked by `behind_acks` waits while
    requests keep the loop busy — at most HOLD_AT_MOST, then a step every PASS_TURNS + 1 turns:
    an ack is not queued behind the sweep's steps, and a burst that never ends still lets the
    watch finish (and stamp it finished) within that bound."""
    clock = FakeClock()
    tracker = Sweeps()
    steps = 0
    begun = asyncio.Event()

    async def watch_clusters(_: Any) -> None:
        nonlocal steps
        for _ in range(SWEEP_STEPS):
            steps += 1
            clock.now += SWEEP_STEP
            begun.set()
            await asyncio.sleep(0)

    async def main() -> tuple[list[int], int]:
        sweep = asyncio.create_task(tracked(watch_clusters, tracker, behind=behind_acks)(None))
        await begun.wait()
        behind, turns = [], 0
        while not sweep.done():  # a burst that never ends: a request's turn always ready
            before = steps
            clock.now += TURN
            await asyncio.sleep(0)
            turns += 1
            behind.append(steps - before)
        return behind, turns

    with asyncio.Runner(loop_factory=lambda: AcksFirstLoop(clock=clock)) as runner:
        behind, turns = runner.run(main())
    held = round(HOLD_AT_MOST / TURN)  # the request's turns the hold lasts
    assert behind[:held - 1] == [0] * (held - 1)  # acks first: no sweep step in their turns
    assert max(behind) == 1  # then a step between two of the request's turns at most
    assert turns <= held + (PASS_TURNS + 1) * SWEEP_STEPS  # and the sweep ends in the bound
    assert "watch_clusters" in tracker.finished


def test_every_sweep_but_the_lease_keeper_begins_behind_the_acks():
    marked: list[str] = []
    running: list[str] = []

    class Nothing:
        """Services whose every call fails at once: each sweep begins, then raises."""

        def __getattr__(self, name: str) -> Any:
            raise LookupError(name)

    scheduler = build_scheduler(Nothing(), poll_interval_seconds=30,  # type: ignore[arg-type]
                                lease=FakeLease(held=True),
                                behind_acks=lambda: marked.append(running[-1]))
    for job in scheduler.get_jobs():
        running.append(job.id)
        with contextlib.suppress(LookupError):
            asyncio.run(job.func(*job.args))
    assert sorted(marked) == sorted(set(running) - {"keep_lease"})
