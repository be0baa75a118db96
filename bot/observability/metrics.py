"""Prometheus metrics at `GET /metrics` (prometheus-client), one registry per runtime.

Counters and histograms are fed where things happen: every AI Reserve request
(`Transport.send` → `provider_request`), every Slack Web API call (`CountingWebClient`), every
ack (Bolt middleware in bot/slack/app.py), every sweep run (bot/jobs/scheduler.py's `tracked`:
a completed run is timed and stamped, a run that raised is counted as failed, a run skipped by a
replica without the sweeps lease is not counted at all). `clusterbot_sweeps_lease_holder` is 1 on
the replica that sweeps, so the stall alert reads the holder's figures, not the freshest idle
replica's; `clusterbot_build_info{version,commit}` is always 1.
The gauges about money and the outbox are read from the database at scrape time with bounded
aggregate queries (storage/gauges.py), so every replica reports the same shared truth.

Labels are bounded: routes are templates (`GET /clusters/{id}`), Slack methods are API method
names, outcomes and states are small fixed sets. No cluster, user or request id is a label.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.clock import Clock
from bot.domain import spend
from bot.domain.errors import StorageUnavailable
from bot.domain.models import ClusterState
from bot.observability import reachability
from bot.observability.build import commit, version
from bot.observability.reachability import Reachability
from bot.slack import answers
from bot.slack.tokens import TOKEN_ERRORS
from storage import gauges
from storage.db import Database
from storage.replica import wall_clock

log = logging.getLogger(__name__)

ACK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0)
# The scheduler's jobs (bot/jobs/scheduler.py; tests/test_jobs.py keeps the two in step): the
# failure counter starts at 0 for each, so a rate over it works before the first failure.
SWEEPS = ("watch_clusters", "finish_terminations", "resume_launches", "remind_volumes",
          "look_for_stock", "keep_lease", "enforce_envelopes", "deliver_outbox")
SWEEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    def __init__(self, *, db: Database, clock: Clock, poll_interval_seconds: int) -> None:
        self._db = db
        self._clock = clock
        self.registry = CollectorRegistry()
        r = self.registry
        self.provider_requests = Counter(
            "clusterbot_provider_requests", "AI Reserve requests by route template and HTTP "
            "status (\"error\": no answer; \"paused\": refused locally under a Retry-After)",
            ["route", "status"], registry=r)
        self.slack_calls = Counter(
            "clusterbot_slack_calls", "Slack Web API calls by method and outcome (ok, the "
            "Slack error code's class: ratelimited, token_refused, error; unreadable: an "
            "answer that isn't Slack's JSON (HTML, cut, plain text, empty); failed: no answer)",
            ["method", "outcome"],
            registry=r)
        self.slack_tokens_refused = Gauge(
            "clusterbot_slack_tokens_refused", "Bot tokens Slack refuses now (invalid_auth, "
            "account_inactive, token_revoked …): Slack calls stopped but a probe, posts kept "
            "queued", registry=r)
        self.slack_unreachable_targets = Gauge(
            "clusterbot_slack_unreachable_targets", "Channels and people Slack refuses posts "
            "to, by Slack's code (is_archived, not_in_channel: their posts held until given "
            "back; user_disabled …)", ["reason"], registry=r)
        self.slack_token_changes = Counter(
            "clusterbot_slack_token_changes", "A bot token refused by Slack, accepted again, or "
            "replaced while refused (a rotating token refreshed)",
            ["state"], registry=r)
        for state in ("refused", "accepted", "replaced"):
            self.slack_token_changes.labels(state=state)
        self.token_refresh_failing = Gauge(
            "clusterbot_slack_token_refresh_failing", "Installations (OAuth) whose rotating "
            "token could not be refreshed at its last try: it works until it expires", registry=r)
        self.token_refresh_failures = Counter(
            "clusterbot_slack_token_refresh_failures", "Tries to refresh an installation's "
            "rotating token that failed (this replica)", registry=r)
        self.sweep_seconds = Histogram(
            "clusterbot_sweep_seconds", "How long each scheduled sweep run took", ["sweep"],
            buckets=SWEEP_BUCKETS, registry=r)
        self.last_sweep = Gauge(
            "clusterbot_last_sweep_timestamp_seconds", "When each sweep last completed (Unix "
            "time; not a run that raised or that a replica without the lease skipped)",
            ["sweep"], registry=r)
        self.sweeps_failed = Counter(
            "clusterbot_sweeps_failed", "Scheduled sweep runs that raised (AI Reserve or the "
            "database failing them)", ["sweep"], registry=r)
        self.lease_holder = Gauge(
            "clusterbot_sweeps_lease_holder", "1 on the replica holding the sweeps lease (the "
            "one that sweeps), 0 elsewhere", registry=r)
        self.build_info = Gauge("clusterbot_build_info", "This build's version and the git "
                                "commit it was made from (always 1)", ["version", "commit"],
                                registry=r)
        self.build_info.labels(version=version(), commit=commit()).set(1)
        self.ack_seconds = Histogram(
            "clusterbot_ack_seconds", "From a Slack request's arrival to its ack", ["kind"],
            buckets=ACK_BUCKETS, registry=r)
        self.clusters = Gauge("clusterbot_clusters", "Clusters the bot tracks, by state",
                              ["state"], registry=r)
        self.burn = Gauge("clusterbot_burn_cents_per_hour", "The locked hourly rates of every "
                          "cluster billing now (running + degraded), in cents", registry=r)
        self.month_accrued = Gauge("clusterbot_month_accrued_cents", "What the clusters "
                                   "accrued this calendar month (UTC), in cents", registry=r)
        self.outbox_pending = Gauge("clusterbot_outbox_pending", "Slack posts not delivered "
                                    "yet (notices and other posts)", registry=r)
        self.outbox_oldest = Gauge("clusterbot_outbox_oldest_seconds", "Age of the oldest "
                                   "undelivered Slack post (0 when none)", registry=r)
        self.slack_paced = Gauge("clusterbot_slack_paced_calls", "Slack calls through the "
                                 "pacer since start, by kind: tried (sent), held (waited their "
                                 "turn), refused (429), pauses (shared Retry-After pauses)",
                                 ["kind"], registry=r)
        self.reachable = Gauge(
            "clusterbot_reachable", "1 while the service answers (or has failed for less than "
            "UNREACHABLE_BUDGET_SECONDS), 0 once it has failed for longer", ["service"],
            registry=r)
        self.unreachable_seconds = Gauge(
            "clusterbot_unreachable_seconds", "Seconds the service has failed in a row (no "
            "answer or 5xx; 0 while it answers)", ["service"], registry=r)
        self.poll_interval = Gauge("clusterbot_poll_interval_seconds", "POLL_INTERVAL_SECONDS",
                                   registry=r)
        self.poll_interval.set(poll_interval_seconds)
        for state in ClusterState:
            self.clusters.labels(state=state.value)
        for name in SWEEPS:
            self.sweeps_failed.labels(sweep=name)

    def watch(self, reach: Reachability) -> None:
        """Export a service's reachability (read at scrape time)."""
        self.reachable.labels(service=reach.name).set_function(
            lambda: float(reach.reachable()))
        self.unreachable_seconds.labels(service=reach.name).set_function(reach.failing_for)

    # -- fed as things happen --------------------------------------------------------------

    def provider_request(self, route: str, status: str) -> None:
        self.provider_requests.labels(route=route, status=status).inc()

    def slack_call(self, method: str, outcome: str) -> None:
        self.slack_calls.labels(method=method, outcome=outcome).inc()

    def sweep(self, name: str, seconds: float) -> None:
        self.sweep_seconds.labels(sweep=name).observe(seconds)
        self.last_sweep.labels(sweep=name).set(time.time())

    def sweep_failed(self, name: str) -> None:
        self.sweeps_failed.labels(sweep=name).inc()

    def ack(self, kind: str, seconds: float) -> None:
        self.ack_seconds.labels(kind=kind).observe(seconds)

    # -- read at scrape time ---------------------------------------------------------------

    async def refresh(self) -> None:
        now = self._clock.now()
        start, end = spend.month_bounds(None, now)
        async with self._db.transaction() as repos:
            states = await gauges.clusters_by_state(repos.session)
            burn = await gauges.burn_cents_per_hour(repos.session)
            backlog = await gauges.outbox_backlog(repos.session)
            failing = await gauges.refresh_failing(repos.session)
            unreachable = await gauges.undeliverable_by_reason(repos.session)
            month = await repos.clusters.list_in_period(start, end)
        for state in ClusterState:
            self.clusters.labels(state=state.value).set(states.get(state.value, 0))
        self.burn.set(burn)
        self.month_accrued.set(sum(spend.accrued_in(c, start, end) for c in month))
        self.outbox_pending.set(backlog.pending)
        self.token_refresh_failing.set(failing)
        self.slack_unreachable_targets.clear()
        for code in ("is_archived", "not_in_channel", *unreachable):
            self.slack_unreachable_targets.labels(reason=code).set(unreachable.get(code, 0))
        ages = [0.0]
        if backlog.oldest_post is not None:
            ages.append((wall_clock() - backlog.oldest_post).total_seconds())
        if backlog.oldest_notice is not None:
            ages.append((now - backlog.oldest_notice).total_seconds())
        self.outbox_oldest.set(max(ages))

    async def serve(self, _: web.Request) -> web.Response:
        try:
            await self.refresh()
        except StorageUnavailable:  # an outage, logged once where it was seen; the gauges
            pass  # keep their last value and the counters still answer
        except Exception as exc:  # the counters still answer; the gauges keep their last value
            log.warning("metrics: could not read the database (%s)", type(exc).__name__)
        return web.Response(body=generate_latest(self.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self.serve)


def slack_outcome(error: str | None) -> str:
    if error is None:
        return "ok"
    if error in (answers.UNREADABLE, answers.NO_ANSWER):
        return "unreadable" if error == answers.UNREADABLE else "failed"
    if error in TOKEN_ERRORS:
        return "token_refused"
    return "ratelimited" if error in ("ratelimited", "rate_limited") else "error"


class CountingWebClient(AsyncWebClient):
    """The Slack Web API client, counting each call by method and outcome (after retries).
    What it reads of a failure never raises: bot/slack/answers.py made it Slack-shaped."""

    metrics: Metrics | None = None
    reach: Reachability | None = None  # Slack's reachability (/readyz), from these outcomes

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        try:
            response = await super().api_call(api_method, **kwargs)
        except Exception as exc:
            self._failed(api_method, exc)
            raise
        self._count(api_method, "ok")
        self._reached(response.status_code, None)
        return response

    def _failed(self, method: str, exc: Exception) -> None:
        try:
            code = answers.error_code(exc)
            self._count(method, slack_outcome(code or answers.NO_ANSWER))
            status = getattr(getattr(exc, "response", None), "status_code", None)
            status = status if isinstance(status, int) else None
            self._reached(status, type(exc).__name__ if status is None else None)
        except Exception:  # counting must never replace the call's own error
            log.exception("could not count a Slack call's failure")

    def _reached(self, status: int | None, error: str | None) -> None:
        if self.reach is not None:
            reachability.slack_outcome(self.reach, status=status, error=error)

    def _count(self, method: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.slack_call(method, outcome)
