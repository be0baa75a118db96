"""The approval card an approver acts on, and the same card once the request was decided.

The card shows the rate the Approve button is bound to (`req.hourly_cents`, packed into the
`ApprovalRef`), never env values (keys only): the card lives in a channel. What the spend policy
decided (bot/domain/policy.py) is rendered, never re-decided: how many approvers the rate needs
(`req.approvals_needed`), the rule an admin would override (`req.override_rule`) and the
approved envelope (`req.lifetime_hours`). `policy` only supplies the thresholds to quote.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from slack_sdk.models.blocks import Block, ButtonElement

from bot.domain import stock
from bot.domain.approvers import approvals_that_count, approved_by
from bot.domain.claims import launch_attempt
from bot.domain.envelope import envelope_terms
from bot.domain.models import Approval, Decision, LaunchRequest, QuoteInfo, RequestStatus
from bot.domain.readiness import topology
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.blocks.quote import storage_summary
from bot.slack.ids import Action, ApprovalRef, RequestRef, WaitRef

MAX_LISTED = 20  # env keys / ports listed by name before "…and N more"
_APPROVED = (RequestStatus.APPROVED, RequestStatus.LAUNCHING, RequestStatus.LAUNCHED)


class SpendThresholds(Protocol):
    """The two rates of the spend policy the cards quote (`bot.domain.policy.Policy` fits)."""

    @property
    def auto_approve_below_cents(self) -> int | None: ...

    @property
    def one_approver_up_to_cents(self) -> int | None: ...


def approval_card(
    req: LaunchRequest,
    q: QuoteInfo,
    *,
    now: datetime,
    approvals: Sequence[Approval] = (),
    policy: SpendThresholds | None = None,
) -> Message:
    """The pending request with Approve / Reject, each behind a confirm that states the rate.

    `approvals` (those already given) show how far a two-approver request has come.
    """
    blocks: list[Block] = list(request_facts(req, q, now=now, policy=policy))
    lines = [*override_lines(req, decided=False), *_two_approver_lines(req, approvals, policy)]
    if lines:
        blocks.append(section("\n".join(lines)))
    blocks.append(actions(*approval_buttons(req, q, approvals=approvals, policy=policy)))
    return compose(f"{_fallback(req, q)} — waiting for approval", blocks, key="approval")


def approval_buttons(
    req: LaunchRequest, q: QuoteInfo, *, approvals: Sequence[Approval] = (),
    policy: SpendThresholds | None = None,
) -> tuple[ButtonElement, ...]:
    """Approve, Reject and Reject with a reason, all bound (`ApprovalRef`) to this quote at
    the card's rate.

    The Approve confirm states the rate, the envelope when there is one, and — for a request
    that breaks the spend policy — that approving is an explicit override.
    """
    value = ApprovalRef(request_id=req.id, quote_id=q.id, hourly_cents=req.hourly_cents).pack()
    rate, per_day = money(req.hourly_cents), money(req.hourly_cents * 24)
    # The rate comes first: plain() cuts the dialog at 300 characters from the end.
    said = [f"The whole cluster bills {rate} per hour ({per_day} per day) from the moment it is "
            "ready until someone terminates it."]
    if req.lifetime_hours:
        said.append(envelope_terms(req.lifetime_hours, req.hourly_cents,
                                   terminates=terminates(q, policy), brief=True))
    if req.approvals_needed >= 2:
        given = len(approvers(req, approvals))
        said.append(f"It needs {req.approvals_needed} approvers: {given} so far.")
    if req.override_rule:
        said.append(f"You override the spend policy: {_rule(req.override_rule, plain=True)}.")
        title, ok = f"Override and approve {rate}/h?", "Override and approve"
    else:
        title, ok = f"Approve {rate}/h?", f"Approve {rate}/h"
    approve = button(
        "Approve", action_id=Action.APPROVE, value=value, style="primary",
        confirm=confirm(title, " ".join(said), ok=ok, danger=bool(req.override_rule)),
    )
    reject = button(
        "Reject", action_id=Action.REJECT, value=value, style="danger",
        confirm=confirm(
            "Reject this request?",
            f"The {rate}/h cluster will not be launched. The requester can ask again with a new "
            "quote.",
            ok="Reject", danger=True,
        ),
    )
    # A form for the reason the requester sees; its submission rejects (same reference).
    with_reason = button("Reject with reason…", action_id=Action.REJECT_WITH_REASON, value=value)
    return approve, reject, with_reason


def approval_outcome(
    req: LaunchRequest,
    q: QuoteInfo,
    approvals: Sequence[Approval],
    *,
    now: datetime,
    note: str | None = None,
    policy: SpendThresholds | None = None,
) -> Message:
    """The decided card: the same facts, no Approve/Reject, and what happened.

    `note` is bot-written mrkdwn; our own mentions/dates survive, anything else is escaped.
    """
    outcome = outcome_line(req, approvals, policy=policy)
    blocks: list[Block] = [*request_facts(req, q, now=now, policy=policy)]
    blocks.extend(context(line) for line in override_lines(req, decided=True))
    blocks.append(context(outcome))
    if note:
        blocks.append(context(mrkdwn(note)))
    if req.status is RequestStatus.LAUNCH_FAILED:
        rate = money(req.hourly_cents)
        blocks.append(actions(button(
            "Retry launch", action_id=Action.RETRY_LAUNCH,
            value=RequestRef(request_id=req.id, attempt=launch_attempt(req)).pack(),
            style="primary",
            confirm=confirm(
                f"Retry the launch at {rate}/h?",
                f"The whole cluster bills {rate} per hour ({money(req.hourly_cents * 24)} per "
                "day) from the moment it is ready until someone terminates it.",
                ok="Retry launch",
            ),
        ), *([wait_button(req)] if stock.failed_for_capacity(req) else [])))
    return compose(f"{_fallback(req, q)} — {req.status.value.replace('_', ' ')}", blocks,
                   key=f"approval-{req.status.value}")


def wait_button(req: LaunchRequest) -> ButtonElement:
    """**Wait for stock** on a launch that failed: up to the policy's maximum (or the hours
    the requester types in `/cluster wait`)."""
    return button("Wait for stock", action_id=Action.WAIT_FOR_STOCK,
                  value=WaitRef(request_id=req.id).pack(),
                  confirm=confirm("Wait for stock?", "I'll look for stock with backing-off "
                                  "re-quotes for up to the spend policy's longest wait (or `/"
                                  f"cluster wait {truncate(req.id, ID_MAX)} hours=N`) and launch "
                                  f"at {money(req.hourly_cents)}/h or less; a higher rate asks "
                                  "the approvers again.", ok="Wait"))


def terminates(q: QuoteInfo, policy: SpendThresholds | None) -> bool | None:
    """Whether the envelope ends in termination: a planned run's does; otherwise the policy
    says (`enforce_lifetime`), and without it here we don't know (None)."""
    if q.spec.planned_hours is not None:
        return True
    if policy is None:
        return None
    return bool(getattr(policy, "enforce_lifetime", False))


