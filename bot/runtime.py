"""The only place that wires everything together, in one AsyncExitStack.

    Settings → Database (migrated) → aiohttp session → AI Reserve client (real, or the embedded
    simulator on loopback) → Slack Web API client → notifier → services → Bolt app → scheduler.

`start()` yields a running `Runtime`; leaving it stops gracefully — the scheduler stops, the
listeners, launches and sweeps in flight finish (bounded by DRAIN_SECONDS), then everything closes
in reverse order. `serve()` exposes the Bolt app over HTTP (`/slack/events`) or Socket Mode, and
the health endpoints (bot/health.py) either way, until its `stop` event is set (SIGTERM/SIGINT in
bot/cli.py). Nothing at start waits for Slack or AI Reserve: work left by an earlier run is
resumed in the background, retried until they answer.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock, ProviderClock, SystemClock
from bot.config import CannotListen, Settings, workload_key
from bot.domain.policy import Policy
from bot.health import Health
from bot.jobs.scheduler import (
    SWEEP_CAPABILITY,
    SWEEPS_LEASE,
    build_scheduler,
    sweeps_lease_ttl,
)
from bot.jobs.tracker import Sweeps
from bot.metrics import CountingWebClient, Metrics
from bot.policy_file import load_policy_or_default
from bot.reserve.client import AsyncAIReserveClient
from bot.services.approvals import ApprovalService
from bot.services.audit import AuditLog
from bot.services.claims import ButtonClaims
from bot.services.clusters import ClusterQueries
from bot.services.container import Services
from bot.services.deliveries import Deliveries
from bot.services.envelopes import EnvelopeService
from bot.services.extensions import ExtensionService
from bot.services.home import HomeService
from bot.services.launching import LaunchService
from bot.services.people import People
from bot.services.quoting import QuotingService
from bot.services.readiness import ReadinessService
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
from bot.slack.pacing import PacedWebClient, Pacer, parse_limits
from bot.slack.retry import Sleep, retry_handlers
from storage import sealing
from storage.db import Database
from storage.leases import Lease, replica_id

if TYPE_CHECKING:  # the simulator is imported only when the bot embeds one
    from bot.reserve.simulator.config import SimConfig
    from bot.reserve.simulator.embedded import EmbeddedSimulator

log = logging.getLogger(__name__)

SIMULATOR_KEY = "embedded-simulator"
DRAIN_SECONDS = 20.0  # a graceful stop waits this long for in-flight work, then exits anyway
START_WAIT_SECONDS = 5.0  # start waits this long for the resume before serving regardless
FIRST_RETRY_SECONDS = 1.0  # then doubling up to RETRY_CAP_SECONDS
RETRY_CAP_SECONDS = 60.0
HTTP_SHUTDOWN_SECONDS = 5.0  # an ack takes milliseconds; the work after it is drained apart


# Stored posts a delivery pass sends side by side when Slack's limits are paced (each waits its
# turn per channel and method): one slow channel doesn't hold up the others.
DELIVERY_CONCURRENCY = 16


class SlackClient(CountingWebClient, PacedWebClient):
    """The bot's Web API client: each call counted (metrics) after its pacing (bot/slack/pacing)."""


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
    health: Health
    sweeps: Sweeps
    metrics: Metrics
    notifier: SlackNotifier
    background: set[asyncio.Task[None]] = field(default_factory=set)
    http_url: str | None = None  # where `http_site` listens, once it does (from this host)
    jobs: AsyncIOScheduler | None = None  # the sweeps' scheduler (None: started without one)
    bound: str | None = None  # the address it binds, as given (0.0.0.0:3000: every interface)

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
                capability: int = SWEEP_CAPABILITY) -> AsyncIterator[Runtime]:
    """`sleep` is what retries wait with (Slack 429s, AI Reserve backoff): tests pass a fake;
    `capability` is recorded with the sweeps lease (tests pose as an older build with it)."""
    host = clock or SystemClock()
    # AI Reserve's time decides its deadlines (quote expiry, envelope hours, reminders, payment
    # grace): every service runs on the host clock corrected by the provider's Date header.
    clock = ProviderClock(host)
    # The spend policy is read (and checked: PolicyError names the line) before anything starts.
    policy = policy or load_policy_or_default(settings.policy_file, approvers=settings.approvers,
                                              approvals_channel=settings.approvals_channel)
    async with AsyncExitStack() as stack:
        db = Database(settings.database_url)
        # Environment values typed in the launch form are sealed before any row holds them.
        sealing.configure(workload_key(settings))
        stack.push_async_callback(db.dispose)
        await db.migrate()
        metrics = Metrics(db=db, clock=clock, poll_interval_seconds=settings.poll_interval_seconds)

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
        else:
            assert settings.aireserve_api_url and settings.aireserve_api_key
            base_url = settings.aireserve_api_url
            key = settings.aireserve_api_key.get_secret_value()
        provider = AsyncAIReserveClient(session, base_url, key, clock=clock, sleep=sleep,
                                        observe=metrics.provider_request)
        log.info("%s", start_line(settings))

        token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
        # One HTTP session for Slack (Web API and response_url replies): without it slack_sdk and
        # Bolt open a session — a connection and a TLS handshake — for every call.
        slack_session = await stack.enter_async_context(aiohttp.ClientSession())
        limits = parse_limits(settings.slack_rate_limits)
        # Paced: 429s are waited out by the pacer, once per channel and method, not per call.
        slack = SlackClient(token=token, base_url=settings.slack_api_url, session=slack_session,
                            retry_handlers=retry_handlers(sleep, rate_limits=not limits))
        slack.pacer = Pacer(limits) if limits else None
        if slack.pacer is not None:
            for kind in ("tried", "held", "refused", "pauses"):
                metrics.slack_paced.labels(kind=kind).set_function(
                    partial(_stat, slack.pacer.stats, kind))
        slack.metrics = metrics
        approvals_channel = policy.approvals_channel or settings.approvals_channel or ""
        people = People(policy=policy, directory=SlackDirectory(slack), clock=clock)
        home = HomeService(db=db, people=people, clock=clock)
        replica = replica_id()  # this process among the replicas sharing the database
        notifier = SlackNotifier(client=slack, db=db, clock=clock, people=people, home=home,
                                 approvals_channel=approvals_channel, holder=replica,
                                 claim_ttl=timedelta(seconds=settings.outbox_claim_seconds))
        if slack.pacer is not None:  # paced per channel: many go side by side, each in turn
            notifier.outbox.concurrency = DELIVERY_CONCURRENCY
        audit = AuditLog(db=db, clock=clock)
        quoting = QuotingService(provider=provider, db=db, clock=clock, audit=audit)
        launching = LaunchService(provider=provider, quoting=quoting, notifier=notifier,
                                  audit=audit, db=db, clock=clock)
        watching = WatchService(provider=provider, notifier=notifier, db=db, clock=clock)
        watching.readiness = ReadinessService(provider=provider, notifier=notifier, db=db,
                                              clock=clock, people=people, audit=audit)
        approvals = ApprovalService(quoting=quoting, notifier=notifier, launcher=launching,
                                    people=people, audit=audit, db=db, clock=clock)
        launching.judge = approvals.judge
        quoting.judge = approvals.judge
        quoting.auto_approve_below_cents = policy.auto_approve_below_cents
        quoting.max_lifetime_hours = policy.max_lifetime_hours
        quoting.enforce_lifetime = policy.enforce_lifetime
        termination = TerminationService(watching=watching, provider=provider, people=people,
                                         notifier=notifier, audit=audit, db=db, clock=clock)
        volumes = VolumeService(notifier=notifier, provider=provider, people=people, audit=audit,
                                db=db, clock=clock)
        services = Services(
            clock=clock, people=people, audit=audit, home=home, quoting=quoting,
            launching=launching, watching=watching, approvals=approvals,
            termination=termination,
            clusters=ClusterQueries(provider=provider, watching=watching, people=people,
                                    audit=audit, db=db, clock=clock, volumes=volumes),
            recovery=RecoveryService(watching=watching, provider=provider, people=people,
                                     audit=audit, db=db, clock=clock),
            stewardship=StewardshipService(notifier=notifier, provider=provider, people=people,
                                           audit=audit, db=db, clock=clock),
            reconciling=ReconcileService(provider=provider, quoting=quoting, watching=watching,
                                         notifier=notifier, audit=audit, db=db, clock=clock,
                                         approvals_channel=approvals_channel),
            volumes=volumes,
            envelopes=EnvelopeService(notifier=notifier, termination=termination,
                                      provider=provider, people=people, audit=audit, db=db,
                                      clock=clock, poll_interval=timedelta(
                                          seconds=settings.poll_interval_seconds)),
            claims=ButtonClaims(audit=audit, db=db, clock=clock),
            deliveries=Deliveries(db=db, clock=clock),
            extensions=ExtensionService(notifier=notifier, people=people, audit=audit, db=db,
                                        clock=clock),
            readiness=watching.readiness,
        )
        secret = (settings.slack_signing_secret.get_secret_value()
                  if settings.slack_signing_secret else None)
        inflight = InFlight()
        bolt = build_app(services=services, client=slack, signing_secret=secret,
                         inflight=inflight, dm_channel=notifier.outbox.dm_channel,
                         on_ack=metrics.ack)
        sweeps = Sweeps(observe=metrics.sweep, failed=metrics.sweep_failed)
        jobs = None
        if scheduler:
            lease = Lease(db=db, name=SWEEPS_LEASE, holder=replica,
                          ttl=sweeps_lease_ttl(settings.poll_interval_seconds),
                          capability=capability)
            stack.push_async_callback(lease.release)  # a clean stop hands the sweeps over now
            jobs = build_scheduler(services, lease=lease, tracker=sweeps,
                                   poll_interval_seconds=settings.poll_interval_seconds)
        # Read at scrape time: 1 while this replica holds the sweeps lease (0 with no scheduler).
        metrics.lease_holder.set_function(
            lambda: float(jobs is not None and sweeps.holder))
        health = Health(db=db, poll_interval_seconds=settings.poll_interval_seconds,
                        sweeps=sweeps, scheduler_running=lambda: bool(jobs and jobs.running),
                        replica=replica)
        rt = Runtime(settings=settings, clock=clock, db=db, provider=provider,
                     simulator=simulator, slack=slack, services=services, bolt=bolt,
                     inflight=inflight, health=health, sweeps=sweeps, metrics=metrics,
                     notifier=notifier, jobs=jobs)
        # Registered last, so it runs first on the way out: stop taking work, finish what runs.
        stack.push_async_callback(_stop_work, rt, jobs)

        # Carry on whatever a previous run left half-done before taking new work — but never
        # wait on Slack or AI Reserve to start: if they fail, it goes on in the background.
        resume = _keep_trying(rt, "resume launches",
                              lambda: launching.resume(at_start=True))
        await asyncio.wait({resume}, timeout=START_WAIT_SECONDS)
        if jobs is not None:
            sweeps.started_at = time.monotonic()
            jobs.start()
        yield rt


