"""Launching: from an approved request to exactly one cluster at exactly the approved price.

A launch is a saga with one owner, and every step is on disk before the next:
1. approval stored the idempotency key with the request (`approved`);
2. `approved → launching` is a compare-and-set, and the SAME transaction stores the launch
   intent: the key and the exact body (`bot/domain/launch.py`). One worker wins; every other
   click, retry or replica stops here;
3. only then is the provider called, with that key and body. Every quote-bound field is
   repeated, so the provider itself refuses any price other than the quoted one;
4. the cluster is linked to the request (`linking.py`: the same row whether this launch or a
   sweep that saw the cluster's `quoteId` lands first) and the request marked `launched`.

Whatever interrupts it — a crash, a stop, a timeout, an unconfirmed answer — the launch is
RESOLVED before anything else is decided: the stored intent is replayed (same key, same body),
and the cluster is looked up by the quotes the request ever held (`launchedClusterId`). Only
when AI Reserve says the quote can no longer launch AND no cluster came from any of the
request's quotes is the request re-priced. A quote launches at most once at AI Reserve, so a
fresh key (used only once a key's answer is a stored 5xx and no cluster exists) can never make
a second cluster either. A `launching` request nobody has touched for `LAUNCH_LEASE` is picked
up by the next `resume()` (every `RESUME_SECONDS`), so an unconfirmed launch is settled within
a minute; the requester's progress message shows each step (`last_error`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from bot.clock import Clock
from bot.domain import stock
from bot.domain.errors import DomainError, StorageUnavailable
from bot.domain.launch import IntentState, LaunchBody, LaunchIntent
from bot.domain.models import LaunchRequest, RequestStatus
from bot.domain.ports import Notifier
from bot.reserve import errors as api
from bot.reserve.port import MAX_PAGE_SIZE, ClusterProvider
from bot.reserve.schemas import Cluster
from bot.services.approvals import Judge, reprice
from bot.services.audit import AuditLog
from bot.services.launch_call import call_kwargs, refusal
from bot.services.linking import link_cluster
from bot.services.quoting import QuotingService
from storage.db import Database
from storage.repositories import Repos
from storage.sealing import UnreadableSecret

log = logging.getLogger(__name__)

# A `launching` request untouched this long is presumed orphaned (its worker crashed, stopped
# or gave up for now) and is resolved by the next resume pass.
LAUNCH_LEASE = timedelta(seconds=30)
# Provider launch calls one worker makes in one pass before it leaves the rest to the next.
MAX_CALLS_PER_PASS = 3


class _Unknown:
    """The lookup itself failed: whether a cluster exists is not known yet."""


UNKNOWN = _Unknown()
Found = Cluster | None | _Unknown


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
        self._running: set[str] = set()  # request ids this process is launching right now

    # --- scheduling -----------------------------------------------------------------------

    def launch_soon(self, request_id: str) -> None:
        """Start the launch in the background: the Slack click has already been acked."""
        task = asyncio.create_task(self._launch_soon(request_id), name=f"launch {request_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _launch_soon(self, request_id: str) -> None:
        # A database outage: logged once by the database; the resume sweep carries on.
        with contextlib.suppress(StorageUnavailable):
            await self.launch(request_id)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def drain(self) -> None:
        """Wait for launches in flight (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # --- claiming -------------------------------------------------------------------------

    async def launch(self, request_id: str) -> None:
        """Claim an approved request and launch it (a no-op unless it is `approved`)."""
        with self._mine(request_id) as mine:
            if not mine:
                return  # this process is launching it already
            async with self._db.transaction() as repos:
                claimed = await repos.requests.transition(
                    request_id, from_=[RequestStatus.APPROVED], to=RequestStatus.LAUNCHING,
                    now=self._clock.now(), last_error=None)
                if claimed is None:
                    return  # someone else launches it, or it isn't approved
                intent = await self._intent(repos, claimed)
            # The intent is on disk: AI Reserve is called while Slack is told (paced: seconds).
            shown = asyncio.create_task(self._notifier.refresh_request(request_id))
            try:
                await self._saga(claimed, intent)
            finally:
                await shown

    async def resume(self, *, at_start: bool = False) -> int:
        """Resolve launches a crash, stop or timeout left unconfirmed; start approved ones
        nobody started. At start every `launching` request is resolved at once; later only
        those nobody touched for `LAUNCH_LEASE` (claimed again by compare-and-set)."""
        now = self._clock.now()
        cutoff = None if at_start else now - LAUNCH_LEASE
        async with self._db.transaction() as repos:
            approved = await repos.requests.list_by_status([RequestStatus.APPROVED])
            stale = await repos.requests.list_by_status([RequestStatus.LAUNCHING],
                                                        updated_before=cutoff)
        for request in approved:
            await self.launch(request.id)
        resumed = 0
        for request in stale:
            # Marked before the renew: at start the renew has no cutoff, so a second resume in
            # this process (the scheduler's, during start's) would otherwise renew it as well.
            with self._mine(request.id) as mine:
                if not mine:
                    continue  # this process is on it
                async with self._db.transaction() as repos:  # renew the lease, then call out
                    renewed = await repos.requests.transition(
                        request.id, from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHING,
                        now=self._clock.now(), updated_before=cutoff)
                    intent = None if renewed is None else await self._intent(repos, renewed)
                if renewed is not None and intent is not None:
                    resumed += 1
                    await self._saga(renewed, intent)
        return len(approved) + resumed

    @contextlib.contextmanager
    def _mine(self, request_id: str) -> Iterator[bool]:
        """Mark `request_id` launching in this process for the block (False if it already is):
        checked and marked with no await between, before any claim, renew or call."""
        if request_id in self._running:
            yield False
            return
        self._running.add(request_id)
        try:
            yield True
        finally:
            self._running.discard(request_id)

    async def _intent(self, repos: Repos, request: LaunchRequest) -> LaunchIntent:
        """The request's stored intent under its key; written now if there is none yet (the
        claim's transaction, or a launch claimed before intents were stored)."""
        key = request.idempotency_key
        assert key is not None  # approval and retry set it with `approved`
        stored = await repos.launches.get(key)
        if stored is not None:
            return stored
        quote = await repos.quotes.get(request.quote_id)
        assert quote is not None
        now = self._clock.now()
        return await repos.launches.add(LaunchIntent(
            idempotency_key=key, request_id=request.id, quote_id=quote.id,
            body=LaunchBody.of(request, quote), created_at=now, updated_at=now))

    # --- the saga -------------------------------------------------------------------------

    async def _saga(self, request: LaunchRequest, intent: LaunchIntent) -> None:
        for _ in range(MAX_CALLS_PER_PASS):
            try:
                kwargs = call_kwargs(intent.body)
            except UnreadableSecret as exc:  # no call made: nothing was launched or billed
                await self._fail(request, intent, f"The launch can't be sent: {exc}. "
                                 "Nothing was launched; request it again.")
                return
            try:
                cluster = await self._provider.launch_cluster(
                    intent.body.quote_id, idempotency_key=intent.idempotency_key, **kwargs)
            except api.QuoteConsumed as exc:
                # Our own earlier launch (its replay window lapsed, or another key): adopt it.
                found = (await self._cluster(exc.cluster_id) if exc.cluster_id
                         else await self._lookup(request))
                await self._settle(request, found, why="AI Reserve says this quote was "
                                   "already launched; reading that cluster failed, will retry")
                return
            except (api.CapacityUnavailable, api.PaymentRequired) as exc:
                await self._launch_failed(request, intent, refusal(exc),
                                          capacity=isinstance(exc, api.CapacityUnavailable))
                return
            except (api.QuoteExpired, api.PriceChanged) as exc:
                # This quote can no longer launch. Did an earlier call make a cluster anyway?
                reason = "expired" if isinstance(exc, api.QuoteExpired) else "price changed"
                await self._step(request, f"The quote {reason}; checking that no cluster was "
                                          "launched from it before pricing again")
                found = await self._lookup(request)
                if found is None:
                    await self._requote(request, intent, reason=reason)
                else:
                    await self._settle(request, found, why=f"the quote {reason}; AI Reserve "
                                       "didn't answer the check for an earlier launch, will retry")
                return
            except (api.TransportError, api.RateLimited, api.ServiceUnavailable,
                    api.IdempotencyKeyInUse) as exc:
                # Not now (overload, a call still in flight, no answer): the same key later.
                found = await self._lookup(request)
                if isinstance(found, Cluster):
                    await self._record(request, found)
                    return
                await self._step(request, f"AI Reserve didn't confirm the launch ({exc.code}); "
                                          "retrying with the same request key shortly")
                return
            except api.ServerError as exc:
                # An answer from after execution began (contract §8): a replay of this key
                # may give back the same 5xx for ever, so count them.
                async with self._db.transaction() as repos:
                    intent = await repos.launches.count_server_error(
                        intent.idempotency_key, now=self._clock.now())
                await self._step(request, f"AI Reserve answered {exc.status} to the launch; "
                                          "looking for a cluster made from this request's quotes")
                found = await self._lookup(request)
                if found is not None:
                    await self._settle(request, found, why=f"AI Reserve answered {exc.status} "
                                       "and the cluster lookup failed; will retry")
                    return
                if intent.server_errors >= 2:
                    # The key's answer is a stored 5xx and no cluster exists: a fresh key.
                    fresh = await self._rekey(request, intent)
                    if fresh is None:
                        return  # another worker moved this launch on
                    request, intent = fresh
                else:
                    await self._step(request, f"AI Reserve answered {exc.status} and no "
                                              "cluster exists; sending the same launch again")
                continue
            except api.ApiError as exc:
                await self._fail(request, intent, f"AI Reserve refused the launch: {exc.message}")
                return
            await self._record(request, cluster)
            return
        await self._step(request, "AI Reserve didn't confirm the launch; retrying shortly")

    async def _settle(self, request: LaunchRequest, found: Found, *, why: str) -> None:
        if isinstance(found, Cluster):
            await self._record(request, found)
        else:
            await self._step(request, why)

    async def _cluster(self, cluster_id: str) -> Found:
        try:
            return await self._provider.get_cluster(cluster_id)
        except api.ApiError as exc:
            log.warning("reading launched cluster %s failed: %s", cluster_id, exc.code)
            return UNKNOWN

    async def _lookup(self, request: LaunchRequest) -> Found:
        """The cluster made from any quote `request` ever held: None if there is none, UNKNOWN
        if AI Reserve couldn't tell. Each quote says which cluster it launched (contract §2.2);
        a quote AI Reserve no longer knows is looked for in the cluster listing instead."""
        async with self._db.transaction() as repos:
            quote_ids = await repos.request_quotes.quotes_of(request.id)
        unknown_quotes = False
        try:
            for quote_id in quote_ids:
                try:
                    quote = await self._provider.get_quote(quote_id)
                except api.NotFound:
                    unknown_quotes = True
                    continue
                if quote.launched_cluster_id is not None:
                    return await self._cluster(quote.launched_cluster_id)
            if unknown_quotes:
                async for wire in self._provider.iter_clusters(page_size=MAX_PAGE_SIZE):
                    if wire.quote_id in quote_ids:
                        return wire
        except api.ApiError as exc:
            log.warning("looking up the cluster of %s failed: %s", request.id, exc.code)
            return UNKNOWN
        return None

    async def _rekey(self, request: LaunchRequest,
                     intent: LaunchIntent) -> tuple[LaunchRequest, LaunchIntent] | None:
        """Replace a key whose stored answer is a 5xx (compare-and-set on the key)."""
        now, key = self._clock.now(), str(uuid.uuid4())
        async with self._db.transaction() as repos:
            moved = await repos.requests.transition(
                request.id, from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHING, now=now,
                idempotency_key_was=intent.idempotency_key, idempotency_key=key,
                last_error="AI Reserve keeps answering this launch with an error and no cluster "
                           "exists; launching again with a fresh request key")
            if moved is None:
                return None
            await repos.launches.update(intent.idempotency_key, now=now,
                                        state=IntentState.SUPERSEDED)
            fresh = await repos.launches.add(intent.model_copy(update={
                "idempotency_key": key, "state": IntentState.OPEN, "server_errors": 0,
                "cluster_id": None, "created_at": now, "updated_at": now}))
        await self._audit.write(actor=None, action="launch", subject_id=request.id,
                                outcome="rekeyed", amount_cents=request.hourly_cents,
                                idempotency_key=key,
                                detail=f"no cluster from quote {intent.quote_id} after a stored "
                                       f"5xx under key {intent.idempotency_key}")
        await self._notifier.refresh_request(request.id)
        return moved, fresh

    # --- outcomes -------------------------------------------------------------------------

    async def _record(self, request: LaunchRequest, cluster: Cluster) -> None:
        async with self._db.transaction() as repos:
            quote = (await repos.quotes.get(cluster.quote_id)
                     or await repos.quotes.get(request.quote_id))
        assert quote is not None
        await link_cluster(db=self._db, clock=self._clock, wire=cluster, request=request,
                           accelerator_name=quote.accelerator_name)
        await self._audit.write(actor=None, action="launch", subject_id=cluster.id,
                                outcome="ok", amount_cents=cluster.locked_rate.hourly_cents,
                                idempotency_key=request.idempotency_key,
                                detail=f"launched from quote {cluster.quote_id} for request "
                                       f"{request.id}")
        if cluster.locked_rate.hourly_cents != quote.hourly_cents:
            # Never expected (the quote-bound fields were repeated), but money comes first:
            # a cluster at a price nobody approved is terminated before it can bill.
            log.error("cluster %s locked %s¢/h but %s¢/h was approved; terminating",
                      cluster.id, cluster.locked_rate.hourly_cents, quote.hourly_cents)
            await self._provider.terminate_cluster(cluster.id)
            await self._notifier.tell(request.requester_id, f"`{cluster.id}` came up at a rate "
                                      "nobody approved, so I terminated it before it billed.")
        await self._notifier.refresh_request(request.id)

    async def _requote(self, request: LaunchRequest, intent: LaunchIntent, *,
                       reason: str) -> None:
        await self._close(intent, IntentState.FAILED)
        try:
            assert self.judge is not None
            await reprice(request, reason=reason, db=self._db, quoting=self._quoting,
                          notifier=self._notifier, clock=self._clock, judge=self.judge,
                          audit=self._audit)
        except DomainError as exc:
            async with self._db.transaction() as repos:
                now = await repos.requests.get(request.id)
            if now is not None and now.status is not RequestStatus.LAUNCHING:
                return  # resolved meanwhile (a sweep linked its cluster): nothing to re-price
            await self._set(request, RequestStatus.LAUNCH_FAILED,
                            f"The quote {reason} and re-pricing failed: {exc.user_message}")

    async def _launch_failed(self, request: LaunchRequest, intent: LaunchIntent,
                             why: str, *, capacity: bool = False) -> None:
        await self._close(intent, IntentState.FAILED)
        # A request asked to wait for stock goes (back) to its wait (bot/services/stock.py).
        wait = stock.start_waiting(request, now=self._clock.now()) if capacity else None
        if wait is not None:
            if await self._set(request, RequestStatus.WAITING, why, **wait):
                await self._notifier.tell(request.requester_id, f"No stock for your launch "
                                          f"request `{request.id}` yet: {why} Waiting for it "
                                          f"until {wait['wait_until']:%Y-%m-%d %H:%M} UTC.")
        elif await self._set(request, RequestStatus.LAUNCH_FAILED, why):
            await self._notifier.tell(request.requester_id, f"Your launch request "
                                      f"`{request.id}` didn't launch: {why} It is kept; retry "
                                      "from the card.")

    async def _fail(self, request: LaunchRequest, intent: LaunchIntent, why: str) -> None:
        await self._close(intent, IntentState.FAILED)
        await self._set(request, RequestStatus.FAILED, why)

    async def _close(self, intent: LaunchIntent, state: IntentState) -> None:
        async with self._db.transaction() as repos:
            await repos.launches.update(intent.idempotency_key, now=self._clock.now(),
                                        state=state)

    async def _step(self, request: LaunchRequest, why: str) -> None:
        """Tell the requester where the launch is (and renew the lease: someone is on it)."""
        async with self._db.transaction() as repos:
            moved = await repos.requests.transition(
                request.id, from_=[RequestStatus.LAUNCHING], to=RequestStatus.LAUNCHING,
                now=self._clock.now(), last_error=why)
        if moved is not None:
            await self._notifier.refresh_request(request.id)

    async def _set(self, request: LaunchRequest, status: RequestStatus, why: str,
                   **fields: Any) -> bool:
        async with self._db.transaction() as repos:
            moved = await repos.requests.transition(
                request.id, from_=[RequestStatus.LAUNCHING], to=status, now=self._clock.now(),
                last_error=why, **fields)
        if moved is None:
            return False  # resolved meanwhile
        await self._audit.write(actor=None, action="launch", subject_id=request.id,
                                outcome="failed", amount_cents=request.hourly_cents, detail=why,
                                idempotency_key=request.idempotency_key)
        await self._notifier.refresh_request(request.id)
        return True
