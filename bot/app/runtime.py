"""The only place that wires everything together, in one AsyncExitStack.

    Settings → Database (migrated) → aiohttp session → AI Reserve client (real, or the embedded
    simulator on loopback) → Slack Web API client → notifier → services → Bolt app → scheduler.

`start()` yields a running `Runtime`; leaving it stops gracefully — the scheduler stops, the
listeners, launches and sweeps in flight finish (bounded by DRAIN_SECONDS), then everything closes
in reverse order. `serve()` exposes the Bolt app over HTTP (`/slack/events`) or Socket Mode, and
the health endpoints and metrics on the internal port (bot/app/listeners.py) either way, until its
`stop` event is set (SIGTERM/SIGINT in bot/app/cli.py). Nothing at start waits for Slack or AI
Reserve: work left by an earlier run is resumed in the background, retried until they answer.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

import aiohttp
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bot.app import devtools
from bot.app.collector import Collector
from bot.app.health import Health
from bot.app.installing import oauth_parts
from bot.app.listeners import internal_site, site, start_prober, watch_connection
from bot.app.process import Runtime
from bot.app.reload import watch_token_file
from bot.app.slack_client import slack_client
from bot.clock import Clock, ProviderClock, SystemClock
from bot.config.policy_file import load_policies_or_default
from bot.config.settings import Settings, previous_workload_keys, workload_key
from bot.domain.places import Policies
from bot.domain.policy import Policy
from bot.jobs.scheduler import (
    SWEEP_CAPABILITY,
    SWEEPS_LEASE,
    build_scheduler,
    sweeps_lease_ttl,
)
from bot.jobs.tracker import Sweeps
from bot.observability.metrics import Metrics
from bot.observability.reachability import Connection, Reachability, provider_outcome
from bot.reserve.client import AsyncAIReserveClient
from bot.services.approvals import ApprovalService
from bot.services.audit import AuditLog
from bot.services.claims import ButtonClaims
from bot.services.clusters import ClusterQueries
from bot.services.container import Services
from bot.services.deliveries import Deliveries
from bot.services.duty import DutyService
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
from bot.services.stock import StockService
from bot.services.storms import StormService
from bot.services.templates import TemplateService
from bot.services.termination import TerminationService
from bot.services.volumes import VolumeService
from bot.services.watching import WatchService
from bot.slack.acks_first import behind_acks
from bot.slack.app import build_app, http_app
from bot.slack.directory import SlackDirectory
from bot.slack.duty import DutyNotices
from bot.slack.inflight import InFlight
from bot.slack.notifier import SlackNotifier
from bot.slack.retry import Sleep
from bot.slack.signals import Signals
from bot.slack.tokens import Tokens
from storage import sealing
from storage.db import Database
from storage.replica import Lease, replica_id

if TYPE_CHECKING:  # the simulator is imported only when the bot embeds one
    from bot.app.devtools import EmbeddedSimulator, SimConfig

log = logging.getLogger(__name__)

SIMULATOR_KEY = "embedded-simulator"
DRAIN_SECONDS = 20.0  # a graceful stop waits this long for in-flight work, then exits anyway
START_WAIT_SECONDS = 5.0  # start waits this long for the resume before serving regardless
FIRST_RETRY_SECONDS = 1.0  # then doubling up to RETRY_CAP_SECONDS
RETRY_CAP_SECONDS = 60.0


# Stored posts a delivery pass sends side by side when Slack's limits are paced (each waits its
# turn per channel and method): one slow channel doesn't hold up the others.
DELIVERY_CONCURRENCY = 16


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
    # `policy`: one for every installation (the local workspace's demo).
    policies = Policies(default=policy) if policy else load_policies_or_default(
        settings.policy_file, approvers=settings.approvers,
        approvals_channel=settings.approvals_channel)
    async with AsyncExitStack() as stack:
        db = Database(settings.database_url)
        # Environment values typed in the launch form are sealed before any row holds them.
        sealing.configure(workload_key(settings), previous=previous_workload_keys(settings))
        stack.push_async_callback(db.dispose)
        await db.migrate()
        metrics = Metrics(db=db, clock=clock, poll_interval_seconds=settings.poll_interval_seconds)

        session = await stack.enter_async_context(aiohttp.ClientSession())
        simulator: EmbeddedSimulator | None = None
        if settings.uses_simulator:
            # A fresh seed per process: ids from an earlier run (kept in the database) must
            # never be issued again by this run's simulator, whose state starts empty.
            simulator = await stack.enter_async_context(devtools.embedded_simulator(
                sim_config, host, seed=secrets.randbits(32)))
            base_url, key = simulator.base_url, SIMULATOR_KEY
        else:
            assert settings.aireserve_api_url and settings.aireserve_api_key
            base_url = settings.aireserve_api_url
            key = settings.aireserve_api_key.get_secret_value()
        # Fresh at start: the first idle probe comes a third of the budget later, not now.
        # Measured on the host's clock (not AI Reserve's, which is unknown while it is down).
        def host_seconds() -> float:
            return host.now().timestamp()

        reach_slack, reach_provider = (
            Reachability(name, settings.unreachable_budget_seconds, now=host_seconds,
                         last_outcome_at=host_seconds()) for name in ("slack", "AI Reserve"))
        for reach in (reach_slack, reach_provider):
            metrics.watch(reach)

        def observe(route: str, status: str) -> None:
            metrics.provider_request(route, status)
            provider_outcome(reach_provider, status)

        provider = AsyncAIReserveClient(session, base_url, key, clock=clock, sleep=sleep,
                                        observe=observe)
        log.info("%s", settings.start_line())

        token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
        # One HTTP session for Slack (Web API and response_url replies): without it slack_sdk and
        # Bolt open a session — a connection and a TLS handshake — for every call.
        slack_session = await stack.enter_async_context(aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=settings.slack_timeout_seconds)))
        # Tokens Slack refuses: probed on a back-off judged on the host's clock, not AI Reserve's.
        tokens = Tokens(now=lambda: host.now().timestamp())
        slack = slack_client(token, settings, session=slack_session, sleep=sleep,
                             metrics=metrics, reach=reach_slack, tokens=tokens)
        people = People(policies=policies, directory=SlackDirectory(slack), clock=clock)
        home = HomeService(db=db, people=people, clock=clock)
        replica = replica_id()  # this process among the replicas sharing the database
        notifier = SlackNotifier(client=slack, db=db, clock=clock, people=people, home=home,
                                 holder=replica,
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
        stock = StockService(quoting=quoting, notifier=notifier, launcher=launching,
                             people=people, audit=audit, db=db, clock=clock)
        launching.judge = stock.judge = quoting.judge = approvals.judge
        quoting.policy = lambda: people.policy  # the policy where the quote is asked
        quoting.spend_refusal = people.spend_refusal
        termination = TerminationService(watching=watching, provider=provider, people=people,
                                         notifier=notifier, audit=audit, db=db, clock=clock)
        # An idle rule the policy's grace ran out on ends through the same terminate intent.
        watching.readiness.idle.terminate = termination.terminate_for_idle
        volumes = VolumeService(notifier=notifier, provider=provider, people=people, audit=audit,
                                db=db, clock=clock)
        recovery = RecoveryService(watching=watching, provider=provider, people=people,
                                   audit=audit, db=db, clock=clock)
        claims = ButtonClaims(audit=audit, db=db, clock=clock)
        # Degraded clusters get an owner on duty (escalated by the watch sweep).
        watching.duty = DutyService(db=db, people=people, audit=audit, clock=clock,
                                    notices=DutyNotices(client=slack, db=db, clock=clock,
                                                        outbox=notifier.outbox))
        services = Services(
            clock=clock, people=people, audit=audit, home=home, quoting=quoting,
            launching=launching, watching=watching, approvals=approvals,
            termination=termination,
            clusters=ClusterQueries(provider=provider, watching=watching, people=people,
                                    audit=audit, db=db, clock=clock, volumes=volumes),
            recovery=recovery,
            stewardship=StewardshipService(notifier=notifier, provider=provider, people=people,
                                           audit=audit, db=db, clock=clock),
            reconciling=ReconcileService(provider=provider, quoting=quoting, watching=watching,
                                         notifier=notifier, audit=audit, db=db, clock=clock,
                                         people=people),
            volumes=volumes,
            envelopes=EnvelopeService(notifier=notifier, termination=termination,
                                      provider=provider, people=people, audit=audit, db=db,
                                      clock=clock, poll_interval=timedelta(
                                          seconds=settings.poll_interval_seconds)),
            claims=claims,
            deliveries=Deliveries(db=db, clock=clock),
            extensions=ExtensionService(notifier=notifier, people=people, audit=audit, db=db,
                                        clock=clock),
            readiness=watching.readiness, duty=watching.duty, stock=stock,
            storms=StormService(db=db, recovery=recovery, claims=claims, clock=clock),
            templates=TemplateService(db=db, people=people, audit=audit, clock=clock,
                                      notifier=notifier),
        )
        notifier.notices.envelope_margin = services.envelopes.margin  # reminders say its end
        secret = (settings.slack_signing_secret.get_secret_value()
                  if settings.slack_signing_secret else None)
        inflight = InFlight()
        oauth = oauth_parts(settings, db=db, clock=clock, client=slack, holder=replica,
                            metrics=metrics)
        if oauth is not None:  # an installation's own approvals channel is its own
            oauth.tenancy.people = people
        # Slack's events about the bot's channels, people and token, acted on when said.
        signals = Signals(fallbacks=notifier.fallbacks, post_pending=notifier.refresh_request,
                          deliver=notifier.deliver_notices, tokens=tokens,
                          token=lambda: slack.token)
        bolt = build_app(services=services, client=slack, signing_secret=secret,
                         inflight=inflight, dm_channel=notifier.outbox.dm_channel,
                         on_ack=metrics.ack, tenancy=oauth.tenancy if oauth else None,
                         signals=signals)
        sweeps = Sweeps(observe=metrics.sweep, failed=metrics.sweep_failed)
        jobs = None
        if scheduler:
            lease = Lease(db=db, name=SWEEPS_LEASE, holder=replica,
                          ttl=sweeps_lease_ttl(settings.poll_interval_seconds),
                          capability=capability)
            stack.push_async_callback(lease.release)  # a clean stop hands the sweeps over now
            # The sweeps' steps take their turns behind the acks (bot/slack/acks_first.py).
            jobs = build_scheduler(services, lease=lease, tracker=sweeps,
                                   poll_interval_seconds=settings.poll_interval_seconds,
                                   behind_acks=behind_acks)
        # Read at scrape time: 1 while this replica holds the sweeps lease (0 with no scheduler).
        metrics.lease_holder.set_function(
            lambda: float(jobs is not None and sweeps.holder))
        health = Health(db=db, poll_interval_seconds=settings.poll_interval_seconds,
                        sweeps=sweeps, scheduler_running=lambda: bool(jobs and jobs.running),
                        replica=replica, reaches=[reach_slack, reach_provider],
                        notes=[tokens.problem])
        rt = Runtime(settings=settings, clock=clock, db=db, provider=provider,
                     simulator=simulator, slack=slack, services=services, bolt=bolt,
                     inflight=inflight, health=health, sweeps=sweeps, metrics=metrics,
                     notifier=notifier, jobs=jobs, oauth=oauth)
        # Registered last, so it runs first on the way out: stop taking work, finish what runs.
        stack.push_async_callback(_stop_work, rt, jobs)

        # Carry on whatever a previous run left half-done before taking new work — but never
        # wait on Slack or AI Reserve to start: if they fail, it goes on in the background.
        resume = _keep_trying(rt, "resume launches",
                              lambda: launching.resume(at_start=True))
        rt.resuming = resume
        # Where the app is installed (auth.test): every request is judged against it, from
        # memory; until Slack has said, requests are refused (bot/slack/gate.py).
        # With OAuth, each request's installation is found as it comes (bot/slack/tenancy.py).
        installation = _keep_trying(rt, "read where the app is installed (auth.test)",
                                    people.read_installation) if oauth is None else resume
        await asyncio.wait({resume, installation}, timeout=START_WAIT_SECONDS)
        if jobs is not None:
            sweeps.started_at = time.monotonic()
            jobs.start()
        yield rt


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


async def _drain_listener(runtime: Runtime) -> None:
    """SIGTERM in HTTP mode: not ready at once (a load balancer or kube-proxy stops sending
    here), while the listener keeps answering what still arrives for LISTENER_DRAIN_SECONDS;
    only then does it close (and the work in flight finish, `_stop_work`)."""
    runtime.health.stopping.set()
    wait = runtime.settings.listener_drain_seconds
    if wait > 0:
        log.info("draining: /readyz is 503; still answering Slack for %.0f s", wait)
        await asyncio.sleep(wait)


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
    """Serve `/slack/events` — Slack only: health and metrics are on the internal port
    (`listeners.internal_site`) — over HTTP; yields the base URL.

    Leaving it closes the listening socket first (no new work), then gives requests being
    answered a moment to finish (their listeners' work is drained by `start`)."""
    secret = runtime.settings.slack_signing_secret
    assert secret is not None
    previous = runtime.settings.slack_signing_secret_previous
    secrets_ = [s.get_secret_value() for s in (secret, previous) if s is not None]
    app = http_app(runtime.bolt, signing_secrets=secrets_,
                   oauth=runtime.oauth.flow if runtime.oauth else None)
    wanted = runtime.settings.port if port is None else port
    async with site(app, host=host, port=wanted, setting="PORT") as (bound, url):
        runtime.bound, runtime.http_url = bound, url
        yield url


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def serve(runtime: Runtime, *, stop: asyncio.Event | None = None,
                host: str = "0.0.0.0") -> None:
    """Serve until `stop` is set (or forever): Socket Mode when an app token is set, HTTP
    otherwise; the internal port (health, metrics) either way. Socket Mode keeps trying to
    connect while Slack is unreachable instead of exiting (and /readyz says so)."""
    stop = stop or asyncio.Event()
    # The garbage collector on, start-up's heap frozen, full collections in Slack's lulls.
    collector = Collector(runtime.bolt.quiet)
    async with AsyncExitStack() as stack:
        stack.enter_context(collector.serving(asyncio.get_running_loop()))
        internal = await stack.enter_async_context(internal_site(runtime, host=host))
        watchers = [start_prober(runtime),  # and the bot token's file (bot/app/reload.py)
                    asyncio.create_task(watch_token_file(runtime), name="token file")]
        stack.push_async_callback(_cancel, watchers)
        health = f"health and metrics on {runtime.internal_bound} (this host: {internal}/readyz)"
        if runtime.settings.slack_app_token is not None:
            from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

            handler = AsyncSocketModeHandler(
                runtime.bolt, runtime.settings.slack_app_token.get_secret_value())
            runtime.health.connection = connection = Connection(
                runtime.settings.socket_budget_seconds)
            connection.down()  # until the first hello: red if it never comes within budget
            log.info("connecting to Slack over Socket Mode; %s", health)
            watchers.append(watch_connection(connection, lambda: handler.client.is_connected()))
            connect = _keep_trying(runtime, "connect to Slack over Socket Mode",
                                   handler.connect_async)
            await stop.wait()
            connect.cancel()
            await handler.close_async()  # type: ignore[no-untyped-call]
            return
        url = await stack.enter_async_context(http_site(runtime, host=host))
        log.info("listening for Slack on %s (this host: %s/slack/events); %s", runtime.bound,
                 url, health)
        await stop.wait()
        await _drain_listener(runtime)
