"""Withdrawing a launch request, and the words for where a request stands (why it can no
longer be decided or withdrawn, how a re-pricing moved it) that the approval service uses too.

The requester takes back a pending request: a compare-and-set `pending → withdrawn` (the same
row approvals lock and move), so a withdraw and an approval at the same instant decide once.
"""

from __future__ import annotations

from datetime import datetime

from bot.domain.errors import Conflict, NotAllowed, UnknownResource
from bot.domain.models import Actor, LaunchRequest, QuoteInfo, RequestStatus
from bot.domain.policy import Verdict, money
from storage.repositories import Repos


async def withdraw_pending(repos: Repos, *, request_id: str, actor: Actor, now: datetime,
                           reason: str | None) -> LaunchRequest:
    """Inside the caller's transaction. Someone else's request, or one no longer pending, is
    refused with who can do what; nothing changes."""
    reason = " ".join((reason or "").split())[:500] or None
    request = await repos.requests.get(request_id)
    if request is None:
        raise UnknownResource("launch request", request_id)
    if request.requester_id != actor.user_id:
        raise NotAllowed(f"Only the requester, <@{request.requester_id}>, can withdraw "
                         f"`{request.id}`; an approver can reject it on its card in the "
                         "approvals channel.")
    withdrawn = await repos.requests.transition(
        request_id, from_=[RequestStatus.PENDING, RequestStatus.WAITING],
        to=RequestStatus.WITHDRAWN, now=now,
        decided_by=actor.user_id, decided_at=now, decision_note=reason, idempotency_key=None)
    if withdrawn is None:
        raise Conflict(f"`{request.id}` can no longer be withdrawn: {already(request)}"
                       f"{after_decision(request)}")
    return withdrawn


def repriced_words(request: LaunchRequest, fresh: QuoteInfo, *, reason: str,
                   verdict: Verdict) -> str:
    """The audit row's words for a request put back in front of the approvers at a new price
    (it leaves pending, and so may no longer be withdrawn, only if the policy refuses it)."""
    change = f"{money(request.hourly_cents)}/h → {money(fresh.hourly_cents)}/h"
    return (f"the quote {reason}; priced again as {fresh.id}: {change}"
            + (f"; the spend policy refuses it: {verdict.refused}" if verdict.is_refusal
               else f"; {verdict.approvals_needed} approval(s) needed again"))


def already(request: LaunchRequest) -> str:
    """Why a request can no longer be decided, in words (with who decided it)."""
    who = f" by <@{request.decided_by}>" if request.decided_by else ""
    return {
        RequestStatus.APPROVED: f"Already approved{who}; the launch is starting.",
        RequestStatus.LAUNCHING: f"Already approved{who}; the launch is under way.",
        RequestStatus.LAUNCHED: f"Already approved{who} and launched as `{request.cluster_id}`.",
        RequestStatus.REJECTED: f"Already rejected{who}.",
        RequestStatus.LAUNCH_FAILED: "The launch failed; use *Retry launch* on the card.",
        RequestStatus.PENDING: "This request is waiting for an approver.",
        RequestStatus.WAITING: "This request is waiting for stock.",
        RequestStatus.WITHDRAWN: f"Already withdrawn{who}.",
    }.get(request.status, f"This request is {request.status.value}.")


def after_decision(request: LaunchRequest) -> str:
    """What the requester can still do about a request that is no longer pending."""
    if request.status is RequestStatus.LAUNCHED and request.cluster_id:
        return (f" To stop it, terminate the cluster: `/cluster terminate "
                f"{request.cluster_id}`.")
    if request.status in (RequestStatus.APPROVED, RequestStatus.LAUNCHING):
        return (" Once it is launched, its owner or an approver can terminate the cluster "
                "(`/cluster terminate <cluster-id>`).")
    if request.status is RequestStatus.LAUNCH_FAILED:
        return " It is only kept for a retry: it launches nothing unless someone retries it."
    return ""
