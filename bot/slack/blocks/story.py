"""The cluster's thread as its story, and the reject-with-a-reason form.

`story(…)` reads the stored state of a request and its cluster and returns each step that has
happened as (key, words): requested; each approval as it comes ("1 of 2 approvals: @bob"); a
refusal by the spend policy at approval; each re-pricing and an expired quote; each launch
attempt, its failure and its retry; rejected (with the reason) or withdrawn; launched, ready,
connection details sent (never the details). The notifier posts each key once into the thread
(the outbox), so rendering it again after every change, or after a restart, adds only what is
new; every watcher notice, extension and the receipt follow in the same thread. A step is only
ever derived from something stored, so nothing appears that did not happen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from slack_sdk.models.blocks import InputBlock, PlainTextInputElement
from slack_sdk.models.views import View

from bot.domain.approvers import approved_by
from bot.domain.claims import launch_attempt
from bot.domain.launch import IntentState, LaunchIntent
from bot.domain.models import (
    Approval,
    ClusterRecord,
    Decision,
    LaunchRequest,
    QuoteInfo,
    RequestStatus,
)
from bot.domain.reasons import error_words
from bot.slack import ids
from bot.slack.blocks.approval import withdrawn_line
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *

FIELD_REASON = "reject_reason"
_DECIDED = (RequestStatus.APPROVED, RequestStatus.LAUNCHING, RequestStatus.LAUNCHED,
            RequestStatus.LAUNCH_FAILED, RequestStatus.WAITING)
Step = tuple[str, str]


def story(req: LaunchRequest, approvals: Sequence[Approval], cluster: ClusterRecord | None, *,
          quotes: Sequence[QuoteInfo] = (), attempts: Sequence[LaunchIntent] = (),
          retried_by: Mapping[str, str] | None = None,
          now: datetime | None = None) -> list[Step]:
    """Each step so far, in order, as (key, mrkdwn).

    `quotes`: every quote the request held, oldest first (the current one last); `attempts`:
    its launch intents, oldest first; `retried_by`: who retried each failed attempt (by
    `attempt_of`); `now`: to tell that the current quote has expired."""
    held = list(quotes)
    planned = held[0].spec.planned_hours if held else None
    envelope = ""
    if planned:
        envelope = f", planned for {planned} h (`hours={planned}`)"
    elif req.lifetime_hours:
        envelope = (f", within the spend policy's lifetime of {req.lifetime_hours} h per "
                    "cluster")
    asked_at = held[0].hourly_cents if held else req.hourly_cents  # before any re-pricing
    steps: list[Step] = [("requested", f":memo: Requested by {user(req.requester_id)} "
                                       f"{when(req.created_at)} at {hourly(asked_at)}"
                                       f"{envelope}")]
    quote_ids = [q.id for q in held] or [req.quote_id]
    for index, quote_id in enumerate(quote_ids):
        if index:
            steps.append(_repriced(held[index - 1], held[index], waits=bool(req.wait_hours)))
        steps += _approvals(req, [a for a in approvals if a.quote_id == quote_id])
        if quote_id == req.quote_id:
            steps += _decided_alone(req, approvals)
        steps += _attempts(req, [i for i in attempts if i.quote_id == quote_id],
                           first=not any(i.quote_id in quote_ids[:index] for i in attempts),
                           retried_by=retried_by or {})
    current = held[-1] if held else None
    if (req.status is RequestStatus.PENDING and current is not None and now is not None
            and current.is_expired(now)):
        steps.append((f"expired/{current.id}",
                      f":hourglass: The quote expired {when(current.expires_at)} before enough "
                      "approvals: approving now prices it again and posts a fresh card"))
    steps += _ended(req, approvals)
    if cluster is None:
        if req.status is RequestStatus.LAUNCHING and not attempts:  # launched before intents
            steps.append(("launching", ":rocket: Launching at AI Reserve"))
        return steps
    if not attempts:
        steps.append(("launching", ":rocket: Launching at AI Reserve"))
    ref = code(escaped(cluster.id, ID_MAX))
    steps.append(("launched", f":hourglass_flowing_sand: Cluster {ref} created; its nodes "
                              "are being provisioned (nothing bills until all are ready)"))
    if cluster.ready_at is not None:
        steps.append(("ready", f":large_green_circle: Ready {when(cluster.ready_at)}: every node "
                               f"runs; the first hour ({hourly(cluster.hourly_cents)}) is "
                               "charged now"))
    if cluster.connection_sent_at is not None:
        owner = user(cluster.owner_id) if cluster.owner_id else "the owner"
        steps.append(("connection", f":key: Connection details sent to {owner} by DM "
                                    f"{when(cluster.connection_sent_at)}"))
    return steps


def refused_at_approval(req: LaunchRequest) -> bool:
    """The last approval came, and the budgets (judged again, locked) no longer fit: it failed
    there, with no launch key (bot/services/approvals.py) — not a failure of the launch."""
    return (req.status is RequestStatus.FAILED and req.decided_by is not None
            and req.idempotency_key is None and req.cluster_id is None)


def _approvals(req: LaunchRequest, given: Sequence[Approval]) -> list[Step]:
    """Each approval of one quote: "k of n approvals" while two or more are needed."""
    steps: list[Step] = []
    seen: list[str] = []
    for a in given:
        if a.decision is not Decision.APPROVE or a.approver_id in seen:
            continue
        seen.append(a.approver_id)
        who, needed = user(a.approver_id), req.approvals_needed
        count = f"{len(seen)} of {needed} approvals: {who}" if needed >= 2 else ""
        key = f"approved/{a.quote_id}/{a.approver_id}"
        if (refused_at_approval(req) and a.approver_id == req.decided_by
                and a.quote_id == req.quote_id):
            said = f"{count} — but" if count else f"Approved by {who}, but"
            steps.append((key, f":no_entry: {said} the spend policy refused it at approval: "
                               f"{_reason(req)} Nothing was launched."))
        elif count:
            enough = " — approved" if len(seen) >= needed else ""
            steps.append((key, f":ballot_box_with_check: {count} {when(a.at)} at "
                               f"{hourly(a.hourly_cents)}{enough}"))
        else:
            steps.append((key, f":white_check_mark: Approved by {who} {when(a.at)} at "
                               f"{hourly(a.hourly_cents)}"))
    return steps


def _decided_alone(req: LaunchRequest, approvals: Sequence[Approval]) -> list[Step]:
    """The spend policy's own decision on a request nobody had to approve."""
    if approved_by(req, approvals):
        return []
    if req.status in _DECIDED:
        return [("auto-approved", ":white_check_mark: Approved by the spend policy")]
    return []


