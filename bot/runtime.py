"""The only place that wires everything together, in one AsyncExitStack.

    Settings → Database (migrated) → aiohttp session → AI Reserve client (real, or the embedded
    simulator on loopback) → Slack Web API client → notifier → services → Bolt app → scheduler.

`start()` yields a running `Runtime`; leaving it closes everything in reverse order. `serve()`
then exposes the Bolt app over HTTP (`/slack/events`) or Socket Mode.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock, ProviderClock, SystemClock
from bot.config import Settings
from bot.domain.policy import Policy
from bot.jobs.scheduler import SWEEPS_LEASE, build_scheduler, sweeps_lease_ttl
from bot.policy_file import load_policy_or_default
from bot.reserve.client import AsyncAIReserveClient
from bot.services.approvals import ApprovalService
from bot.services.audit import AuditLog
from bot.services.claims import ButtonClaims
from bot.services.clusters import ClusterQueries
from bot.services.container import Services
from bot.services.envelopes import EnvelopeService
from bot.services.home import HomeService
from bot.services.launching import LaunchService
from bot.services.people import People
from bot.services.quoting import QuotingService
from bot.services.reconciling import ReconcileService
from bot.services.recovery import RecoveryService
from bot.services.stewardship import StewardshipService
from bot.services.termination import TerminationService
from bot.services.volumes import VolumeService
from bot.services.watching import WatchService
from bot.slack.app import build_app, http_app
from bot.slack.directory import SlackDirectory
from bot.slack.inflight import InFlight
from bot.slack.notifier import SlackNotifier
from bot.slack.retry import Sleep, retry_handlers
from storage.db import Database
from storage.leases import Lease, replica_id

if TYPE_CHECKING:  # the simulator is imported only when the bot embeds one
    from bot.reserve.simulator.config import SimConfig
    from bot.reserve.simulator.embedded import EmbeddedSimulator

log = logging.getLogger(__name__)

SIMULATOR_KEY = "embedded-simulator"


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    db: Database
    provider: AsyncAIReserveClient
    simulator: EmbeddedSimulator | None
    slack: AsyncWebClient
    services: Services
    bolt: AsyncApp
    inflight: InFlight

    async def settle(self) -> None:
        """Wait until no listener and no launch is still working (after an ack)."""
        while True:
            await self.inflight.idle()
            await self.services.launching.drain()
            if self.inflight.count == 0 and not self.services.launching.busy:
                return


@asynccontextmanager
async def start(settings: Settings, *, clock: Clock | None = None,
                sim_config: SimConfig | None = None, scheduler: bool = True,
                sleep: Sleep = asyncio.sleep, policy: Policy | None = None,
                ) -> AsyncIterator[Runtime]:
    """`sleep` is what retries wait with (Slack 429s, AI Reserve backoff): tests pass a fake."""
    host = clock or SystemClock()
    # AI Reserve's time decides its deadlines (quote expiry, envelope hours, reminders, payment
    # grace): every service runs on the host clock corrected by the provider's Date header.
    clock = ProviderClock(host)
    # The spend policy is read (and checked: PolicyError names the line) before anything starts.
    policy = policy or load_policy_or_default(settings.policy_file, approvers=settings.approvers,
                                              approvals_channel=settings.approvals_channel)
    async with AsyncExitStack() as stack:
        db = Database(settings.database_url)
        stack.push_async_callback(db.dispose)
        await db.migrate()

        session = await stack.enter_async_context(aiohttp.ClientSession())
        simulator: EmbeddedSimulator | None = None
        if settings.uses_simulator:
            from bot.reserve.simulator.config import SimConfig
            from bot.reserve.simulator.embedded import EmbeddedSimulator

            # A fresh seed per process: ids from an earlier run (kept in the database) must
            # never be issued again by this run's simulator, whose state starts empty.
            simulator = await stack.enter_async_context(EmbeddedSimulator(
                sim_config or SimConfig.fast(), host, seed=secrets.randbits(32)))
            base_url, key = simulator.base_url, SIMULATOR_KEY
            log.info("no AI Reserve key configured: using the embedded simulator at %s",
                     base_url)
        else:
            assert settings.aireserve_api_url and settings.aireserve_api_key
            base_url = settings.aireserve_api_url
            key = settings.aireserve_api_key.get_secret_value()
        provider = AsyncAIReserveClient(session, base_url, key, clock=clock, sleep=sleep)

        token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
        slack = AsyncWebClient(token=token, base_url=settings.slack_api_url,
                               retry_handlers=retry_handlers(sleep))
        approvals_channel = policy.approvals_channel or settings.approvals_channel or ""
        people = People(policy=policy, directory=SlackDirectory(slack), clock=clock)
        home = HomeService(db=db, people=people, clock=clock)
        replica = replica_id()  # this process among the replicas sharing the database
        notifier = SlackNotifier(client=slack, db=db, clock=clock, people=people, home=home,
                                 approvals_channel=approvals_channel, holder=replica,
                                 claim_ttl=timedelta(seconds=settings.outbox_claim_seconds))
        audit = AuditLog(db=db, clock=clock)
        quoting = QuotingService(provider=provider, db=db, clock=clock)
        launching = LaunchService(provider=provider, quoting=quoting, notifier=notifier,
                                  audit=audit, db=db, clock=clock)
        watching = WatchService(provider=provider, notifier=notifier, db=db, clock=clock)
        approvals = ApprovalService(quoting=quoting, notifier=notifier, launcher=launching,
                                    people=people, audit=audit, db=db, clock=clock)
        launching.judge = approvals.judge
        termination = TerminationService(watching=watching, provider=provider, people=people,
                                         audit=audit, db=db, clock=clock)
        services = Services(
            clock=clock, people=people, audit=audit, home=home, quoting=quoting,
            launching=launching, watching=watching, approvals=approvals,
            termination=termination,
            clusters=ClusterQueries(provider=provider, watching=watching, people=people,
                                    audit=audit, db=db, clock=clock),
            recovery=RecoveryService(watching=watching, provider=provider, people=people,
                                     audit=audit, db=db, clock=clock),
            stewardship=StewardshipService(notifier=notifier, provider=provider, people=people,
                                           audit=audit, db=db, clock=clock),
            reconciling=ReconcileService(provider=provider, quoting=quoting, watching=watching,
                                         notifier=notifier, audit=audit, db=db, clock=clock,
                                         approvals_channel=approvals_channel),
            volumes=VolumeService(notifier=notifier, provider=provider, people=people,
                                  audit=audit, db=db, clock=clock),
            envelopes=EnvelopeService(notifier=notifier, termination=termination,
                                      provider=provider, people=people, audit=audit, db=db,
                                      clock=clock, poll_interval=timedelta(
                                          seconds=settings.poll_interval_seconds)),
            claims=ButtonClaims(audit=audit, db=db, clock=clock),
        )
        stack.push_async_callback(launching.drain)
        secret = (settings.slack_signing_secret.get_secret_value()
                  if settings.slack_signing_secret else None)
        inflight = InFlight()
        bolt = build_app(services=services, client=slack, signing_secret=secret,
                         inflight=inflight)
        stack.push_async_callback(inflight.idle)  # finish listener work before closing

        # Carry on whatever a previous run left half-done before taking new work.
        await launching.resume(at_start=True)
        if scheduler:
            lease = Lease(db=db, name=SWEEPS_LEASE, holder=replica,
                          ttl=sweeps_lease_ttl(settings.poll_interval_seconds))
            stack.push_async_callback(lease.release)  # a clean stop hands the sweeps over now
            jobs = build_scheduler(services, lease=lease,
                                   poll_interval_seconds=settings.poll_interval_seconds)
            jobs.start()
            stack.callback(jobs.shutdown, wait=False)
        yield Runtime(settings=settings, clock=clock, db=db, provider=provider,
                      simulator=simulator, slack=slack, services=services, bolt=bolt,
                      inflight=inflight)


@asynccontextmanager
async def http_site(runtime: Runtime, *, host: str = "0.0.0.0",
                    port: int | None = None) -> AsyncIterator[str]:
    """Serve `/slack/events` over HTTP; yields the base URL it listens on."""
    secret = runtime.settings.slack_signing_secret
    assert secret is not None
    runner = web.AppRunner(http_app(runtime.bolt, signing_secret=secret.get_secret_value()))
    await runner.setup()
    site = web.TCPSite(runner, host, runtime.settings.port if port is None else port)
    await site.start()
    try:
        bound = runner.addresses[0][1]
        yield f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{bound}"
    finally:
        await runner.cleanup()


async def serve(runtime: Runtime) -> None:
    """Run until cancelled: Socket Mode when an app token is set, HTTP otherwise."""
    # What start-up built (modules, schemas, table metadata: most of the heap) never becomes
    # garbage: frozen, full collections no longer walk it, so their pauses stay short.
    gc.collect()
    gc.freeze()
    if runtime.settings.slack_app_token is not None:
        from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

        handler = AsyncSocketModeHandler(
            runtime.bolt, runtime.settings.slack_app_token.get_secret_value())
        log.info("connecting to Slack over Socket Mode")
        await handler.start_async()  # type: ignore[no-untyped-call]
        return
    async with http_site(runtime) as url:
        log.info("listening for Slack on %s/slack/events", url)
        await asyncio.Event().wait()