def _stat(stats: object, kind: str) -> float:
    return float(getattr(stats, kind))


def start_line(settings: Settings) -> str:
    """What this process runs against, in one line (never a secret)."""
    provider = ("the embedded simulator (fake clusters)" if settings.uses_simulator
                else settings.aireserve_api_url)
    slack = ("Socket Mode" if settings.socket_mode
             else "HTTP (/slack/events)" if settings.has_slack_credentials else "none")
    database = settings.database_url.split(":", 1)[0].split("+", 1)[0]
    policy = str(settings.policy_file) if settings.policy_file else "none (APPROVERS)"
    return (f"starting: AI Reserve {provider}; Slack {slack}; database {database}; "
            f"poll every {settings.poll_interval_seconds} s; policy file {policy}")


def _keep_trying(rt: Runtime, what: str, work: Callable[[], Awaitable[object]]
                 ) -> asyncio.Task[None]:
    """Run `work` in the background until it succeeds or the bot stops, backing off (real
    time) between tries."""

    async def attempt() -> None:
        delay = FIRST_RETRY_SECONDS
        while True:
            try:
                await work()
                return
            except Exception as exc:
                log.warning("could not %s (%s); trying again in %.0f s", what,
                            type(exc).__name__, delay)
            try:  # a stop ends the wait (and the tries: the next start carries on)
                await asyncio.wait_for(rt.health.stopping.wait(), delay)
                return
            except TimeoutError:
                delay = min(delay * 2, RETRY_CAP_SECONDS)

    task = asyncio.create_task(attempt(), name=what)
    rt.background.add(task)
    task.add_done_callback(rt.background.discard)
    return task


