"""The approval card an approver acts on, and the same card once the request was decided.

The card shows the rate the Approve button is bound to (`req.hourly_cents`, packed into the
`ApprovalRef`), never env values (keys only): the card lives in a channel.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from slack_sdk.models.blocks import Block

from bot.domain.models import Approval, Decision, LaunchRequest, QuoteInfo, RequestStatus
from bot.slack.blocks.format import (
    ERROR_MAX,
    ID_MAX,
    IMAGE_MAX,
    code,
    duration,
    escaped,
    hourly,
    money,
    mrkdwn,
    percent_change,
    shape_label,
    user,
    when,
)
from bot.slack.blocks.message import (
    Message,
    actions,
    button,
    compose,
    confirm,
    context,
    section,
)
from bot.slack.blocks.quote import storage_summary
from bot.slack.ids import Action, ApprovalRef, RequestRef

MAX_LISTED = 20  # env keys / ports listed by name before "…and N more"
_APPROVED = (RequestStatus.APPROVED, RequestStatus.LAUNCHING, RequestStatus.LAUNCHED)


def approval_card(req: LaunchRequest, q: QuoteInfo, *, now: datetime) -> Message:
    """The pending request with Approve / Reject, each behind a confirm that states the rate."""
    value = ApprovalRef(request_id=req.id, quote_id=q.id, hourly_cents=req.hourly_cents).pack()
    rate, per_day = money(req.hourly_cents), money(req.hourly_cents * 24)
    approve = button(
        "Approve", action_id=Action.APPROVE, value=value, style="primary",
        confirm=confirm(
            f"Approve {rate}/h?",
            f"The whole cluster bills {rate} per hour ({per_day} per day) from the moment it is "
            "ready until someone terminates it.",
            ok=f"Approve {rate}/h",
        ),
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
    blocks = [*request_facts(req, q, now=now), actions(approve, reject)]
    return compose(f"{_fallback(req, q)} — waiting for approval", blocks, key="approval")


def approval_outcome(
    req: LaunchRequest,
    q: QuoteInfo,
    approvals: Sequence[Approval],
    *,
    now: datetime,
    note: str | None = None,
) -> Message:
    """The decided card: the same facts, no Approve/Reject, and what happened.

    `note` is bot-written mrkdwn; our own mentions/dates survive, anything else is escaped.
    """
    outcome = outcome_line(req, approvals)
    blocks: list[Block] = [*request_facts(req, q, now=now), context(outcome)]
    if note:
        blocks.append(context(mrkdwn(note)))
    if req.status is RequestStatus.LAUNCH_FAILED:
        rate = money(req.hourly_cents)
        blocks.append(actions(button(
            "Retry launch", action_id=Action.RETRY_LAUNCH,
            value=RequestRef(request_id=req.id).pack(), style="primary",
            confirm=confirm(
                f"Retry the launch at {rate}/h?",
                f"The whole cluster bills {rate} per hour ({money(req.hourly_cents * 24)} per "
                "day) from the moment it is ready until someone terminates it.",
                ok="Retry launch",
            ),
        )))
    return compose(f"{_fallback(req, q)} — {req.status.value.replace('_', ' ')}", blocks,
                   key=f"approval-{req.status.value}")


def request_facts(req: LaunchRequest, q: QuoteInfo, *, now: datetime) -> list[Block]:
    """Who asks for what, at which rate, with which workload (no env values, no ssh keys)."""
    label = escaped(shape_label(q.spec.shape, q.accelerator_name))
    asks = (f"{user(req.requester_id)} asks to launch *{label}* in "
            f"*{escaped(q.location, ID_MAX)}*")
    rates = (f"*{hourly(req.hourly_cents)}* for the whole cluster · "
             f"*{money(req.hourly_cents * 24)}* per day · "
             f"{hourly(q.per_gpu_hourly_cents)} per GPU ({q.spec.shape.total_gpus} GPUs)\n"
             f"Storage: {storage_summary(q)}")
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


def outcome_line(req: LaunchRequest, approvals: Sequence[Approval]) -> str:
    """One context line saying how the request ended up (mrkdwn)."""
    status = req.status
    if status in _APPROVED:
        who = deciders(req, approvals, Decision.APPROVE)
        tail = {RequestStatus.LAUNCHING: " — launching",
                RequestStatus.LAUNCHED: " — launched"}.get(status, "")
        if status is RequestStatus.LAUNCHED and req.cluster_id:
            tail = f" — launched as {code(escaped(req.cluster_id, ID_MAX))}"
        return f":white_check_mark: Approved by {who}{tail}"
    if status is RequestStatus.REJECTED:
        return f":no_entry: Rejected by {deciders(req, approvals, Decision.REJECT)}"
    if status is RequestStatus.SUPERSEDED:
        return (":arrows_counterclockwise: Superseded: the quote expired or its price changed — "
                "a new approval card follows")
    if status is RequestStatus.LAUNCH_FAILED:
        return (f":warning: Launch failed: {_reason(req)}. The request is kept: an approver or "
                "the requester can retry.")
    if status is RequestStatus.FAILED:
        return f":x: Failed: {_reason(req)}"
    if status is RequestStatus.CANCELLED:
        return ":heavy_multiplication_x: Cancelled"
    return ":hourglass_flowing_sand: Waiting for approval"


def deciders(req: LaunchRequest, approvals: Sequence[Approval], decision: Decision) -> str:
    """`"<@U1> at <date>, <@U2> at <date>"`, from the approvals or else the request itself."""
    picked = [a for a in approvals if a.decision is decision and a.request_id == req.id]
    if picked:
        return ", ".join(f"{user(a.approver_id)} at {when(a.at)}" for a in picked[:5])
    if req.decided_by:
        at = f" at {when(req.decided_at)}" if req.decided_at else ""
        return f"{user(req.decided_by)}{at}"
    return "an approver"


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
        return f"Quote expired {when(q.expires_at)}"
    return (f"Quote expires {when(q.expires_at)} "
            f"(in {duration((q.expires_at - now).total_seconds())})")


def _fallback(req: LaunchRequest, q: QuoteInfo) -> str:
    label = escaped(shape_label(q.spec.shape, q.accelerator_name))
    return (f"{user(req.requester_id)} asks to launch {label} in {escaped(q.location, ID_MAX)} "
            f"at {hourly(req.hourly_cents)} ({money(req.hourly_cents * 24)}/day)")
