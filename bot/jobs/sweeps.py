"""The few fixed sweeps. Each asks the database what is due now and does it idempotently."""

from __future__ import annotations

import logging

from bot.services.container import Services

log = logging.getLogger(__name__)


async def poll_clusters(services: Services) -> None:
    """Bring every cluster that may still bill up to date (and its Slack message with it)."""
    polled = await services.tracking.sync_live()
    log.debug("polled %d live clusters", polled)


async def resume_launches(services: Services) -> None:
    """Launches approved but not started, or orphaned by a crashed worker, carry on."""
    resumed = await services.launching.resume()
    if resumed:
        log.info("resumed %d launches", resumed)