async def _stop_work(rt: Runtime, jobs: AsyncIOScheduler | None) -> None:
    """Stop starting anything, then let listeners, launches and sweeps finish (bounded)."""
    rt.health.stopping.set()
    rt.sweeps.closed = True  # a run already handed to the executor doesn't begin
    if jobs is not None and jobs.running:
        # Pause, not shut down: APScheduler's shutdown cancels the runs in flight, and a sweep
        # cut mid-post is exactly what a graceful stop avoids. It is shut down once drained.
        jobs.pause()
    drained = asyncio.create_task(_drain(rt))
    await asyncio.wait({drained}, timeout=DRAIN_SECONDS)
    if not drained.done():
        log.warning("stopping after %.0f s with work unfinished (%d listeners, %d sweeps, "
                    "launching: %s); the next start resumes it", DRAIN_SECONDS,
                    rt.inflight.count, rt.sweeps.running, rt.services.launching.busy)
        drained.cancel()  # and with it what it waited for: as a crash would, but logged
        for task in list(rt.background):
            task.cancel()
        await asyncio.wait({drained, *rt.background}, timeout=1)
    if jobs is not None and jobs.running:
        jobs.shutdown(wait=False)


async def _drain(rt: Runtime) -> None:
    while True:
        await rt.inflight.idle()
        await rt.services.launching.drain()
        await rt.sweeps.idle()
        if rt.background:
            await asyncio.wait(set(rt.background))
        if (rt.inflight.count == 0 and not rt.services.launching.busy
                and rt.sweeps.running == 0 and not rt.background):
            return