def request_facts(req: LaunchRequest, q: QuoteInfo, *, now: datetime,
                  policy: SpendThresholds | None = None) -> list[Block]:
    """Who asks for what, at which rate, with which workload (no env values, no ssh keys), and
    how its envelope ends (termination, or only a prompt: never worded as a cap unless so)."""
    ends = terminates(q, policy)
    label = escaped(shape_label(q.spec.shape, q.accelerator_name))
    asks = (f"{user(req.requester_id)} asks to launch *{label}* in "
            f"*{escaped(q.location, ID_MAX)}*")
    rates = (f"*{hourly(req.hourly_cents)}* for the whole cluster · "
             f"*{money(req.hourly_cents * 24)}* per day · "
             f"{hourly(q.per_gpu_hourly_cents)} per GPU ({q.spec.shape.total_gpus} GPUs)\n"
             f"Storage: {storage_summary(q)}")
    if q.spec.orchestrator != "none":  # the topology asked for is part of what is approved
        rates += f"\nOrchestrator: {topology(q.spec.orchestrator)}"
    if req.lifetime_hours:
        rates += (f"\n:hourglass: "
                  f"{envelope_terms(req.lifetime_hours, req.hourly_cents, terminates=ends)}")
    blocks: list[Block] = [section(asks), section(rates)]
    change = price_change_line(req)
    if change:
        blocks.append(section(change))
    blocks.append(section(fields=workload_fields(req)))
    blocks.append(context(
        f"{_quote_expiry(q, now)} · request {code(escaped(req.id, ID_MAX))}"
    ))
    return blocks


