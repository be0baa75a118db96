"""Extensions of an envelope: the slash command's preview with its Confirm, the answer to an
ask, and the card approvers act on. What the spend policy decided (bot/domain/extension.py) is
rendered, never re-decided; every text states the dollars added and the new total."""

from __future__ import annotations

from slack_sdk.models.blocks import Block, ButtonElement

from bot.domain.extension import (
    EXTEND_RULE,
    Extension,
    ExtensionJudgement,
    ExtensionStatus,
    what_happens,
)
from bot.domain.models import ClusterRecord
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, EnvelopeRef, ExtensionRef


def extend_preview(c: ClusterRecord, j: ExtensionJudgement) -> Message:
    """`/cluster extend`'s private answer: what it adds, the new total, who decides — and a
    Confirm bound to the envelope it extends (nothing changes until it is pressed)."""
    value = EnvelopeRef(cluster_id=c.id, hours=j.from_hours, add=j.hours).pack()
    ok = "Extend now" if j.applies_now else "Ask the approvers"
    blocks: list[Block] = [
        section(f"Extend {code(escaped(c.id, ID_MAX))} by *{j.hours} h*? "
                f"{mrkdwn(what_happens(j))}"),
        actions(button(f"{ok} (+{money(j.added_cents)})", action_id=Action.EXTEND, value=value,
                       style="primary")),
        context(EXTEND_RULE),
    ]
    return compose(f"Extend {escaped(c.id, ID_MAX)} by {j.hours} h: +{money(j.added_cents)}, "
                   f"{money(j.total_cents)} in all?", blocks, key="extend.preview")


def asked(cluster: ClusterRecord, j: ExtensionJudgement, ext: Extension | None) -> str:
    """What the asker is told once their Extend went through."""
    if ext is None:
        return (f"Extended `{cluster.id}` by {j.hours} h (+{money(j.added_cents)}): it may now "
                f"run {cluster.lifetime_hours} hours in all (≈ {money(j.total_cents)}).")
    return (f"Asked: extending `{cluster.id}` by {j.hours} h (+{money(j.added_cents)}, "
            f"{j.to_hours} h ≈ {money(j.total_cents)} in all) needs {_needs(ext)}. The card is "
            f"in the approvals channel (`{ext.id}`); nothing is extended until it is approved.")


def extension_card(ext: Extension) -> Message:
    """The card in the approvals channel: pending with Approve/Reject, or its outcome."""
    facts = (f"{user(ext.requested_by)} asks to extend the envelope of "
             f"{code(escaped(ext.cluster_id, ID_MAX))} (owner {user(ext.owner_id)}) by "
             f"*{ext.hours} h ≈ {money(ext.added_cents)}* at {hourly(ext.hourly_cents)}: "
             f"{ext.from_hours} h → *{ext.to_hours} h ≈ {money(ext.total_cents)}* in all.")
    blocks: list[Block] = [section(facts)]
    if ext.override_rule:
        blocks.append(section(f":warning: It breaks the spend policy: {mrkdwn(ext.override_rule)} "
                              "Only a policy admin can approve it, as an explicit override."))
    if ext.status is ExtensionStatus.PENDING:
        blocks.append(context(f"Needs {_needs(ext)}; never the owner. · `{ext.id}`"))
        blocks.append(actions(*extension_buttons(ext)))
        return compose(f"Extend {escaped(ext.cluster_id, ID_MAX)} by {ext.hours} h "
                       f"(+{money(ext.added_cents)}) — waiting for approval", blocks,
                       key="extension")
    blocks.append(context(_outcome(ext) + f" · `{ext.id}`"))
    return compose(f"Extend {escaped(ext.cluster_id, ID_MAX)} by {ext.hours} h: "
                   f"{ext.status.value}", blocks, key="extension")


