"""The sweeps run on the replica holding the `sweeps` lease (bot/jobs/scheduler.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.jobs import sweeps
from bot.jobs.scheduler import build_scheduler, leased, sweeps_lease_ttl
from storage.db import Database
from storage.leases import Lease

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

    class FakeLease:
        held = False
        ttl = timedelta(seconds=18)

        async def hold(self) -> bool:
            return True

    scheduler = build_scheduler(Any, poll_interval_seconds=30, lease=FakeLease())  # type: ignore[arg-type]
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"watch_clusters", "finish_terminations", "resume_launches",
                         "remind_volumes", "keep_lease"}
    assert jobs["keep_lease"].trigger.interval == timedelta(seconds=6)
    assert jobs["watch_clusters"].func.__name__ == sweeps.watch_clusters.__name__