def price_change_line(req: LaunchRequest) -> str:
    """Re-approval after a new quote: say how the price moved (empty for a first approval)."""
    before = req.previous_hourly_cents
    if before is None:
        return ""
    now_rate = hourly(req.hourly_cents)
    if before == req.hourly_cents:
        return f":repeat: The quote was renewed: price unchanged at {now_rate} — approve again."
    pct = percent_change(before, req.hourly_cents)
    delta = f" ({pct})" if pct else ""
    return (f":warning: *The quote changed: was {hourly(before)}, now {now_rate}{delta}* — "
            "approve again.")


def workload_fields(req: LaunchRequest) -> list[str]:
    """The workload as the approver needs it: env *keys* only, a key count for SSH."""
    w = req.workload
    env = _listed([code(escaped(key, 40)) for key in sorted(w.env)], "none")
    ports = _listed([escaped(port, 20) for port in w.ports], "none")
    cmd = "image default"
    if w.docker_start_cmd:
        cmd = code(escaped(" ".join(w.docker_start_cmd), IMAGE_MAX))
    keys = len(w.ssh_keys)
    ssh = f"{keys} key{'s' if keys != 1 else ''}" if keys else "none — nobody can log in"
    return [
        f"*Name*\n{escaped(w.name) if w.name else '_none_'}",
        f"*Image*\n{code(escaped(w.image, IMAGE_MAX)) if w.image else 'provider default'}",
        f"*Start command*\n{cmd}",
        f"*Env keys*\n{env}",
        f"*Ports*\n{ports}",
        f"*SSH keys*\n{ssh}",
        f"*Automatic recovery*\n{'on' if w.auto_recovery else 'off'}",
    ]


def override_lines(req: LaunchRequest, *, decided: bool) -> list[str]:
    """The spend-policy rule this request breaks, if any (mrkdwn; empty when none)."""
    if not req.override_rule:
        return []
    rule = _rule(req.override_rule)
    if decided:
        return [f":warning: Broke the spend policy: {rule}."]
    return [f":warning: *Breaks the spend policy: {rule}.* Only an admin can approve it, as an "
            "explicit override."]


def _two_approver_lines(
    req: LaunchRequest, approvals: Sequence[Approval], policy: SpendThresholds | None
) -> list[str]:
    if req.approvals_needed < 2:
        return []
    return [f":busts_in_silhouette: {approvals_progress(req, approvals, policy)}"]


def approvals_progress(
    req: LaunchRequest, approvals: Sequence[Approval], policy: SpendThresholds | None = None
) -> str:
    """`"Needs two approvers (over $200.00/h): 1 of 2 so far — <@U0BOB>"` (mrkdwn)."""
    needed = req.approvals_needed
    limit = policy.one_approver_up_to_cents if policy is not None else None
    over = f" (over {hourly(limit)})" if limit is not None else ""
    given = approvers(req, approvals)
    who = f" — {_joined([user(a) for a in given])}" if given else ""
    count = "two" if needed == 2 else str(needed)
    return f"Needs {count} approvers{over}: {len(given)} of {needed} so far{who}"


def approvers(req: LaunchRequest, approvals: Sequence[Approval]) -> list[str]:
    """The distinct users who approved this request as it stands, in the order they did (the
    one rule: bot/domain/approvers.py)."""
    return approved_by(req, approvals)


def outcome_line(
    req: LaunchRequest, approvals: Sequence[Approval], *, policy: SpendThresholds | None = None
) -> str:
    """One context line saying how the request ended up (mrkdwn)."""
    status = req.status
    if status in _APPROVED:
        tail = {RequestStatus.LAUNCHING: " — launching",
                RequestStatus.LAUNCHED: " — launched"}.get(status, "")
        if status is RequestStatus.LAUNCHED and req.cluster_id:
            tail = f" — launched as {code(escaped(req.cluster_id, ID_MAX))}"
        elif status is RequestStatus.LAUNCHING and req.last_error:  # stored, not taken yet
            tail = f" — stored, not launched yet: {_reason(req).rstrip('.')}"
        if req.decided_by is None and not approvers(req, approvals):
            return f":white_check_mark: {auto_approved(policy).capitalize()}{tail}"
        who = deciders(req, approvals, Decision.APPROVE)
        how = " as an explicit override of the spend policy" if req.override_rule else ""
        return f":white_check_mark: Approved by {who}{how}{tail}"
    if status is RequestStatus.REJECTED:
        why = f": “{escaped(req.decision_note, 500)}”" if req.decision_note else ""
        return f":no_entry: Rejected by {deciders(req, approvals, Decision.REJECT)}{why}"
    if status is RequestStatus.SUPERSEDED:
        return (":arrows_counterclockwise: Superseded: the quote expired or its price changed — "
                "a new approval card follows")
    if status is RequestStatus.LAUNCH_FAILED:
        return (f":warning: Launch failed: {_reason(req).rstrip('.')}. The request is kept: an "
                "approver or the requester can retry.")
    if status is RequestStatus.FAILED:
        return f":x: Failed: {_reason(req)}"
    if status is RequestStatus.CANCELLED:
        return ":heavy_multiplication_x: Cancelled"
    if status is RequestStatus.WITHDRAWN:
        return f":leftwards_arrow_with_hook: {withdrawn_line(req)} — nothing will be launched"
    if status is RequestStatus.WAITING:
        until = f" until {when(req.wait_until)}" if req.wait_until else ""
        return (f":hourglass: Approved — waiting for stock{until}; it launches at "
                f"{money(req.hourly_cents)}/h or less, or comes back here if dearer")
    if req.approvals_needed >= 2:
        progress = approvals_progress(req, approvals, policy)
        return f":hourglass_flowing_sand: Waiting for approval — {progress}"
    return ":hourglass_flowing_sand: Waiting for approval"