def extension_buttons(ext: Extension) -> tuple[ButtonElement, ButtonElement]:
    """Approve and Reject of a pending extension, bound to what they show (the card's and an
    approver's Home's)."""
    value = ExtensionRef(extension_id=ext.id, hours=ext.hours, from_hours=ext.from_hours).pack()
    said = (f"+{ext.hours} h ≈ {money(ext.added_cents)} at {money(ext.hourly_cents)}/h; "
            f"the envelope becomes {ext.to_hours} h ≈ {money(ext.total_cents)}. The "
            "budgets are checked again when the last approval is given.")
    return (
        button("Approve", action_id=Action.EXTENSION_APPROVE, value=value, style="primary",
               confirm=confirm(f"Approve +{ext.hours} h?", said,
                               ok=f"Approve +{money(ext.added_cents)}",
                               danger=bool(ext.override_rule))),
        button("Reject", action_id=Action.EXTENSION_REJECT, value=value, style="danger",
               confirm=confirm("Reject this extension?", "Nothing is extended; the cluster "
                               "keeps its envelope.", ok="Reject", danger=True)))


def pending_line(ext: Extension) -> str:
    """One pending extension in a line (an approver's Home, the envelope's DMs)."""
    return (f":hourglass: {user(ext.requested_by)} asks to extend "
            f"{code(escaped(ext.cluster_id, ID_MAX))} by *{ext.hours} h ≈ "
            f"{money(ext.added_cents)}* ({ext.from_hours} h → {ext.to_hours} h ≈ "
            f"{money(ext.total_cents)}); waiting for {_needs(ext)} · `{ext.id}`")


def extension_steps(ext: Extension) -> list[tuple[str, str]]:
    """The extension's steps for the cluster's thread, each with its once-key: asked, each
    approval while two or more are needed ("1 of 2 approvals: @bob"), and how it ended unless
    it was applied (the applied extension has its own thread note, `envelope_extended`)."""
    steps = [(f"extension/{ext.id}/asked",
              f":hourglass: {user(ext.requested_by)} asked to extend the envelope by "
              f"{ext.hours} h (+{money(ext.added_cents)}, {ext.from_hours} h → {ext.to_hours} h "
              f"≈ {money(ext.total_cents)}): it needs "
              f"{'a policy admin (an override)' if ext.override_rule else _count(ext)}")]
    if ext.approvals_needed >= 2 or ext.override_rule:
        steps += [(f"extension/{ext.id}/approved/{a}",
                   f":ballot_box_with_check: {n} of {ext.approvals_needed} approvals for "
                   f"+{ext.hours} h: {user(a)}")
                  for n, a in enumerate(ext.approved_by, 1)]
    if ext.status not in (ExtensionStatus.PENDING, ExtensionStatus.APPLIED):
        steps.append((f"extension/{ext.id}/{ext.status.value}",
                      f"{_outcome(ext)} (+{ext.hours} h asked by {user(ext.requested_by)})"))
    return steps


def _count(ext: Extension) -> str:
    return f"{ext.approvals_needed} approver{'s' if ext.approvals_needed != 1 else ''}"


def _outcome(ext: Extension) -> str:
    by = user(ext.decided_by) if ext.decided_by else "nobody"
    if ext.status is ExtensionStatus.APPLIED:
        return (f":white_check_mark: Approved by "
                f"{' and '.join(user(a) for a in ext.approved_by)}: extended to {ext.to_hours} h.")
    if ext.status is ExtensionStatus.REJECTED:
        return f":x: Rejected by {by}; nothing was extended."
    if ext.status is ExtensionStatus.REFUSED:
        return (f":no_entry: Not extended: the spend policy refused it when it was approved. "
                f"{mrkdwn(ext.note or '')}")
    return f":information_source: Not extended: {mrkdwn(ext.note or 'it is out of date')}"


def _needs(ext: Extension) -> str:
    if ext.override_rule:
        return "a policy admin's approval (an override)"
    given = ""
    if ext.approved_by:
        given = (f": {len(ext.approved_by)} of {ext.approvals_needed} "
                 f"({', '.join(user(a) for a in ext.approved_by)})")
    return f"{ext.approvals_needed} approver{'s' if ext.approvals_needed != 1 else ''}{given}"