def _repriced(old: QuoteInfo, new: QuoteInfo, *, waits: bool = False) -> Step:
    if waits and new.availability != "none" and new.hourly_cents <= old.hourly_cents:
        # A wait for stock ended in stock at the approved rate or less: no approval again.
        return (f"stock/{new.id}", f":package: Stock came back in {escaped(new.location, ID_MAX)}"
                f": quoted again at {hourly(new.hourly_cents)} (approved "
                f"{hourly(old.hourly_cents)}), launching without asking again")
    why = ("The quote expired" if old.expires_at <= new.created_at
           else "The price changed at AI Reserve")
    return (f"repriced/{new.id}",
            f":arrows_counterclockwise: {why}; priced again at {hourly(new.hourly_cents)} "
            f"(was {hourly(old.hourly_cents)}): the approvals start over")


def attempt_of(req: LaunchRequest, intent: LaunchIntent) -> str:
    """The version a Retry launch button of this attempt carried (`launch_attempt`)."""
    return launch_attempt(req.model_copy(update={"idempotency_key": intent.idempotency_key}))


def _attempts(req: LaunchRequest, tries: Sequence[LaunchIntent], *, first: bool,
              retried_by: Mapping[str, str]) -> list[Step]:
    """Each launch attempt on one quote, and how a failed one ended."""
    steps: list[Step] = []
    for n, intent in enumerate(tries):
        attempt = attempt_of(req, intent)
        if first and n == 0:
            steps.append(("launching", ":rocket: Launching at AI Reserve"))
        elif n == 0:
            steps.append((f"launching/{attempt}",
                          f":rocket: Launching at AI Reserve at {hourly(req.hourly_cents)}"))
        elif tries[n - 1].state is IntentState.SUPERSEDED:
            steps.append((f"launching/{attempt}", ":rocket: Launching again with a fresh "
                          "request key: AI Reserve kept answering the last one with an error "
                          "and no cluster exists"))
        else:
            who = retried_by.get(attempt_of(req, tries[n - 1]))
            steps.append((f"launching/{attempt}",
                          f":repeat: Retried{f' by {user(who)}' if who else ''} "
                          f"{when(intent.created_at)}: launching again at AI Reserve "
                          f"(attempt {n + 1})"))
        if (intent.idempotency_key == req.idempotency_key
                and req.status is RequestStatus.WAITING and req.wait_until is not None):
            steps.append((f"waiting/{attempt}",
                          f":hourglass: No stock: waiting for it until {when(req.wait_until)}; "
                          "it launches by itself at the approved rate or less"))
        if (intent.idempotency_key == req.idempotency_key
                and req.status is RequestStatus.LAUNCH_FAILED):
            steps.append((f"launch_failed/{attempt}",
                          f":warning: Launch failed: {_reason(req)} Kept: an approver or the "
                          "requester can retry."))
    return steps


