"""What people see of requests waiting for stock: `/cluster waiting`, the App Home section and
the line under `/cluster list` (bot/services/stock.py does the waiting)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from slack_sdk.models.blocks import Block

from bot.domain.models import LaunchRequest, QuoteInfo
from bot.slack.blocks.cluster import withdraw_button
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *

WAITING_SHOWN = 15  # one block each (a Slack message or view holds at most 50 / 100)

Waiter = tuple[LaunchRequest, QuoteInfo]


def waiting_said(request: LaunchRequest) -> str:
    """The presser's answer to **Wait for stock**."""
    until = f" until {when(request.wait_until)}" if request.wait_until else ""
    return (f"Waiting for stock for `{request.id}`{until}: I re-quote its shape (backing off) "
            f"and launch it at {hourly(request.hourly_cents)} or less; a higher rate goes back "
            "to the approvers. `/cluster waiting` lists the waits; *Withdraw* stops this one.")


def waiter_text(req: LaunchRequest, q: QuoteInfo) -> str:
    label = escaped(shape_label(q.spec.shape, q.accelerator_name), 60)
    until = when(req.wait_until) if req.wait_until else "—"
    look = f" · next look {when(req.wait_next_at)}" if req.wait_next_at else ""
    return (f"{code(escaped(req.id, ID_MAX))} · *{label}* in {escaped(q.location, ID_MAX)} · "
            f"by {user(req.requester_id)}\nLaunches at *{hourly(req.hourly_cents)}* or less · "
            f"waits until {until}{look} · {req.wait_checks} re-quote"
            f"{'s' if req.wait_checks != 1 else ''} so far")


def waiting_blocks(waiting: Sequence[Waiter], *, viewer: str | None = None) -> list[Block]:
    """One section per wait, the requester's own with **Withdraw** beside it."""
    blocks: list[Block] = []
    for req, q in waiting[:WAITING_SHOWN]:
        mine = viewer is not None and req.requester_id == viewer
        blocks.append(section(waiter_text(req, q),
                              accessory=withdraw_button(req) if mine else None))
    more = len(waiting) - WAITING_SHOWN
    if more > 0:
        blocks.append(context(f"…and {more} more: `/cluster waiting` lists them."))
    return blocks


def waiting_list(waiting: Sequence[Waiter], *, viewer: str, now: datetime) -> Message:
    """`/cluster waiting`: every request waiting for stock, the soonest deadline first."""
    if not waiting:
        text = ("Nothing is waiting for stock. A quote with no stock, or a launch that found "
                "none, offers *Wait for stock*.")
        return compose(text, [section(text)], key="waiting")
    lines = [header(f"Waiting for stock ({len(waiting)})"),
             *waiting_blocks(waiting, viewer=viewer),
             context(f"Each shape is re-quoted at most once a minute, backing off to every 15 "
                     f"minutes; budgets hold each wait's room · {when(now)}")]
    return compose(f"{len(waiting)} requests waiting for stock", lines, key="waiting")


def home_section(waiting: Sequence[Waiter], *, viewer: str) -> list[Block]:
    """The App Home's "Waiting for stock" (the viewer's own waits), empty when none."""
    if not waiting:
        return []
    return [header("Waiting for stock"), *waiting_blocks(waiting, viewer=viewer)]


def with_list_line(listed: Message, count: int) -> Message:
    """`/cluster list` with, under it, the requests waiting for stock (not clusters yet)."""
    line = (f":hourglass: {count} request{'s' if count != 1 else ''} waiting for stock — "
            "`/cluster waiting` lists them.")
    return compose(f"{listed.text}\n{line}", [*listed.pairs(), context(line)], key="list")
