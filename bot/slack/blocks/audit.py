"""`/cluster audit [id]` — the audit trail, newest first — and the receipt a cluster gets when it
is terminated.

The trail renders what the services recorded (`AuditEntry`): who did what to which subject,
for how much, and whether it went through. The receipt sums a cluster up with AI Reserve's own
figures (`accrued_cents`, `accrued_hours`), never an estimate of ours.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from slack_sdk.models.blocks import Block

from bot.domain.models import AuditEntry, ClusterRecord, ClusterState
from bot.slack.blocks.approval import auto_approved as auto
from bot.slack.blocks.cluster import cluster_ref, why_ended
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, HoursRef, RelaunchRef

# Payload characters (`payload_len`): every line together stays well under Slack's ~13k budget,
# each section under its 3000.
_PERSON = re.compile(r"^[UW][A-Z0-9]{2,}$")  # a Slack user id as the subject (a claim, a grant)
LIST_BUDGET = 9000
SECTION_BUDGET = 2800
DETAIL_MAX = 200
APPROVERS_SHOWN = 5
OUTCOMES = {"ok": "✅ ok", "refused": "⛔ refused", "failed": "⚠️ failed"}
# Actions whose amount is an hourly rate (the rate quoted, asked for, approved, launched at);
# every other amount is a sum (a final cost, an extension).
HOURLY_ACTIONS = frozenset({"quote", "request", "approve", "reject", "override", "launch",
                            "retry", "relaunch", "supersede", "claim", "recover",
                            "autorecover", "terminate"})


def audit_list(
    entries: Sequence[AuditEntry], *, subject_id: str | None, now: datetime
) -> Message:
    """The trail, newest first, one line per entry; older entries past the budget summarised."""
    about = f" of {code(escaped(subject_id, ID_MAX))}" if subject_id else ""
    title = f"Audit trail of {subject_id}" if subject_id else "Audit trail"
    blocks: list[Block] = [header(title)]
    if not entries:
        blocks.append(section(f"No audit entries{about} yet."))
        return compose(f"No audit entries{about}", blocks, key="audit")
    newest = sorted(entries, key=lambda e: e.at, reverse=True)
    lines = fit_lines([audit_line(e) for e in newest], LIST_BUDGET, "…{n} older entries")
    blocks.extend(section(chunk) for chunk in line_sections(lines))
    plural = "y" if len(entries) == 1 else "ies"
    blocks.append(context(f"{len(entries)} entr{plural}{about}, newest first · as of "
                          f"{when(now)} · the bot's own actions show as _the bot_"))
    return compose(f"Audit trail{about}: {len(entries)} entr{plural}", blocks, key="audit")


def audit_line(e: AuditEntry) -> str:
    """`• <when> · <@U…> · *approve* · `req_1` · $62.53/h · ✅ ok — detail` (mrkdwn)."""
    who = user(e.actor_id) if e.actor_id else "the bot"
    amount = ""
    if e.amount_cents is not None:
        shown = hourly(e.amount_cents) if e.action in HOURLY_ACTIONS else money(e.amount_cents)
        amount = f" · {shown}"
    outcome = OUTCOMES.get(e.outcome) or escaped(e.outcome, 20)
    # People in a detail ("requested by <@U…>") render as mentions; everything else is escaped.
    detail = f" — {mrkdwn(truncate(' '.join(e.detail.split()), DETAIL_MAX))}" \
        if e.detail.strip() else ""
    subject = (user(e.subject_id) if _PERSON.match(e.subject_id)
               else code(escaped(e.subject_id, ID_MAX)))
    return (f"• {when(e.at)} · {who} · *{escaped(e.action, 40)}* · "
            f"{subject}{amount} · {outcome}{detail}")


def unpaid_cents(c: ClusterRecord) -> int:
    """What AI Reserve could not charge for a cluster it ended for payment (0 otherwise)."""
    if c.termination_reason != "payment_grace_expired" or c.observed is None:
        return 0
    return c.observed.unpaid_cents


def receipt(
    c: ClusterRecord,
    *,
    requester: str | None,
    approvers: Sequence[str],
    auto_approved: bool,
    auto_approve_below_cents: int | None = None,
    now: datetime,
) -> Message:
    """The thread reply on terminate: what the cluster cost, how long it ran, who said yes."""
    hours = f"{c.accrued_hours} billed hour{'s' if c.accrued_hours != 1 else ''}"
    approved = _approved(approvers, auto_approved=auto_approved,
                         below_cents=auto_approve_below_cents)
    fields = [
        f"*Total cost*\n*{money(c.accrued_cents)}* (AI Reserve's figure)",
        f"*Billed hours*\n{c.accrued_hours}",
        f"*Ran*\n{_ran(c, now=now)}",
        f"*Locked rate*\n{hourly(c.hourly_cents)} ({money(c.hourly_cents * 24)} per day)",
        f"*Shape*\n{escaped(shape_label(c.shape, c.accelerator_name))} in "
        f"{escaped(c.location, ID_MAX)}",
        f"*Requested by*\n{user(requester) if requester else _no_request(c)}",
        f"*Approved by*\n{approved}",
        f"*Envelope*\n{_envelope(c)}",
    ]
    fields.append(f"*Why it ended*\n{why_ended(c)}")
    blocks: list[Block] = [
        section(f":receipt: *Receipt* for {cluster_ref(c)}: {money(c.accrued_cents)} over "
                f"{hours}"),
        section(fields=fields),
    ]
    notes = []
    unpaid = unpaid_cents(c)
    if unpaid:
        notes.append(f":credit_card: *{money(unpaid)} of it is unpaid*: AI Reserve could not "
                     "charge the account for it and ended the cluster when the payment grace "
                     "ran out; the account still owes it (AI Reserve's figure).")
    if c.volume_id:
        notes.append(f":floppy_disk: The shared volume {code(escaped(c.volume_id, ID_MAX))} is "
                     "not part of this receipt: it was kept and bills on its own until deleted.")
    blocks.extend(context(note) for note in notes)
    buttons = []
    if c.ready_at is not None and c.accrued_hours > 0:
        buttons.append(button("Billed hours chart", action_id=Action.HOURS_CHART,
                              value=HoursRef(cluster_id=c.id, hours=c.accrued_hours).pack()))
    if c.volume_id and c.status in (ClusterState.TERMINATED, ClusterState.FAILED):
        buttons.append(button(
            "Relaunch on this volume", action_id=Action.RELAUNCH_ON_VOLUME,
            value=RelaunchRef(cluster_id=c.id, volume_id=c.volume_id).pack()))
    if buttons:
        blocks.append(actions(*buttons))
    return compose(f"Receipt for cluster {escaped(c.id, ID_MAX)}: {money(c.accrued_cents)} over "
                   f"{hours} at {hourly(c.hourly_cents)}", blocks, key="receipt")


def line_sections(lines: Sequence[str], budget: int = SECTION_BUDGET) -> list[str]:
    """Whole lines grouped into section texts of at most `budget` payload characters."""
    texts: list[str] = []
    chunk: list[str] = []
    for line in lines:
        if chunk and payload_len("\n".join([*chunk, line])) > budget:
            texts.append("\n".join(chunk))
            chunk = []
        chunk.append(line)
    if chunk:
        texts.append("\n".join(chunk))
    return texts


def _ran(c: ClusterRecord, *, now: datetime) -> str:
    if c.ready_at is None:
        return "never became ready (never billed)"
    ended = c.terminated_at or now
    return (f"{when(c.ready_at)} → {when(ended)} "
            f"({duration((ended - c.ready_at).total_seconds())})")


def _no_request(c: ClusterRecord) -> str:
    return "nobody: found at AI Reserve, not launched through the bot" if c.adopted else "unknown"


def _approved(approvers: Sequence[str], *, auto_approved: bool, below_cents: int | None) -> str:
    if auto_approved:
        return auto(below_cents=below_cents)
    if not approvers:
        return "_not recorded_"
    shown = [user(a) for a in approvers[:APPROVERS_SHOWN]]
    more = len(approvers) - APPROVERS_SHOWN
    if more > 0:
        shown.append(f"{more} more")
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _envelope(c: ClusterRecord) -> str:
    if not c.lifetime_hours:
        return "none"
    plural = "s" if c.lifetime_hours != 1 else ""
    extended = f", extended by {user(c.extended_by)}" if c.extended_by else ""
    return (f"{c.lifetime_hours} hour{plural} approved (≈ "
            f"{money(c.hourly_cents * c.lifetime_hours)}){extended}")