def _ended(req: LaunchRequest, approvals: Sequence[Approval]) -> list[Step]:
    """How a request that never launched ended: rejected, withdrawn or failed."""
    if req.status is RequestStatus.REJECTED:
        why = f": “{escaped(req.decision_note, 500)}”" if req.decision_note else ""
        who = user(req.decided_by) if req.decided_by else "an approver"
        return [("rejected", f":no_entry: Rejected by {who}{why}")]
    if req.status is RequestStatus.WITHDRAWN:
        return [("withdrawn", f":leftwards_arrow_with_hook: {withdrawn_line(req)}; nothing "
                              "will be launched")]
    if req.status is RequestStatus.FAILED and not (
            refused_at_approval(req) and any(a.approver_id == req.decided_by
                                             for a in approvals)):
        return [("failed", f":x: Not launched: {_reason(req)}")]
    return []


def _reason(req: LaunchRequest) -> str:
    text = req.last_error or "no reason given"
    words = escaped(error_words(text) or text, ERROR_MAX)
    return words if words.endswith((".", "!", "?")) else words + "."


def withdrawn_words(request_id: str) -> str:
    """What the requester hears once a request is withdrawn (command or button)."""
    return (f"Withdrawn: launch request `{request_id}` will not be launched; its approval card "
            "and its thread say so.")


def story_post(words: str) -> Message:
    """One step's thread post (block ids `story.*`, so a reader can tell steps from notices).
    `words` is mrkdwn already — each step escapes its own input (a reject reason) — so it is
    not escaped again: that showed a reason's `<` as `&lt;`."""
    return compose(words, [section(words)], key="story")


def story_key(req: LaunchRequest, step: str) -> str:
    """The outbox key of one step's thread post."""
    return f"story/{req.id}/{step}"


def reject_modal(ref: ids.ApprovalRef) -> View:
    """Reject with a reason: the requester sees it on the card and by DM."""
    return View(
        type="modal", callback_id=ids.View.REJECT_REASON, private_metadata=ref.pack(),
        title=plain("Reject request", 24), submit=plain("Reject", 24), close=plain("Cancel", 24),
        blocks=[
            section(f"Reject launch request {code(escaped(ref.request_id, ID_MAX))}? The "
                    "requester sees your reason."),
            InputBlock(block_id=FIELD_REASON, label=plain("Reason", 2000),
                       element=PlainTextInputElement(action_id=FIELD_REASON, multiline=True,
                                                     max_length=500,
                                                     placeholder=plain("e.g. use h100x4 first",
                                                                       150))),
        ])
