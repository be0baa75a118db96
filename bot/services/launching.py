"""Launching: from an approved request to exactly one cluster at exactly the approved price.

The order is the whole point:
1. approval stored the idempotency key with the request (`approved`);
2. `approved → launching` is a compare-and-set: one worker wins, every other click, retry or
   replica stops here;
3. only then is the provider called, with the request's key and the quote-bound fields repeated,
   so the provider itself refuses any price other than the quoted one (`price_changed`);
4. the cluster is recorded (insert-if-absent) and the request marked `launched`.
A crash between 3 and 4 leaves the request `launching`: `resume()` calls the provider again with
the same key, which replays the original launch instead of making a second one.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from bot.clock import Clock
from bot.domain.errors import DomainError
from bot.domain.models import LaunchRequest, QuoteInfo, RequestStatus
from bot.domain.ports import Notifier
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.reserve.schemas import Cluster, Shape
from bot.services.approvals import Judge, reprice
from bot.services.audit import AuditLog
from bot.services.observing import record_from_wire
from bot.services.quoting import QuotingService
from storage.db import Database

log = logging.getLogger(__name__)

# A `launching` request untouched this long is presumed orphaned by a crashed worker.
LAUNCH_LEASE = timedelta(minutes=10)


class LaunchService:
    def __init__(self, *, db: Database, provider: ClusterProvider, quoting: QuotingService,
                 notifier: Notifier, audit: AuditLog, clock: Clock) -> None:
        self._db = db
        self._audit = audit
        self.judge: Judge | None = None  # the spend policy's verdict on a new price (runtime)
        self._provider = provider
        self._quoting = quoting
        self._notifier = notifier
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()

    # --- scheduling -----------------------------------------------------------------------

    def launch_soon(self, request_id: str) -> None:
        """Start the launch in the background: the Slack click has already been acked."""
        task = asyncio.create_task(self.launch(request_id), name=f"launch {request_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def drain(self) -> None:
        """Wait for launches in flight (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # --- the launch -----------------------------------------------------------------------

    async def launch(self, request_id: str) -> None:
        async with self._db.transaction() as repos:
            claimed = await repos.requests.transition(
                request_id, from_=[RequestStatus.APPROVED], to=RequestStatus.LAUNCHING,
                now=self._clock.now(),
            )
        if claimed is None:
            return  # someone else launches it, or it isn't approved
        await self._notifier.refresh_request(request_id)
        await self._launch_claimed(claimed)

    async def resume(self, *, at_start: bool = False) -> int:
        """Carry on launches a crash interrupted, and approved ones nobody started."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            approved = await repos.requests.list_by_status([RequestStatus.APPROVED])
            stale = await repos.requests.list_by_status(
                [RequestStatus.LAUNCHING], updated_before=None if at_start else now - LAUNCH_LEASE)
        for request in approved:
            await self.launch(request.id)
        for request in stale:
            async with self._db.transaction() as repos:  # renew the lease before calling out
                renewed = await repos.requests.transition(
                    request.id, from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHING,
                    now=self._clock.now())
            if renewed is not None:
                await self._launch_claimed(renewed)
        return len(approved) + len(stale)

    async def _launch_claimed(self, request: LaunchRequest) -> None:
        async with self._db.transaction() as repos:
            quote = await repos.quotes.get(request.quote_id)
        assert quote is not None and request.idempotency_key is not None
        if quote.is_expired(self._clock.now()):
            await self._requote(request, reason="expired before the launch")
            return
        spec = quote.spec
        w = request.workload
        try:
            cluster = await self._provider.launch_cluster(
                quote.id, idempotency_key=request.idempotency_key,
                name=w.name, image=w.image, docker_start_cmd=list(w.docker_start_cmd) or None,
                env=dict(w.env) or None, ports=list(w.ports) or None,
                ssh_keys=list(w.ssh_keys) or None, auto_recovery=w.auto_recovery,
                # Repeat every priced field: the provider refuses a launch at any other price.
                shape=Shape(accelerator=spec.shape.accelerator,
                            gpus_per_node=spec.shape.gpus_per_node, nodes=spec.shape.nodes),
                location=spec.location, root_disk_gb=spec.root_disk_gb,
                storage_gb=spec.storage_gb, volume_id=spec.volume_id,
            )
        except (api.PriceChanged, api.QuoteExpired) as exc:
            await self._requote(request, reason="price changed" if isinstance(
                exc, api.PriceChanged) else "expired")
            return
        except api.QuoteConsumed as exc:
            # Our own earlier launch whose replay window lapsed: adopt what it made.
            if exc.cluster_id is None:
                await self._fail(request, "AI Reserve says this quote was already used.")
                return
            try:
                cluster = await self._provider.get_cluster(exc.cluster_id)
            except api.ApiError:
                await self._keep_trying(request, "the quote was used; reading that cluster "
                                                 "failed, will retry")
                return
        except (api.CapacityUnavailable, api.PaymentRequired) as exc:
            await self._launch_failed(request, _why(exc))
            return
        except (api.ServerError, api.TransportError, api.RateLimited,
                api.IdempotencyKeyInUse) as exc:
            # The outcome is unknown: keep `launching`; the same key is sent again later.
            await self._keep_trying(request, f"AI Reserve didn't confirm the launch ({exc.code}); "
                                             "retrying with the same request key")
            return
        except api.ApiError as exc:
            await self._fail(request, f"AI Reserve refused the launch: {exc.message}")
            return
        await self._record(request, quote, cluster)

    async def _record(self, request: LaunchRequest, quote: QuoteInfo, cluster: Cluster) -> None:
        now = self._clock.now()
        record = record_from_wire(cluster, owner_id=request.requester_id,
                                  channel_id=request.channel_id, request_id=request.id,
                                  accelerator_name=quote.accelerator_name, now=now)
        record = record.model_copy(update={"lifetime_hours": request.lifetime_hours})
        async with self._db.transaction() as repos:
            await repos.clusters.add(record)
            await repos.requests.transition(
                request.id, from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHED, now=now,
                cluster_id=cluster.id, last_error=None)
        await self._audit.write(actor=None, action="launch", subject_id=cluster.id,
                                outcome="ok", amount_cents=cluster.locked_rate.hourly_cents,
                                idempotency_key=request.idempotency_key,
                                detail=f"launched from quote {quote.id} for request {request.id}")
        if cluster.locked_rate.hourly_cents != request.hourly_cents:
            # Never expected (the quote-bound fields were repeated), but money comes first:
            # a cluster at a price nobody approved is terminated before it can bill.
            log.error("cluster %s locked %s¢/h but %s¢/h was approved; terminating",
                      cluster.id, cluster.locked_rate.hourly_cents, request.hourly_cents)
            await self._provider.terminate_cluster(cluster.id)
            await self._notifier.tell(request.requester_id, f"`{cluster.id}` came up at a rate "
                                      "nobody approved, so I terminated it before it billed.")
        await self._notifier.refresh_request(request.id)

    async def _requote(self, request: LaunchRequest, *, reason: str) -> None:
        try:
            assert self.judge is not None
            await reprice(request, reason=reason, db=self._db, quoting=self._quoting,
                          notifier=self._notifier, clock=self._clock, judge=self.judge)
        except DomainError as exc:
            await self._launch_failed(request, f"The quote {reason} and re-pricing failed: "
                                               f"{exc.user_message}")

    async def _launch_failed(self, request: LaunchRequest, why: str) -> None:
        await self._set(request, RequestStatus.LAUNCH_FAILED, why)
        await self._notifier.tell(request.requester_id, f"Your launch request `{request.id}` "
                                  f"didn't launch: {why} It is kept; retry from the card.")

    async def _fail(self, request: LaunchRequest, why: str) -> None:
        await self._set(request, RequestStatus.FAILED, why)

    async def _keep_trying(self, request: LaunchRequest, why: str) -> None:
        async with self._db.transaction() as repos:
            await repos.requests.update(request.id, now=self._clock.now(), last_error=why)
        await self._notifier.refresh_request(request.id)

    async def _set(self, request: LaunchRequest, status: RequestStatus, why: str) -> None:
        await self._audit.write(actor=None, action="launch", subject_id=request.id,
                                outcome="failed", amount_cents=request.hourly_cents, detail=why,
                                idempotency_key=request.idempotency_key)
        async with self._db.transaction() as repos:
            await repos.requests.transition(request.id, from_=[RequestStatus.LAUNCHING],
                                            to=status, now=self._clock.now(), last_error=why)
        await self._notifier.refresh_request(request.id)


def _why(exc: api.ApiError) -> str:
    if isinstance(exc, api.CapacityUnavailable):
        placeable, where = exc.nodes_placeable, exc.location or "that location"
        return (f"AI Reserve couldn't place every node together in {where}"
                + (f" (only {placeable} fit right now)." if placeable is not None else ".")
                + " Nothing was launched or billed.")
    return f"AI Reserve needs the account topped up first ({exc.message})."
