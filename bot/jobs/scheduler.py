"""APScheduler only ticks: fixed interval sweeps, never a job per cluster (the DB owns what's due).

`coalesce=True` folds missed runs into one, `max_instances=1` keeps a slow sweep from
overlapping itself. Every job is `tracked`: counted while it runs (a graceful stop waits for it)
and stamped when it ends (readiness); an AI Reserve error ends a run with a warning, not a
traceback — the next run tries again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.jobs import sweeps
from bot.jobs.tracker import Sweeps
from bot.services.container import Services
from bot.services.provider_errors import is_provider_trouble

log = logging.getLogger(__name__)

Job = Callable[[Services], Awaitable[None]]

RESUME_SECONDS = 60
VOLUME_SECONDS = 300


def tracked(job: Job, tracker: Sweeps) -> Job:
    """The job, counted while it runs and stamped when it finishes (readiness, graceful stop)."""

    async def run(services: Services) -> None:
        tracker.begin()
        try:
            await job(services)
        except Exception as exc:
            if not is_provider_trouble(exc):
                raise
            # AI Reserve down, failing or pausing us: the next run tries again.
            log.warning("%s: AI Reserve: %s", job.__name__, exc)
        finally:
            # Finished either way: readiness asks whether the sweeps still run, not whether
            # AI Reserve answered them.
            tracker.end(job.__name__)

    run.__name__ = run.__qualname__ = job.__name__
    return run


def build_scheduler(services: Services, *, poll_interval_seconds: int,
                    tracker: Sweeps | None = None) -> AsyncIOScheduler:
    tracker = tracker or Sweeps()
    scheduler = AsyncIOScheduler(timezone="UTC", job_defaults={
        "coalesce": True, "max_instances": 1, "misfire_grace_time": poll_interval_seconds,
    })
    every = ((sweeps.watch_clusters, poll_interval_seconds),
             (sweeps.finish_terminations, poll_interval_seconds),
             (sweeps.resume_launches, RESUME_SECONDS),
             (sweeps.remind_volumes, VOLUME_SECONDS))
    for job, seconds in every:
        scheduler.add_job(tracked(job, tracker), "interval", args=[services], id=job.__name__,
                          seconds=seconds)
    return scheduler
