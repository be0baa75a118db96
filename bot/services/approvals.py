"""Launch requests and their approval, under the spend policy.

A request is judged when it is made (bot/domain/policy.py): refused with the rule and the
numbers, routed to the admins for an explicit override, auto-approved below the policy's
threshold, or put in front of one or two distinct approvers (never the requester).

The budgets are judged again inside the transaction that approves (the last approval, or the
auto-approval), under a lock per budget (storage/budgets.py) and counting every request already
approved, launching or kept for a retry: approvals at the same instant take turns, and together
never commit more than a budget. A request that no longer fits fails there, with the numbers.

Every decision is a compare-and-set in the database (`pending → approved`), so any number of
clicks, Slack retries or racing approvers produce one decision and one launch. What was
approved — this quote at this hourly rate — travels in the button (`ApprovalRef`) and must
still match the request, or the click is refused as stale. An approval that races the quote's
expiry resolves one way: expired stays expired (re-priced, asked again).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Unpack

from sqlalchemy.exc import IntegrityError

from bot.clock import Clock
from bot.domain import policies
from bot.domain import policy as rules
from bot.domain.claims import launch_attempt
from bot.domain.errors import Conflict, NotAllowed, UnknownResource
from bot.domain.models import (
    Actor,
    Approval,
    Decision,
    LaunchRequest,
    QuoteInfo,
    RequestStatus,
    Workload,
)
from bot.domain.policy import Verdict
from bot.domain.ports import Notifier
from bot.services import budgets, stakes
from bot.services.acting import ActingService, Basics
from bot.services.audit import AuditLog, audited
from bot.services.budgets import committed as _committed
from bot.services.deciding import LaunchScheduler, launched_then_shown
from bot.services.quoting import QuotingService
from bot.services.withdrawals import already as _already
from bot.services.withdrawals import repriced_words, withdraw_pending
from storage.db import Database
from storage.repositories import Repos

Judge = Callable[[QuoteInfo, str, str | None], Awaitable[Verdict]]


class ApprovalService(ActingService):
    def __init__(self, *, quoting: QuotingService, notifier: Notifier, launcher: LaunchScheduler,
                 **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._quoting = quoting
        self._notifier = notifier
        self._launcher = launcher

    async def judge(self, quote: QuoteInfo, requester: str,
                    excluding: str | None = None) -> Verdict:
        """What the spend policy says about `requester` launching `quote` now, counting every
        request already approved or launching (but `excluding`, one being re-priced: under
        its own installation's policy, whoever asks); the approval judges the budgets again."""
        placed = await self._placed(excluding) if excluding else None
        policy = self._people.policy_for(placed) if placed else self._people.policy
        now = self._clock.now()
        async with self._db.transaction() as repos:
            month = await _committed(repos, policy, requester=requester, now=now,
                                     excluding=excluding, project=quote.spec.project)
        if quote.spec.planned_hours is not None:  # a planned run commits its hours, no more
            policy = policy.model_copy(update={"max_lifetime_hours": quote.spec.planned_hours})
        return rules.evaluate(policy, requester=requester,
                              accelerator_id=quote.spec.shape.accelerator,
                              nodes=quote.spec.shape.nodes, hourly_cents=quote.hourly_cents,
                              month_spend=month, now=now, project=quote.spec.project)

    @audited("request", subject="quote_id", refusals_only=True, stake=stakes.quote_rate)
    async def form_for(self, *, quote_id: str, actor: Actor) -> QuoteInfo:
        """*Request launch* pressed: the quote to fill the launch form from — refused before
        the form (the rule named, audited) for someone who may not request."""
        await self._people.ensure_may_spend(actor)  # requesters, guests
        return await self.quote_for_request(quote_id=quote_id, actor=actor)

    async def quote_for_request(self, *, quote_id: str, actor: Actor,
                                any_state: bool = False) -> QuoteInfo:
        """The quote behind a *Request launch* click, if a launch can still be asked from it."""
        async with self._db.transaction() as repos:
            quote = await _quote(repos, quote_id)
            if not any_state and await repos.requests.for_quote(quote_id) is not None:
                raise Conflict("A launch was already requested from this quote.")
        return quote

    @audited("request", subject="quote_id", stake=stakes.quote_rate)
    async def submit(self, *, quote_id: str, workload: Workload, actor: Actor,
                     wait_hours: int | None = None) -> LaunchRequest:
        """The requester asks for a launch from a quote they were shown (`wait_hours`: and to
        wait for stock that long if the launch finds none, bot/services/stock.py)."""
        await self._people.ensure_may_spend(actor)  # requesters, guests, the installed team
        quote = await self.quote_for_request(quote_id=quote_id, actor=actor)
        verdict = await self.judge(quote, actor.user_id)
        if verdict.is_refusal:
            raise Conflict(f"The spend policy refuses this launch. {verdict.refused}")
        try:
            request = await self._add_request(quote, workload=workload, actor=actor,
                                              verdict=verdict, wait_hours=wait_hours)
        except IntegrityError:  # two submissions raced on one quote: the other one won
            raise Conflict("A launch was already requested from this quote.") from None
        if quote.is_expired(self._clock.now()):
            # Approvers must see a price that can still launch: re-price before asking.
            return await self.requote(request, reason="expired")
        if verdict.auto_approved:
            return await self._auto_approve(request, quote)
        await self._notifier.refresh_request(request.id)
        return request

    async def _add_request(self, quote: QuoteInfo, *, workload: Workload, actor: Actor,
                           verdict: Verdict, wait_hours: int | None = None) -> LaunchRequest:
        now = self._clock.now()
        request = LaunchRequest(
            id=f"lr_{uuid.uuid4().hex[:12]}", quote_id=quote.id, requester_id=actor.user_id,
            team_id=actor.team_id, enterprise_id=actor.enterprise_id,
            channel_id=quote.channel_id, workload=workload,
            status=RequestStatus.PENDING, hourly_cents=quote.hourly_cents,
            approvals_needed=verdict.approvals_needed,
            override_rule=verdict.refused if verdict.override else None,
            lifetime_hours=quote.spec.planned_hours or verdict.lifetime_hours,
            created_at=now, updated_at=now, wait_hours=wait_hours, project=quote.spec.project,
        )
        async with self._db.transaction() as repos:
            await repos.requests.add(request)
        return request

    async def _auto_approve(self, request: LaunchRequest, quote: QuoteInfo) -> LaunchRequest:
        now = self._clock.now()
        async with self._db.transaction() as repos:
            refusal = await _over_budget(repos, self._people.policy, request, now=now)
            approved = await repos.requests.transition(
                request.id, from_=[RequestStatus.PENDING],
                to=RequestStatus.FAILED if refusal else RequestStatus.APPROVED, now=now,
                quote_id=quote.id, decided_at=now, last_error=refusal,
                idempotency_key=None if refusal else str(uuid.uuid4()))
        assert approved is not None
        if refusal:
            await self._refused_at_approval(approved, refusal)
            raise Conflict(f"The spend policy refuses this launch. {refusal}")
        limit = self._people.policy.auto_approve_below_cents or 0
        await self._audit.write(actor=None, action="approve", subject_id=request.id,
                                outcome="ok", amount_cents=request.hourly_cents,
                                idempotency_key=approved.idempotency_key,
                                detail=f"auto-approved by the spend policy (under "
                                       f"{rules.money(limit)}/h)")
        await self._notifier.refresh_request(request.id)
        self._launcher.launch_soon(request.id)
        return approved

    @launched_then_shown
    @audited("approve", subject="request_id", stake=stakes.request_rate)
    async def approve(self, *, request_id: str, quote_id: str, hourly_cents: int,
                      actor: Actor) -> LaunchRequest:
        return await self._decide(request_id=request_id, quote_id=quote_id,
                                  hourly_cents=hourly_cents, decision=Decision.APPROVE,
                                  actor=actor)

    async def reject(self, *, request_id: str, quote_id: str, hourly_cents: int,
                     actor: Actor, reason: str | None = None) -> LaunchRequest:
        """`reason` (optional) is shown on the card and DMed to the requester. The requester's
        own Reject means "take it back": withdrawn (and audited so), not a self-approval."""
        async with self._db.transaction() as repos:
            request = await repos.requests.get(request_id)
        if request is not None and request.requester_id == actor.user_id:
            return await self.withdraw(request_id=request_id, actor=actor, reason=reason)
        return await self._reject(request_id=request_id, quote_id=quote_id,
                                  hourly_cents=hourly_cents, actor=actor, reason=reason)

    @audited("withdraw", subject="request_id", stake=stakes.request_rate)
    async def withdraw(self, *, request_id: str, actor: Actor,
                       reason: str | None = None) -> LaunchRequest:
        """The requester takes back a pending request (bot/services/withdrawals.py); any card
        of it may carry the press: the request, not the quote, is withdrawn."""
        async with self._db.transaction() as repos:
            withdrawn = await withdraw_pending(repos, request_id=request_id, actor=actor,
                                               now=self._clock.now(), reason=reason)
        await self._notifier.refresh_request(request_id)
        return withdrawn

    @audited("reject", subject="request_id", stake=stakes.request_rate)
    async def _reject(self, *, request_id: str, quote_id: str, hourly_cents: int,
                      actor: Actor, reason: str | None = None) -> LaunchRequest:
        reason = " ".join((reason or "").split())[:500] or None
        decided = await self._decide(request_id=request_id, quote_id=quote_id,
                                     hourly_cents=hourly_cents, decision=Decision.REJECT,
                                     actor=actor, reason=reason)
        await self._notifier.refresh_request(request_id)
        if reason and decided.status is RequestStatus.REJECTED:
            await self._notifier.tell(
                decided.requester_id, f"<@{actor.user_id}> rejected your launch request "
                f"`{decided.id}`: {reason}", key=f"rejected/{decided.id}")
        return decided

    async def _decide(self, *, request_id: str, quote_id: str, hourly_cents: int,
                      decision: Decision, actor: Actor,
                      reason: str | None = None) -> LaunchRequest:
        """Approve or reject exactly what the card showed (a `DomainError` if refused), under
        the policy where the request was made, not where the click comes from. One
        transaction, the request row locked: record the approval, count the distinct approvers
        of this quote, and move the request once they suffice — so two approvers deciding at
        the same instant can neither both miss the threshold nor both launch."""
        with self._people.at(await self._placed(request_id)):
            return await self._decide_here(request_id=request_id, quote_id=quote_id,
                                           hourly_cents=hourly_cents, decision=decision,
                                           actor=actor, reason=reason)

    async def _placed(self, request_id: str) -> LaunchRequest | None:
        async with self._db.transaction() as repos:
            return await repos.requests.get(request_id)

    async def _decide_here(self, *, request_id: str, quote_id: str, hourly_cents: int,
                           decision: Decision, actor: Actor,
                           reason: str | None = None) -> LaunchRequest:
        now = self._clock.now()
        policy = self._people.policy
        group = await self._people.group_members()
        async with self._db.transaction() as repos:
            request = await repos.requests.get(request_id, for_update=True)
            if request is None:
                raise UnknownResource("launch request", request_id)
            approved_by = await repos.approvals.distinct_approvers(request_id, request.quote_id)
            admin_needed = rules.admin_still_needed(policy, override_rule=request.override_rule,
                                                    approved_by=approved_by)
            why_not = rules.may_approve(policy, actor.user_id, requester=request.requester_id,
                                        group_members=group, override=admin_needed)
            if why_not is not None:
                raise NotAllowed(why_not)
            if request.status is not RequestStatus.PENDING:
                raise Conflict(_already(request))
            if (request.quote_id, request.hourly_cents) != (quote_id, hourly_cents):
                raise Conflict("This card is out of date: the quote or its price changed. "
                               "Use the newest approval card for this request.")
            if decision is Decision.APPROVE and actor.user_id in approved_by:
                raise Conflict("You already approved this request; it needs another approver.")
            quote = await _quote(repos, quote_id)
            expired = decision is Decision.APPROVE and quote.is_expired(now)
            decided = request
            refusal: str | None = None
            if not expired:
                await repos.approvals.add(Approval(
                    request_id=request_id, approver_id=actor.user_id, decision=decision,
                    quote_id=quote_id, hourly_cents=hourly_cents, at=now))
                approved_by = approved_by | {actor.user_id}
                enough = (len(approved_by) >= request.approvals_needed
                          and not rules.admin_still_needed(
                              policy, override_rule=request.override_rule,
                              approved_by=approved_by))
                if decision is Decision.APPROVE and enough and request.override_rule is None:
                    # The budgets again, locked, counting every request approved before this
                    # one: the last approval is where the money is committed.
                    refusal = await _over_budget(repos, policy, request, now=now)
                if decision is Decision.REJECT or enough:
                    target = (RequestStatus.REJECTED if decision is Decision.REJECT
                              else RequestStatus.FAILED if refusal else RequestStatus.APPROVED)
                    moved = await repos.requests.transition(
                        request_id, from_=[RequestStatus.PENDING], to=target,
                        quote_id=quote_id, now=now, decided_by=actor.user_id, decided_at=now,
                        last_error=refusal,
                        decision_note=reason if target is RequestStatus.REJECTED else None,
                        idempotency_key=(str(uuid.uuid4()) if target is RequestStatus.APPROVED
                                         else None))
                    assert moved is not None  # the row is locked and was pending
                    decided = moved
        if refusal:
            await self._refused_at_approval(decided, refusal)
            raise Conflict(f"Not approved: the spend policy refuses it now. {refusal}")
        if expired:
            await self.requote(request, reason="expired")
            raise Conflict("That quote had expired, so nothing was launched. I priced it again "
                           "and posted a fresh approval card.")
        return decided  # shown (approve: launched first) by the caller

    async def _refused_at_approval(self, request: LaunchRequest, refusal: str) -> None:
        """A request the budgets no longer fit when it was approved: it failed, and says why."""
        await self._audit.write(actor=None, action="budget", subject_id=request.id,
                                outcome="refused", amount_cents=request.hourly_cents,
                                detail=refusal)
        await self._notifier.refresh_request(request.id)
        await self._notifier.tell(request.requester_id,
                                  f"Your launch request `{request.id}` was not launched: the "
                                  f"spend policy refused it when it was approved. {refusal}")

    async def show_expired(self) -> int:
        """Re-render each approval card whose quote expired since it was last shown, so the
        card says it can no longer launch (approving it re-prices and asks again)."""
        now = self._clock.now()
        expired = []
        async with self._db.transaction() as repos:
            for request in await repos.requests.list_pending():
                quote = await repos.quotes.get(request.quote_id)
                if quote is not None and quote.is_expired(now) \
                        and request.updated_at < quote.expires_at:
                    expired.append(await repos.requests.update(request.id, now=now))
        for request in expired:
            await self._audit.write(actor=None, action="expire", subject_id=request.id,
                                    outcome="ok", amount_cents=request.hourly_cents,
                                    detail="the quote expired before enough approvals")
            await self._notifier.refresh_request(request.id)
        return len(expired)

    @launched_then_shown
    @audited("retry", subject="request_id", stake=stakes.request_rate)
    async def retry(self, *, request_id: str, actor: Actor,
                    attempt: str | None = None) -> LaunchRequest:
        """Try a launch again after capacity or payment stopped it (same approved quote).

        `attempt` is the failed attempt the Retry button was shown: a button from an earlier
        attempt (already retried) changes nothing."""
        now = self._clock.now()
        with self._people.at(await self._placed(request_id)):  # the request's approvers
            approvers = await self._people.approvers()
        async with self._db.transaction() as repos:
            request = await _request(repos, request_id)
            policies.ensure_can_retry(request, actor, approvers)
            if attempt is not None and (request.status is not RequestStatus.LAUNCH_FAILED
                                        or launch_attempt(request) != attempt):
                raise Conflict("That launch attempt was already retried. " + _already(request))
            # A fresh key: the provider keeps the failed answer under the old one (contract §8).
            retried = await repos.requests.transition(
                request_id, from_=[RequestStatus.LAUNCH_FAILED], to=RequestStatus.APPROVED,
                now=now, idempotency_key=str(uuid.uuid4()), last_error=None,
            )
            if retried is None:
                raise Conflict(_already(request))
        return retried  # launched, then shown (deciding.py)

    async def requote(self, request: LaunchRequest, *, reason: str) -> LaunchRequest:
        return await reprice(request, reason=reason, db=self._db, quoting=self._quoting,
                             notifier=self._notifier, clock=self._clock, judge=self.judge,
                             audit=self._audit)


async def _over_budget(repos: Repos, policy: rules.Policy, request: LaunchRequest, *,
                       now: datetime) -> str | None:
    """Inside the approving transaction: lock the requester's budgets (bot/services/budgets.py),
    then judge them again with everything they hold. None: it fits."""
    if not await budgets.hold(repos, policy, request.requester_id, request.project):
        return None
    month = await _committed(repos, policy, requester=request.requester_id, now=now,
                             excluding=request.id, project=request.project)
    return rules.budget_refusal(policy, requester=request.requester_id,
                                hourly_cents=request.hourly_cents,
                                lifetime_hours=request.lifetime_hours, month_spend=month, now=now,
                                project=request.project)


async def reprice(request: LaunchRequest, *, reason: str, db: Database, quoting: QuotingService,
                  notifier: Notifier, clock: Clock, judge: Judge,
                  audit: AuditLog | None = None) -> LaunchRequest:
    """Price the same spec again and put the request back in front of the approvers.

    The old card's buttons carry the old quote id and rate, so they can no longer approve
    anything (and the card is retired); the request keeps the old rate as
    `previous_hourly_cents` so the new card shows the change. The new price is judged again:
    it may need more approvers, or break a rule the old one kept.
    """
    async with db.transaction() as repos:
        old = await _quote(repos, request.quote_id)
    fresh: QuoteInfo = await quoting.quote_spec(
        old.spec, accelerator_name=old.accelerator_name, requested_by=old.requested_by,
        channel_id=old.channel_id,
    )
    verdict = await judge(fresh, request.requester_id, request.id)  # it holds no room
    now = clock.now()
    async with db.transaction() as repos:
        updated = await repos.requests.transition(
            request.id, now=now, quote_id=request.quote_id,  # not if re-priced meanwhile
            to=RequestStatus.FAILED if verdict.is_refusal else RequestStatus.PENDING,
            from_=[RequestStatus.PENDING, RequestStatus.APPROVED, RequestStatus.LAUNCHING,
                   RequestStatus.LAUNCH_FAILED, RequestStatus.WAITING],
            new_quote_id=fresh.id, hourly_cents=fresh.hourly_cents,
            previous_hourly_cents=request.hourly_cents, idempotency_key=None,
            decided_by=None, decided_at=None, approvals_needed=verdict.approvals_needed,
            override_rule=verdict.refused if verdict.override else None,
            lifetime_hours=fresh.spec.planned_hours or verdict.lifetime_hours,
            last_error=(f"At the new price the spend policy refuses it: {verdict.refused}"
                        if verdict.is_refusal else f"the quote {reason}"),
        )
        if updated is None:
            raise Conflict(_already(request))
    if audit is not None:
        await audit.write(actor=None, action="reprice", subject_id=request.id,
                          outcome="refused" if verdict.is_refusal else "ok",
                          amount_cents=fresh.hourly_cents, detail=repriced_words(
                              request, fresh, reason=reason, verdict=verdict))
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
