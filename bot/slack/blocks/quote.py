"""The quote card: what a cluster of this shape costs, and the way on to a launch request."""

from __future__ import annotations

from datetime import datetime

from slack_sdk.models.blocks import Block

from bot.domain.envelope import envelope_terms
from bot.domain.models import PriceLine, QuoteInfo, QuoteOutlook
from bot.domain.readiness import topology
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.blocks.planning import (
    advice_blocks,
    alternative_blocks,
    plan_blocks,
    stock_blocks,
)
from bot.slack.ids import Action, QuoteRef

MAX_LINES = 12  # a breakdown has four lines; more than this is a provider bug, not a reason to fail


def quote_card(q: QuoteInfo, *, now: datetime, outlook: QuoteOutlook | None = None) -> Message:
    """The live quote: prices, breakdown, the availability caveat, expiry and two buttons.

    With an `outlook`, what the spend policy says about this person launching it is on the card,
    with the numbers; a refused request or a shape with no stock gets no **Request launch**."""
    value = QuoteRef(quote_id=q.id).pack()
    outlook = outlook or QuoteOutlook()
    verdict = _outlook_blocks(q, outlook)
    no_stock = verdict[-1:] if q.availability == "none" else []  # said first
    blocks: list[Block] = [*no_stock, *quote_facts(q, outlook=outlook), *plan_blocks(q)]
    blocks.extend(verdict[:-1] if no_stock else verdict)
    blocks.extend([*stock_blocks(q, outlook), *alternative_blocks(q, outlook),
                   *advice_blocks(q)])
    blocks.append(context(f"{_expiry(q, now)} · requested by {user(q.requested_by)}"))
    buttons = []
    if outlook.can_request and q.availability != "none":
        buttons.append(button("Request launch", action_id=Action.QUOTE_REQUEST_LAUNCH,
                              value=value, style="primary"))
    elif outlook.can_request:  # no stock: ask now, launch when it appears
        buttons.append(button("Wait for stock", action_id=Action.QUOTE_WAIT_FOR_STOCK,
                              value=value, style="primary"))
    buttons.append(button("Discard", action_id=Action.QUOTE_DISCARD, value=value))
    blocks.append(actions(*buttons))
    return compose(_fallback(q), blocks, key="quote")


def _outlook_blocks(q: QuoteInfo, o: QuoteOutlook) -> list[Block]:
    """The policy's verdict and the stock, said before anyone fills in a launch form."""
    out: list[Block] = []
    if o.refused is not None and not o.override:
        out.append(section(f":no_entry: *The spend policy would refuse this launch.* "
                           f"{mrkdwn(o.refused)} Change the shape or ask an approver about "
                           "the policy."))
    elif o.refused is not None:
        out.append(section(f":warning: *This breaks the spend policy:* {mrkdwn(o.refused)} A "
                           "request goes to a policy admin, who may approve it as an explicit "
                           "override."))
    elif o.approvals_needed == 0:
        under = (f" (under {hourly(o.auto_approve_below_cents)})"
                 if o.auto_approve_below_cents is not None else "")
        out.append(context(f"A request would be auto-approved by the spend policy{under}."))
    else:
        who = "two different approvers" if o.approvals_needed >= 2 else "one approver"
        out.append(context(f"A request needs {who} (the spend policy)."))
    if o.lifetime_hours:
        out.append(context(":hourglass: " + envelope_terms(
            o.lifetime_hours, q.hourly_cents, terminates=o.envelope_terminates)))
    if q.availability == "none":
        where = ", ".join(f"{escaped(loc, ID_MAX)} ({escaped(level, 20)})"
                          for loc, level in o.stock_elsewhere)
        if q.spec.volume_id:  # the volume pins the place: other locations are no way out
            tail = (f" Volume {code(escaped(q.spec.volume_id, ID_MAX))} lives here, so a "
                    "cluster that mounts it can only be placed here; try later or another "
                    "accelerator.")
        elif where:
            tail = f" The same shape has stock in: {where} — quote again with `location=…`."
        else:
            tail = (" No other location lists stock for it either; try later or another "
                    "accelerator.")
        out.append(section(f":no_entry_sign: *No availability in {escaped(q.location, ID_MAX)}* "
                           f"for this shape right now, so it cannot launch here.{tail}"))
    return out


