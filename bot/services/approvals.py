"""Launch requests and their approval: submit, approve, reject, retry.

Every decision is a compare-and-set in the database (`pending → approved`), so any number of
clicks, Slack retries or racing approvers produce one decision and one launch. What was
approved — this quote at this hourly rate — travels in the button (`ApprovalRef`) and must
still match the request, or the click is refused as stale.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Protocol

from sqlalchemy.exc import IntegrityError

from bot.clock import Clock
from bot.domain import policies
from bot.domain.errors import Conflict, UnknownResource
from bot.domain.models import (
    Actor,
    Approval,
    Decision,
    LaunchRequest,
    QuoteInfo,
    RequestStatus,
    Workload,
)
from bot.domain.ports import Notifier
from bot.services.quoting import QuotingService
from storage.db import Database
from storage.repositories import Repos


class LaunchScheduler(Protocol):
    def launch_soon(self, request_id: str) -> None: ...


class ApprovalService:
    def __init__(self, *, db: Database, quoting: QuotingService, notifier: Notifier,
                 launcher: LaunchScheduler, approvers: Collection[str], clock: Clock) -> None:
        self._db = db
        self._quoting = quoting
        self._notifier = notifier
        self._launcher = launcher
        self._approvers = frozenset(approvers)
        self._clock = clock

    async def quote_for_request(self, *, quote_id: str, actor: Actor,
                                any_state: bool = False) -> QuoteInfo:
        """The quote behind a *Request launch* click, if a launch can still be asked from it."""
        async with self._db.transaction() as repos:
            quote = await _quote(repos, quote_id)
            if not any_state and await repos.requests.for_quote(quote_id) is not None:
                raise Conflict("A launch was already requested from this quote.")
        return quote

    async def submit(self, *, quote_id: str, workload: Workload, actor: Actor) -> LaunchRequest:
        """The requester asks for a launch from a quote they were shown."""
        now = self._clock.now()
        try:
            request = await self._add_request(quote_id=quote_id, workload=workload, actor=actor)
        except IntegrityError:  # two submissions raced on one quote: the other one won
            raise Conflict("A launch was already requested from this quote.") from None
        quote = await self.quote_for_request(quote_id=quote_id, actor=actor, any_state=True)
        if quote.is_expired(now):
            # Approvers must see a price that can still launch: re-price before asking.
            return await self.requote(request, reason="expired")
        await self._notifier.refresh_request(request.id)
        return request

    async def _add_request(self, *, quote_id: str, workload: Workload,
                           actor: Actor) -> LaunchRequest:
        now = self._clock.now()
        async with self._db.transaction() as repos:
            quote = await _quote(repos, quote_id)
            if await repos.requests.for_quote(quote_id) is not None:
                raise Conflict("A launch was already requested from this quote.")
            request = LaunchRequest(
                id=f"lr_{uuid.uuid4().hex[:12]}", quote_id=quote.id, requester_id=actor.user_id,
                team_id=actor.team_id, channel_id=quote.channel_id, workload=workload,
                status=RequestStatus.PENDING, hourly_cents=quote.hourly_cents,
                created_at=now, updated_at=now,
            )
            await repos.requests.add(request)
        return request

    async def decide(self, *, request_id: str, quote_id: str, hourly_cents: int,
                     decision: Decision, actor: Actor) -> LaunchRequest:
        """Approve or reject exactly what the card showed. Raises a `DomainError` if refused."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            request = await _request(repos, request_id)
            policies.ensure_can_decide(request, actor, self._approvers)
            if request.status is not RequestStatus.PENDING:
                raise Conflict(_already(request))
            if (request.quote_id, request.hourly_cents) != (quote_id, hourly_cents):
                raise Conflict("This card is out of date: the quote or its price changed. "
                               "Use the newest approval card for this request.")
            quote = await _quote(repos, quote_id)
            expired = decision is Decision.APPROVE and quote.is_expired(now)
            decided: LaunchRequest | None = None
            if not expired:
                decided = await repos.requests.transition(
                    request_id, from_=[RequestStatus.PENDING], quote_id=quote_id, now=now,
                    to=(RequestStatus.APPROVED if decision is Decision.APPROVE
                        else RequestStatus.REJECTED),
                    decided_by=actor.user_id, decided_at=now,
                    idempotency_key=(str(uuid.uuid4()) if decision is Decision.APPROVE
                                     else None),
                )
                if decided is None:  # another approver won the race
                    raise Conflict(_already(await _request(repos, request_id)))
                await repos.approvals.add(Approval(
                    request_id=request_id, approver_id=actor.user_id, decision=decision,
                    quote_id=quote_id, hourly_cents=hourly_cents, at=now,
                ))
        if expired:
            await self.requote(request, reason="expired")
            raise Conflict("That quote had expired, so nothing was launched. I priced it again "
                           "and posted a fresh approval card.")
        assert decided is not None
        await self._notifier.refresh_request(request_id)
        if decision is Decision.APPROVE:
            self._launcher.launch_soon(request_id)
        return decided

    async def retry(self, *, request_id: str, actor: Actor) -> LaunchRequest:
        """Try a launch again after capacity or payment stopped it (same approved quote)."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            request = await _request(repos, request_id)
            policies.ensure_can_retry(request, actor, self._approvers)
            # A fresh key: the provider keeps the failed answer under the old one (contract §8).
            retried = await repos.requests.transition(
                request_id, from_=[RequestStatus.LAUNCH_FAILED], to=RequestStatus.APPROVED,
                now=now, idempotency_key=str(uuid.uuid4()), last_error=None,
            )
            if retried is None:
                raise Conflict(_already(request))
        await self._notifier.refresh_request(request_id)
        self._launcher.launch_soon(request_id)
        return retried

    async def requote(self, request: LaunchRequest, *, reason: str) -> LaunchRequest:
        return await reprice(request, reason=reason, db=self._db, quoting=self._quoting,
                             notifier=self._notifier, clock=self._clock)


async def reprice(request: LaunchRequest, *, reason: str, db: Database, quoting: QuotingService,
                  notifier: Notifier, clock: Clock) -> LaunchRequest:
    """Price the same spec again and put the request back in front of the approvers.

    The old card's buttons carry the old quote id and rate, so they can no longer approve
    anything (and the card is retired); the request keeps the old rate as
    `previous_hourly_cents` so the new card shows the change.
    """
    async with db.transaction() as repos:
        old = await _quote(repos, request.quote_id)
    fresh: QuoteInfo = await quoting.quote_spec(
        old.spec, accelerator_name=old.accelerator_name, requested_by=old.requested_by,
        channel_id=old.channel_id,
    )
    now = clock.now()
    async with db.transaction() as repos:
        updated = await repos.requests.transition(
            request.id, to=RequestStatus.PENDING, now=now,
            from_=[RequestStatus.PENDING, RequestStatus.APPROVED, RequestStatus.LAUNCHING,
                   RequestStatus.LAUNCH_FAILED],
            hourly_cents=fresh.hourly_cents, previous_hourly_cents=request.hourly_cents,
            idempotency_key=None, decided_by=None, decided_at=None,
            last_error=f"the quote {reason}",
        )
        if updated is None:
            raise Conflict(_already(request))
        updated = await repos.requests.update(request.id, now=now, quote_id=fresh.id)
    await notifier.refresh_request(request.id, superseded_quote_id=old.id)
    return updated


async def _request(repos: Repos, request_id: str) -> LaunchRequest:
    request = await repos.requests.get(request_id)
    if request is None:
        raise UnknownResource("launch request", request_id)
    return request


async def _quote(repos: Repos, quote_id: str) -> QuoteInfo:
    quote = await repos.quotes.get(quote_id)
    if quote is None:
        raise UnknownResource("quote", quote_id)
    return quote


def _already(request: LaunchRequest) -> str:
    who = f" by <@{request.decided_by}>" if request.decided_by else ""
    return {
        RequestStatus.APPROVED: f"Already approved{who}; the launch is starting.",
        RequestStatus.LAUNCHING: f"Already approved{who}; the launch is under way.",
        RequestStatus.LAUNCHED: f"Already approved{who} and launched as `{request.cluster_id}`.",
        RequestStatus.REJECTED: f"Already rejected{who}.",
        RequestStatus.LAUNCH_FAILED: "The launch failed; use *Retry launch* on the card.",
        RequestStatus.PENDING: "This request is waiting for an approver.",
    }.get(request.status, f"This request is {request.status.value}.")
