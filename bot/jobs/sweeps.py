"""The few fixed sweeps. Each asks the provider and the database what is due now and does it
idempotently: running one twice, or after a restart, announces nothing twice."""

from __future__ import annotations

import logging
import time

from bot.services.container import Services

log = logging.getLogger(__name__)


async def watch_clusters(services: Services) -> None:
    """Adopt untracked clusters, bring every live one up to date from the provider's listing
    and queue what changed (and the hourly reminders) — without waiting for Slack: the
    delivery sweep tells it, so a storm's posts never make a poll, or readiness, wait."""
    wall, cpu = time.perf_counter(), time.process_time()
    polled = await services.watching.sync_live(on_page=services.reconciling.reconcile_page,
                                               deliver=False)
    await services.approvals.show_expired()
    # `make bench` reads this line (benchmarks/scale.py): keep its shape.
    log.debug("swept %d live clusters in %.4f s wall, %.4f s CPU", polled,
              time.perf_counter() - wall, time.process_time() - cpu)


async def watch_and_tell(services: Services) -> None:
    """The watch sweep telling as it goes (edits inline, notices delivered at its end): the
    local workspace's (one person at a terminal, no Slack limits), where each step's messages
    read in the order they happened."""
    await services.watching.sync_live(on_page=services.reconciling.reconcile_page)
    await services.approvals.show_expired()


async def enforce_envelopes(services: Services) -> int:
    """Money first, on its own schedule: spend envelopes move on (and enforced ones end) every
    poll interval, whatever Slack is doing — a terminate never waits behind a notice. Returns
    how many envelopes moved on."""
    return await services.envelopes.sweep()


async def deliver_outbox(services: Services) -> None:
    """Tell what the sweeps stored: notices, queued messages and refused posts, by lane and
    paced to Slack's limits (bot/slack/pacing.py), until each is delivered."""
    await services.watching.deliver()


async def resume_launches(services: Services) -> None:
    """Launches approved but not started, or orphaned by a crashed worker, carry on."""
    resumed = await services.launching.resume()
    if resumed:
        log.info("resumed %d launches", resumed)


async def look_for_stock(services: Services) -> None:
    """Requests waiting for stock: one re-quote per due shape and location; launch or ask."""
    if services.stock is not None:
        calls = await services.stock.sweep()
        if calls:
            log.info("looked for stock with %d quotes", calls)


async def remind_volumes(services: Services) -> None:
    """Daily reminders for volumes no cluster holds (they bill until deleted); and, as the
    slowest sweep, forgetting the deliveries from Slack no retry can repeat any more."""
    reminded = await services.volumes.remind_due()
    if reminded:
        log.info("reminded %d orphaned volumes", reminded)
    forgotten = await services.deliveries.forget_old()
    if forgotten:
        log.debug("forgot %d old Slack deliveries", forgotten)


async def finish_terminations(services: Services) -> int:
    """Terminates AI Reserve hasn't taken yet are tried again; finished ones are announced.
    Returns how many terminates moved on."""
    moved = await services.termination.finish()
    if moved:
        log.info("moved %d terminates on", moved)
    return moved
