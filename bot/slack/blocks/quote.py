"""The quote card: what a cluster of this shape costs, and the way on to a launch request."""

from __future__ import annotations

from datetime import datetime

from slack_sdk.models.blocks import Block

from bot.domain.models import PriceLine, QuoteInfo
from bot.slack.blocks.format import (
    ID_MAX,
    code,
    duration,
    escaped,
    hourly,
    money,
    shape_label,
    user,
    when,
)
from bot.slack.blocks.message import Message, actions, button, compose, context, header, section
from bot.slack.ids import Action, QuoteRef

MAX_LINES = 12  # a breakdown has four lines; more than this is a provider bug, not a reason to fail


def quote_card(q: QuoteInfo, *, now: datetime) -> Message:
    """The live quote: prices, breakdown, the availability caveat, expiry and two buttons."""
    value = QuoteRef(quote_id=q.id).pack()
    blocks: list[Block] = [
        *quote_facts(q),
        context(f"{_expiry(q, now)} · requested by {user(q.requested_by)}"),
        actions(
            button("Request launch", action_id=Action.QUOTE_REQUEST_LAUNCH, value=value,
                   style="primary"),
            button("Discard", action_id=Action.QUOTE_DISCARD, value=value),
        ),
    ]
    return compose(_fallback(q), blocks, key="quote")


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


def quote_facts(q: QuoteInfo) -> list[Block]:
    """Header, rates, breakdown, placement: shared by the card and its closed form."""
    shape = q.spec.shape
    rates = (
        f"*{hourly(q.hourly_cents)}* for the whole cluster "
        f"({shape.total_gpus} GPUs on {shape.nodes} nodes) · *{money(q.daily_cents)}* per day\n"
        f"{hourly(q.per_gpu_hourly_cents)} per GPU (the provider's cluster rate) · "
        "billed hourly from the moment every node is ready until someone terminates it"
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