def quote_expired(q: QuoteInfo, *, discarded_by: str | None = None) -> Message:
    """The same card once the quote expired or was discarded: facts kept, buttons gone."""
    if discarded_by:
        outcome = f":wastebasket: Discarded by {user(discarded_by)}."
    else:
        outcome = f":hourglass: This quote expired {when(q.expires_at)}."
    blocks: list[Block] = [
        *quote_facts(q),
        context(f"{outcome} Run `/cluster quote` again for a fresh price."),
    ]
    return compose(f"{_fallback(q)} (no longer valid)", blocks, key="quote-closed")


def quote_facts(q: QuoteInfo, *, outlook: QuoteOutlook | None = None) -> list[Block]:
    """Header, rates, breakdown, placement: shared by the card and its closed form."""
    shape = q.spec.shape
    single = outlook.single_machine_per_gpu_cents if outlook else None
    beside = (f" (a single machine: {hourly(single)} per GPU)" if single is not None else "")
    rates = (
        f"*{hourly(q.hourly_cents)}* for the whole cluster "
        f"({shape.total_gpus} GPUs on {shape.nodes} nodes) · *{money(q.daily_cents)}* per day\n"
        f"{hourly(q.per_gpu_hourly_cents)} per GPU (the provider's cluster rate){beside} · "
        "billed per started hour from the moment every node is ready until someone terminates "
        "it"
    )
    breakdown = "\n".join(_line(line) for line in q.lines[:MAX_LINES]) or "_no breakdown given_"
    return [
        header(shape_label(shape, q.accelerator_name)),
        section(rates),
        section(f"*Breakdown*\n{breakdown}"),
        section(fields=[
            f"*Location*\n{escaped(q.location, ID_MAX)}",
            f"*Storage*\n{storage_summary(q)}",
            f"*Availability*\n{escaped(q.availability, ID_MAX)}",
            *([f"*Orchestrator*\n{topology(q.spec.orchestrator)}"]
              if q.spec.orchestrator != "none" else []),
        ]),
        context(
            "Availability is the stock signal for ONE node: placing all "
            f"{shape.nodes} nodes together is confirmed only at launch."
        ),
    ]


def storage_summary(q: QuoteInfo) -> str:
    """The root disks and the shared volume, in words (mrkdwn, escaped)."""
    spec = q.spec
    disk = f"{spec.root_disk_gb:,} GB" if spec.root_disk_gb is not None else "default size"
    parts = [f"root disk {disk} per node"]
    if spec.storage_gb is not None:
        parts.append(f"new shared volume {spec.storage_gb:,} GB (it survives terminate and "
                     "bills until deleted)")
    elif spec.volume_id:
        parts.append(f"mounts volume {code(escaped(spec.volume_id, ID_MAX))}")
    else:
        parts.append("no shared volume")
    return "; ".join(parts)


def _line(line: PriceLine) -> str:
    price = hourly(line.hourly_cents) if line.hourly_cents else "included"
    detail = f" ({escaped(line.detail, 100)})" if line.detail else ""
    return f"• {escaped(line.label, 60)}{detail}: {price}"


def _expiry(q: QuoteInfo, now: datetime) -> str:
    ref = code(escaped(q.id, ID_MAX))
    if q.is_expired(now):
        return f"Quote {ref} expired {when(q.expires_at)}"
    left = duration((q.expires_at - now).total_seconds())
    return f"Quote {ref} expires {when(q.expires_at)} (in {left})"


def _fallback(q: QuoteInfo) -> str:
    return (f"Quote: {escaped(shape_label(q.spec.shape, q.accelerator_name))} in "
            f"{escaped(q.location, ID_MAX)} — {hourly(q.hourly_cents)} "
            f"({money(q.daily_cents)}/day)")