def withdrawn_line(req: LaunchRequest) -> str:
    """`"Withdrawn by <@U0ALICE> at <date>: “reason”"` (mrkdwn): the requester took it back."""
    who = user(req.decided_by) if req.decided_by else "the requester"
    at = f" at {when(req.decided_at)}" if req.decided_at else ""
    why = f": “{escaped(req.decision_note, 500)}”" if req.decision_note else ""
    return f"Withdrawn by {who}{at}{why}"


def auto_approved(policy: SpendThresholds | None = None, *,
                  below_cents: int | None = None) -> str:
    """`"auto-approved by the spend policy (under $50.00/h)"`: never "an approver"."""
    limit = policy.auto_approve_below_cents if policy is not None else below_cents
    under = f" (under {hourly(limit)})" if limit is not None else ""
    return f"auto-approved by the spend policy{under}"


def deciders(req: LaunchRequest, approvals: Sequence[Approval], decision: Decision) -> str:
    """`"<@U1> at <date> and <@U2> at <date>"`, from the approvals or else the request itself."""
    picked: list[Approval] = []
    if decision is Decision.APPROVE:
        picked = approvals_that_count(req, approvals)
    else:
        for a in approvals:
            if (a.decision is decision and a.request_id == req.id
                    and all(p.approver_id != a.approver_id for p in picked)):
                picked.append(a)
    if picked:
        return _joined([f"{user(a.approver_id)} at {when(a.at)}" for a in picked[:5]])
    if req.decided_by:
        at = f" at {when(req.decided_at)}" if req.decided_at else ""
        return f"{user(req.decided_by)}{at}"
    return "an approver"


def _joined(items: Sequence[str]) -> str:
    """`"a"`, `"a and b"`, `"a, b and c"`."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _rule(text: str, *, plain: bool = False) -> str:
    """The policy's refusal text without its final full stop (we add our own); escaped for
    mrkdwn unless it goes into a plain-text confirm."""
    rule = " ".join(text.split()).rstrip(". ")
    return truncate(rule, ERROR_MAX) if plain else escaped(rule, ERROR_MAX)


def _hours(n: int) -> str:
    return f"{n} hour{'s' if n != 1 else ''}"


def _reason(req: LaunchRequest) -> str:
    return escaped(req.last_error, ERROR_MAX) if req.last_error else "no reason given"


def _listed(items: list[str], empty: str) -> str:
    if not items:
        return empty
    shown = ", ".join(items[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return f"{shown} …and {more} more" if more > 0 else shown


def _quote_expiry(q: QuoteInfo, now: datetime) -> str:
    if q.is_expired(now):
        return (f":hourglass: Quote expired {when(q.expires_at)}: it can no longer launch "
                "(approving prices it again and posts a fresh card)")
    return (f"Quote expires {when(q.expires_at)} "
            f"(in {duration((q.expires_at - now).total_seconds())})")


def _fallback(req: LaunchRequest, q: QuoteInfo) -> str:
    label = escaped(shape_label(q.spec.shape, q.accelerator_name))
    return (f"{user(req.requester_id)} asks to launch {label} in {escaped(q.location, ID_MAX)} "
            f"at {hourly(req.hourly_cents)} ({money(req.hourly_cents * 24)}/day)")
