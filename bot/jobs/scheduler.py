"""APScheduler only ticks: fixed interval sweeps, never a job per cluster (the DB owns what's due).

`coalesce=True` folds missed runs into one, `max_instances=1` keeps a slow sweep from
overlapping itself.

With several replicas on one database the sweeps run on ONE of them: the holder of the `sweeps`
lease (`storage.leases`). Every replica's keeper job tries to take or renew it every `ttl / 3`;
the lease lasts 0.6 poll intervals (at least 2 s), so when the sweeping replica dies another one
takes over within one poll interval (≥ 4 s) — and sweeps at once. A sweep on a replica that does
not hold the lease does nothing, so provider calls per sweep don't grow with the replica count.

The lease also records `SWEEP_CAPABILITY`, what this build's sweeps know how to do: a replica
with a higher one takes the lease over from a lower holder at its next attempt, without waiting
for the expiry (during a rollout the new code sweeps, so no new duty is skipped); a lower one
never takes it from a live higher one, but still takes an expired lease (storage/leases.py).

Every job is also `tracked`: counted while it runs (a graceful stop waits for it) and stamped
when it completes (readiness, `clusterbot_last_sweep_timestamp_seconds`). A run that raised is a
failure (`clusterbot_sweeps_failed_total`), not finished; one skipped for want of the lease is
nothing. An AI Reserve error ends a run with a warning, not a traceback — the next run tries
again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.jobs import sweeps
from bot.jobs.tracker import Sweeps
from bot.services.container import Services, sweeping
from bot.services.outages import is_storage_outage
from bot.services.provider_errors import is_provider_outage, is_provider_trouble

log = logging.getLogger(__name__)

Sweep = Callable[[Services], Awaitable[object]]
SKIPPED = object()  # what a leased sweep returns on a replica without the lease

# With the 30 s launch lease, an unconfirmed launch is resolved within a minute.
RESUME_SECONDS = 20
# What this build's sweeps can do, recorded with the sweeps lease. RULE: add 1 whenever a sweep
# gains a duty or a notice kind that an older build would not perform or deliver (a new deadline
# enforced, a new kind of notice stored for the sweeps to send): then a replica of the new build
# takes the sweeps over from an old holder during a rollout instead of leaving the duty undone.
# 2: degraded escalation; 3: waiting for stock; 4: idle rules; 5: the delivery sweep and queued
# refreshes (`refresh/…` outbox entries, issue 17 lanes).
SWEEP_CAPABILITY = 5
VOLUME_SECONDS = 300
STOCK_SECONDS = 60  # the shortest back-off between two re-quotes of one shape
# The delivery sweep: what the others stored goes out within about a second (it runs as long
# as a backlog lasts; `max_instances=1` keeps one pass at a time).
DELIVER_SECONDS = 1
SWEEPS_LEASE = "sweeps"
LEASE_SHARE = 0.6  # of a poll interval
MIN_LEASE_SECONDS = 2.0  # below this a busy event loop would hand the lease back and forth


class Lease(Protocol):
    """`storage.replica.Lease`, as the scheduler uses it."""

    held: bool
    since: float
    ttl: timedelta

    async def hold(self) -> bool: ...


def sweeps_lease_ttl(poll_interval_seconds: int) -> timedelta:
    return timedelta(seconds=max(poll_interval_seconds * LEASE_SHARE, MIN_LEASE_SECONDS))


def leased(lease: Lease | None, sweep: Sweep) -> Sweep:
    """`sweep`, run only while this replica holds `lease` (renewed on the way in); else it
    returns SKIPPED."""
    async def run(services: Services) -> object:
        if lease is None or await lease.hold():
            return await sweep(services)
        return SKIPPED
    run.__name__ = run.__qualname__ = sweep.__name__
    return run


def tracked(job: Sweep, tracker: Sweeps, *, behind: Callable[[], None] | None = None) -> Sweep:
    """The job, counted while it runs (graceful stop) and stamped when it completes
    (readiness); a run that raised is a failure, a skipped one (no lease) is nothing.
    `behind` is called in the job's task as it begins (the runtime's `behind_acks`)."""

    failing = False  # this sweep's last run failed on AI Reserve (said once, until it works)

    async def run(services: Services) -> None:
        nonlocal failing
        if tracker.closed:
            return  # the bot is stopping: nothing new starts
        if behind is not None:
            behind()
        tracker.begin()
        started = time.monotonic()
        try:
            with sweeping():  # after a person's answers (storage/turns.py)
                outcome = await job(services)
        except Exception as exc:
            # Not finished: readiness and the stall alert ask whether the sweeps do their work,
            # and a sweep that raised didn't (AI Reserve down: nothing is watched).
            tracker.fail(job.__name__)
            if is_storage_outage(exc):
                # The database is full, down or read-only: logged once per outage where it
                # was seen (storage/outages.py), not per run; the next run tries again.
                return
            if not is_provider_trouble(exc):
                raise
            # AI Reserve down, failing or pausing us: the next run tries again. Said once per
            # streak; an outage is said by AI Reserve's reachability (once), not per sweep.
            quiet = failing or is_provider_outage(exc)
            log.log(logging.DEBUG if quiet else logging.WARNING, "%s: AI Reserve: %s",
                    job.__name__, exc)
            failing = True
            return
        except BaseException:  # cancelled at a stop: not finished, and no longer running
            tracker.skip()
            raise
        if outcome is SKIPPED:
            tracker.skip()
        else:
            if failing:
                log.info("%s: works again", job.__name__)
            failing = False
            tracker.end(job.__name__, seconds=time.monotonic() - started)

    run.__name__ = run.__qualname__ = job.__name__
    return run


class _SkippedTicks(logging.Filter):
    """A sweep still running when its next tick comes (the delivery sweep through a storm's
    backlog; any sweep while the database is down and each call waits on it) has that tick
    skipped by APScheduler: the plan (`max_instances=1`), not a warning worth a line a second.
    A sweep that hangs is what the stall alert sees (`clusterbot_last_sweep_timestamp_seconds`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances" not in record.getMessage()


_QUIET = _SkippedTicks()


def build_scheduler(services: Services, *, poll_interval_seconds: int,
                    lease: Lease | None = None, tracker: Sweeps | None = None,
                    behind_acks: Callable[[], None] | None = None) -> AsyncIOScheduler:
    """`behind_acks`, called as each sweep begins, puts its steps behind the acks Slack waits
    for (the runtime hands in bot/slack/acks_first.py's; bot/jobs may not import bot/slack).
    Not the lease's keeper: its renewal is small and must not lapse behind a burst."""
    tracker = tracker or Sweeps()
    logging.getLogger("apscheduler.scheduler").addFilter(_QUIET)  # once: a set of filters
    if lease is not None:
        tracker.lease = lease  # readiness and the holder gauge look at it
    scheduler = AsyncIOScheduler(timezone="UTC", job_defaults={
        "coalesce": True, "max_instances": 1, "misfire_grace_time": poll_interval_seconds,
    })
    jobs: tuple[tuple[Sweep, float], ...] = (
        (sweeps.enforce_envelopes, poll_interval_seconds),
        (sweeps.watch_clusters, poll_interval_seconds),
        (sweeps.deliver_outbox, DELIVER_SECONDS),
        (sweeps.finish_terminations, poll_interval_seconds),
        (sweeps.resume_launches, RESUME_SECONDS),
        (sweeps.remind_volumes, VOLUME_SECONDS),
        # As often as the watch (a local read when nothing is due): the back-off and the
        # per-minute allowance (bot/domain/stock.py) pace the calls, on the provider's clock.
        (sweeps.look_for_stock, min(STOCK_SECONDS, poll_interval_seconds)),
    )
    for sweep, seconds in jobs:
        scheduler.add_job(tracked(leased(lease, sweep), tracker, behind=behind_acks),
                          "interval", args=[services],
                          id=sweep.__name__, seconds=seconds)
    if lease is not None:
        async def keep_lease(_: Services) -> None:
            was = lease.held
            if await lease.hold() and not was:  # just took over: sweep now, not a tick later
                scheduler.modify_job(sweeps.watch_clusters.__name__,
                                     next_run_time=datetime.now(UTC))
        scheduler.add_job(tracked(keep_lease, tracker), "interval", args=[services],
                          id="keep_lease",
                          seconds=lease.ttl.total_seconds() / 3,
                          next_run_time=datetime.now(UTC))
    return scheduler
