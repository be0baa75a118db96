"""APScheduler only ticks: fixed interval sweeps, never a job per cluster (the DB owns what's due).

`coalesce=True` folds missed runs into one, `max_instances=1` keeps a slow sweep from
overlapping itself.
"""

from __future__ import annotations

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.jobs import sweeps
from bot.services.container import Services

RESUME_SECONDS = 60
VOLUME_SECONDS = 300


def build_scheduler(services: Services, *, poll_interval_seconds: int) -> AsyncIOScheduler:
    scheduler = AsyncIOScheduler(timezone="UTC", job_defaults={
        "coalesce": True, "max_instances": 1, "misfire_grace_time": poll_interval_seconds,
    })
    scheduler.add_job(sweeps.watch_clusters, "interval", args=[services], id="watch_clusters",
                      seconds=poll_interval_seconds)
    scheduler.add_job(sweeps.finish_terminations, "interval", args=[services],
                      id="finish_terminations", seconds=poll_interval_seconds)
    scheduler.add_job(sweeps.resume_launches, "interval", args=[services],
                      id="resume_launches", seconds=RESUME_SECONDS)
    scheduler.add_job(sweeps.remind_volumes, "interval", args=[services],
                      id="remind_volumes", seconds=VOLUME_SECONDS)
    return scheduler
