"""The running process: what `runtime.start()` built, handed to whatever serves, reloads or
watches it (runtime, listeners, reload, cli's signal handlers, the tests)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_sdk.web.async_client import AsyncWebClient

from bot.app.health import Health
from bot.app.installing import OAuthParts
from bot.clock import Clock
from bot.config.settings import Settings
from bot.jobs.tracker import Sweeps
from bot.observability.metrics import Metrics
from bot.reserve.client import AsyncAIReserveClient
from bot.services.container import Services
from bot.slack.app import AckingApp
from bot.slack.inflight import InFlight
from bot.slack.notifier import SlackNotifier
from storage.db import Database

if TYPE_CHECKING:  # the simulator is imported only when the bot embeds one
    from bot.app.devtools import EmbeddedSimulator


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    db: Database
    provider: AsyncAIReserveClient
    simulator: EmbeddedSimulator | None
    slack: AsyncWebClient
    services: Services
    bolt: AckingApp
    inflight: InFlight
    health: Health
    sweeps: Sweeps
    metrics: Metrics
    notifier: SlackNotifier
    background: set[asyncio.Task[None]] = field(default_factory=set)
    http_url: str | None = None  # where `http_site` listens, once it does (from this host)
    jobs: AsyncIOScheduler | None = None  # the sweeps' scheduler (None: started without one)
    bound: str | None = None  # the address it binds, as given (0.0.0.0:3000: every interface)
    internal_url: str | None = None  # where /healthz, /readyz, /metrics answer (this host)
    internal_bound: str | None = None  # the internal port's address, as given
    oauth: OAuthParts | None = None  # installs through OAuth (bot/app/installing.py)
    # Start's resume of the launches an earlier run left (`runtime.start`): start serves after
    # START_WAIT_SECONDS whether or not it is done, so it may still be running.
    resuming: asyncio.Task[None] | None = None

    async def settle(self) -> None:
        """Wait until no listener and no launch is still working (after an ack), start's resume
        of an earlier run's launches included."""
        while True:
            if self.resuming is not None:
                await asyncio.wait({self.resuming})
            await self.inflight.idle()
            await self.services.launching.drain()
            if self.inflight.count == 0 and not self.services.launching.busy:
                return