@asynccontextmanager
async def http_site(runtime: Runtime, *, host: str = "0.0.0.0",
                    port: int | None = None) -> AsyncIterator[str]:
    """Serve `/slack/events` and the health endpoints over HTTP; yields the base URL.

    Leaving it closes the listening socket first (no new work), then gives requests being
    answered a moment to finish (their listeners' work is drained by `start`)."""
    secret = runtime.settings.slack_signing_secret
    assert secret is not None
    app = http_app(runtime.bolt, signing_secret=secret.get_secret_value())
    runtime.health.add_routes(app)
    runtime.metrics.add_routes(app)
    async with _site(app, host=host, port=port, runtime=runtime) as url:
        yield url


@asynccontextmanager
async def _site(app: web.Application, *, host: str, port: int | None,
                runtime: Runtime) -> AsyncIterator[str]:
    # No access log: a line per Slack request costs ~10 % of an ack's CPU under load, and what
    # matters is logged where it happens (refusals in bot/slack/app.py, work by the listeners).
    runner = web.AppRunner(app, shutdown_timeout=HTTP_SHUTDOWN_SECONDS, access_log=None)
    await runner.setup()
    wanted = runtime.settings.port if port is None else port
    site = web.TCPSite(runner, host, wanted)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise CannotListen(f"PORT: can't listen on {host}:{wanted}: {exc.strerror or exc} "
                           "(another process has it? set PORT)") from None
    try:
        bound = runner.addresses[0][1]
        runtime.bound = f"{host}:{bound}"
        runtime.http_url = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{bound}"
        yield runtime.http_url
    finally:
        await runner.cleanup()


async def serve(runtime: Runtime, *, stop: asyncio.Event | None = None,
                host: str = "0.0.0.0") -> None:
    """Serve until `stop` is set (or forever): Socket Mode when an app token is set, HTTP
    otherwise. Socket Mode still serves the health endpoints on PORT, and keeps trying to
    connect while Slack is unreachable instead of exiting."""
    stop = stop or asyncio.Event()
    # What start-up built (modules, schemas, table metadata: most of the heap) never becomes
    # garbage: frozen, full collections no longer walk it, so their pauses stay short. Frozen
    # without collecting first: a full collection here costs ~80 ms of start-up to free ~2,000
    # objects. The collector was off until now under `cluster-bot serve` (bot/__main__.py).
    gc.freeze()
    gc.enable()
    if runtime.settings.slack_app_token is not None:
        from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

        handler = AsyncSocketModeHandler(
            runtime.bolt, runtime.settings.slack_app_token.get_secret_value())
        beside = runtime.health.app()
        runtime.metrics.add_routes(beside)
        async with _site(beside, host=host, port=None, runtime=runtime) as url:
            log.info("connecting to Slack over Socket Mode; health checks on %s (this host: "
                     "%s/readyz)", runtime.bound, url)
            connect = _keep_trying(runtime, "connect to Slack over Socket Mode",
                                   handler.connect_async)
            await stop.wait()
            connect.cancel()
            await handler.close_async()  # type: ignore[no-untyped-call]
        return
    async with http_site(runtime, host=host) as url:
        log.info("listening for Slack on %s (this host: %s/slack/events)", runtime.bound, url)
        await stop.wait()
