"""Waiting for stock (bot/domain/stock.py has the rules).

A request waits in `waiting`: approved at its rate, holding its room in the budgets, never
launching by itself. One sweep (every minute, on the replica holding the sweeps' lease) finds
the waiters that are due, groups them by shape and location and CLAIMS each group in the
database before calling out — a compare-and-set on each request's count of re-quotes
(`wait_checks`) that also moves its next re-quote on — so two replicas, or a restart
mid-round, never re-quote one group twice per round. One quote per group answers for all its
waiters. With stock:

- at a rate within the approved one, each waiter gets its own fresh quote (a quote launches
  once) and moves `waiting → approved` on it with a fresh launch key (a compare-and-set: a
  withdraw at the same instant wins or loses whole); the launch saga then launches it exactly
  once, as any approved request (bot/services/launching.py) — resumed after a crash like one;
- at a higher rate the request is priced again and put back in front of the approvers with
  the difference (`reprice`, the approval card flow).

A launch that finds no capacity again goes back to the same wait. A wait that ends without
stock leaves the request `launch_failed` (kept for a retry) and tells the requester.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict, deque
from datetime import datetime, timedelta
from typing import Unpack

from bot.domain import stock as rules
from bot.domain.errors import Conflict, DomainError, NotAllowed, UnknownResource
from bot.domain.models import Actor, LaunchRequest, QuoteInfo, RequestStatus
from bot.domain.policy import money
from bot.domain.ports import Notifier
from bot.services import stakes
from bot.services.acting import ActingService, Basics
from bot.services.approvals import Judge, reprice
from bot.services.audit import audited
from bot.services.deciding import LaunchScheduler
from bot.services.quoting import QuotingService

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)


class StockService(ActingService):
    """`/cluster wait`, **Wait for stock**, `/cluster waiting` and the stock sweep."""

    def __init__(self, *, quoting: QuotingService, notifier: Notifier, launcher: LaunchScheduler,
                 **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._quoting = quoting
        self._notifier = notifier
        self._launcher = launcher
        self.judge: Judge | None = None  # the spend policy's verdict (set by the runtime)
        self.probes = 0  # provider quote calls made to look for stock (the bench reads it)
        # When this process's recent stock quotes were made: the allowance is per minute of the
        # clock however often the sweep runs (only the replica holding the sweeps lease sweeps).
        self._recent: deque[datetime] = deque()

    # --- asking to wait -------------------------------------------------------------------

    def max_hours(self) -> int:
        return self._people.policy.max_stock_wait_hours

    def check_hours(self, raw: str | int | None) -> int:
        return rules.check_wait_hours(raw, max_hours=self.max_hours())

    @audited("wait", subject="request_id", stake=stakes.request_rate)
    async def wait(self, *, request_id: str, hours: str | int | None,
                   actor: Actor) -> LaunchRequest:
        """The requester's launch failed for capacity: wait for stock up to `hours`."""
        checked = self.check_hours(hours)
        now = self._clock.now()
        async with self._db.transaction() as repos:
            request = await repos.requests.get(request_id)
            if request is None:
                raise UnknownResource("launch request", request_id)
            if request.requester_id != actor.user_id:
                raise NotAllowed(f"Only the requester, <@{request.requester_id}>, can make "
                                 f"`{request.id}` wait for stock.")
            if request.status is RequestStatus.LAUNCH_FAILED \
                    and not rules.failed_for_capacity(request):
                raise Conflict(f"`{request.id}` didn't fail for want of stock "
                               f"({request.last_error}); waiting won't help: retry it once "
                               "that is fixed.")
            fields = rules.start_waiting(request.model_copy(update={"wait_until": None}),
                                         now=now, hours=checked)
            assert fields is not None  # a fresh wait of ≥ 1 h always starts
            moved = await repos.requests.transition(
                request_id, from_=[RequestStatus.LAUNCH_FAILED], to=RequestStatus.WAITING,
                now=now, quote_id=request.quote_id, **{**fields, "wait_next_at": now})
            if moved is None:  # once: a repeated press or command finds it waiting already
                until = (f" until {request.wait_until:%Y-%m-%d %H:%M} UTC"
                         if request.wait_until else "")
                raise Conflict(f"`{request.id}` is already waiting for stock{until}."
                               if request.status is RequestStatus.WAITING else
                               f"`{request.id}` is {request.status.value}: only a request "
                               "whose launch failed can wait for stock.")
        await self._notifier.refresh_request(request_id)
        return moved

    async def waiting(self) -> list[LaunchRequest]:
        """Every request waiting for stock, the soonest deadline first."""
        async with self._db.transaction() as repos:
            found = await repos.requests.list_by_status([RequestStatus.WAITING])
        return sorted(found, key=lambda r: (r.wait_until or r.updated_at, r.id))

    async def waiting_with_quotes(self, *, requester: str | None = None
                                  ) -> list[tuple[LaunchRequest, QuoteInfo]]:
        """The waits (`requester`'s only, if given) with the quote each holds."""
        found, waiting = [], await self.waiting()
        async with self._db.transaction() as repos:
            for request in waiting:
                quote = await repos.quotes.get(request.quote_id)
                if quote is not None and requester in (None, request.requester_id):
                    found.append((request, quote))
        return found

    # --- the sweep ------------------------------------------------------------------------

    async def sweep(self) -> int:
        """End the waits that are over; re-quote each due shape once; launch or ask again.
        Returns the provider quote calls made."""
        now = self._clock.now()
        waiters = await self.waiting()
        for request in waiters:
            if rules.has_expired(request, now):
                await self._expire(request)
        due = [r for r in waiters if not rules.has_expired(r, now) and rules.is_due(r, now)]
        groups: dict[rules.ShapeKey, list[tuple[LaunchRequest, QuoteInfo]]] = defaultdict(list)
        async with self._db.transaction() as repos:
            for request in due:
                quote = await repos.quotes.get(request.quote_id)
                if quote is not None:
                    groups[rules.shape_key(quote.spec, quote.location)].append((request, quote))
        while self._recent and self._recent[0] <= now - MINUTE:
            self._recent.popleft()
        allowance = rules.MAX_QUOTES_PER_MINUTE - len(self._recent)
        calls = 0
        # The group that has waited longest for a look goes first; the rest wait for the next
        # sweep (they stay due), so a burst of shapes — or of waiters finding stock, each
        # needing its own quote and launch — never exceeds the per-sweep allowance.
        ordered = sorted(groups.values(), key=lambda g: min(r.wait_next_at or now for r, _ in g))
        for members in ordered:
            if calls >= allowance:
                break
            calls += await self._round(members, budget=allowance - calls)
        self._recent.extend([now] * calls)
        return calls

    async def _round(self, members: list[tuple[LaunchRequest, QuoteInfo]], *,
                     budget: int) -> int:
        """One shape in one place: claim its waiters, quote once, act on the answer (at most
        `budget` quotes; waiters beyond it are looked at again in the next sweep)."""
        claimed = await self._claim(members)
        if not claimed:
            return 0  # another replica (or an earlier round) has them
        first, first_quote = claimed[0]
        calls = 1
        self.probes += 1
        try:
            probe = await self._quoting.quote_spec(
                first_quote.spec, accelerator_name=first_quote.accelerator_name,
                requested_by=first_quote.requested_by, channel_id=first_quote.channel_id)
        except DomainError as exc:  # rate limited, unreachable …: the back-off already moved
            log.info("stock re-quote for %s failed: %s", first.id, exc.user_message)
            return calls
        if probe.availability == "none":
            return calls
        for request, quote in claimed:
            if request is first:
                fresh: QuoteInfo | None = probe
            elif calls >= budget:  # stock, but this sweep's quotes are spent: next sweep
                await self._look_again(request)
                continue
            else:
                calls += 1
                self.probes += 1
                fresh = await self._fresh(request, quote)
            if fresh is not None:
                await self._stock_found(request, fresh)
        return calls

    async def _look_again(self, request: LaunchRequest) -> None:
        """Stock showed for its shape: look again at the next sweep, not after the back-off."""
        async with self._db.transaction() as repos:
            await repos.requests.transition(
                request.id, from_=[RequestStatus.WAITING], to=RequestStatus.WAITING,
                now=self._clock.now(), wait_checks_was=request.wait_checks,
                wait_next_at=self._clock.now(), wait_checks=0)

    async def _claim(self, members: list[tuple[LaunchRequest, QuoteInfo]]
                     ) -> list[tuple[LaunchRequest, QuoteInfo]]:
        """Move each waiter's next re-quote on, if nobody touched it since it was read."""
        now = self._clock.now()
        claimed = []
        async with self._db.transaction() as repos:
            for request, quote in members:
                moved = await repos.requests.transition(
                    request.id, from_=[RequestStatus.WAITING], to=RequestStatus.WAITING,
                    now=now, quote_id=request.quote_id, wait_checks_was=request.wait_checks,
                    wait_next_at=now + rules.backoff(request.wait_checks),
                    wait_checks=request.wait_checks + 1)
                if moved is not None:
                    claimed.append((moved, quote))
        return claimed

    async def _fresh(self, request: LaunchRequest, quote: QuoteInfo) -> QuoteInfo | None:
        try:
            return await self._quoting.quote_spec(
                quote.spec, accelerator_name=quote.accelerator_name,
                requested_by=quote.requested_by, channel_id=quote.channel_id)
        except DomainError as exc:
            log.info("stock quote for %s failed: %s", request.id, exc.user_message)
            return None

    async def _stock_found(self, request: LaunchRequest, fresh: QuoteInfo) -> None:
        if not rules.within_approved(request, fresh.hourly_cents):
            await self._ask_again(request, fresh)
            return
        now = self._clock.now()
        async with self._db.transaction() as repos:
            moved = await repos.requests.transition(
                request.id, from_=[RequestStatus.WAITING], to=RequestStatus.APPROVED, now=now,
                quote_id=request.quote_id, new_quote_id=fresh.id,
                hourly_cents=fresh.hourly_cents, idempotency_key=str(uuid.uuid4()),
                last_error=None)
        if moved is None:
            return  # withdrawn, or another replica moved it, meanwhile
        await self._audit.write(actor=None, action="stock", subject_id=request.id,
                                outcome="ok", amount_cents=fresh.hourly_cents,
                                idempotency_key=moved.idempotency_key,
                                detail=f"stock in {fresh.location} at "
                                       f"{money(fresh.hourly_cents)}/h (approved "
                                       f"{money(request.hourly_cents)}/h); launching from "
                                       f"quote {fresh.id}")
        await self._notifier.tell(  # before anything the launch may say
            request.requester_id, f"Stock is back for your launch request `{request.id}`: "
            f"launching {fresh.accelerator_name} in {fresh.location} at "
            f"{money(fresh.hourly_cents)}/h (approved {money(request.hourly_cents)}/h).",
            key=f"stock/{request.id}/{fresh.id}")
        self._launcher.launch_soon(request.id)  # not behind the paced refresh (seconds)
        await self._notifier.refresh_request(request.id)

    async def _ask_again(self, request: LaunchRequest, fresh: QuoteInfo) -> None:
        """Stock, but dearer than approved: the approvers decide on the difference."""
        assert self.judge is not None
        try:
            asked = await reprice(request, reason="came back in stock at a higher rate",
                                  db=self._db, quoting=self._quoting, notifier=self._notifier,
                                  clock=self._clock, judge=self.judge,
                                  audit=self._audit)
        except DomainError as exc:
            log.info("asking again for %s failed: %s", request.id, exc.user_message)
            return
        await self._notifier.tell(
            request.requester_id, f"Stock is back for your launch request `{request.id}`, but "
            f"at {money(asked.hourly_cents)}/h, above the approved "
            f"{money(request.hourly_cents)}/h: it is back with the approvers for the "
            "difference.", key=f"stock-dearer/{request.id}/{asked.quote_id}")

    async def _expire(self, request: LaunchRequest) -> None:
        now = self._clock.now()
        why = (f"{rules.NO_STOCK_CAME} the {request.wait_hours} h wait; nothing was launched "
               "or billed.")
        async with self._db.transaction() as repos:
            moved = await repos.requests.transition(
                request.id, from_=[RequestStatus.WAITING], to=RequestStatus.LAUNCH_FAILED,
                now=now, quote_id=request.quote_id, wait_checks_was=request.wait_checks,
                wait_next_at=None, last_error=why)
        if moved is None:
            return
        await self._audit.write(actor=None, action="stock", subject_id=request.id,
                                outcome="expired", amount_cents=request.hourly_cents,
                                detail=why)
        await self._notifier.tell(request.requester_id, f"The wait for stock for your launch "
                                  f"request `{request.id}` ended: {why} It is kept; retry or "
                                  "wait again from the card.", key=f"stock-expired/{request.id}")
        await self._notifier.refresh_request(request.id)
