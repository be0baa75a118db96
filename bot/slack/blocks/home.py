"""The App Home tab: your live clusters, what waits for your approval, your spend this month.

Every list is cut to a fixed number of entries so the view stays far inside Slack's 100 blocks
whatever the counts; the rest is summarised with the command that shows it all. The buttons are
the very ones the other messages carry (Terminate with its confirm; Approve / Reject bound to
the quote and rate by `ApprovalRef`), so one listener serves both. What the lists hold — which
clusters are the user's, which requests they may decide — the caller has already chosen.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.domain.envelope import envelope_terms
from bot.domain.extension import Extension
from bot.domain.models import ClusterRecord, LaunchRequest, QuoteInfo
from bot.domain.templates import ClusterTemplate
from bot.slack.blocks import extension as extension_blocks
from bot.slack.blocks import found as found_blocks
from bot.slack.blocks import stock as stock_blocks
from bot.slack.blocks import templates as template_blocks
from bot.slack.blocks.approval import (
    SpendThresholds,
    approval_buttons,
    override_lines,
    terminates,
)
from bot.slack.blocks.cluster import (
    TERMINABLE,
    cluster_ref,
    cluster_state_line,
    terminate_button,
)
from bot.slack.blocks.format import *
from bot.slack.blocks.listing import together_line, totals_by_state
from bot.slack.blocks.message import *
from bot.slack.blocks.render import render

MAX_VIEW_BLOCKS = 100
CLUSTERS_SHOWN = 20  # one block each
PENDING_SHOWN = 15  # two blocks each (the request, its buttons)
BAR_WIDTH = 10


def _blocks(
    *,
    user_id: str,
    clusters: Sequence[ClusterRecord],
    pending: Sequence[tuple[LaunchRequest, QuoteInfo]],
    is_approver: bool,
    month_spent_cents: int,
    budget_cents: int | None,
    month: str,
    now: datetime,
    waiting: Sequence[tuple[LaunchRequest, QuoteInfo]] = (),
    templates: Sequence[ClusterTemplate] = (),
    unclaimed: Sequence[ClusterRecord] = (),
    unclaimed_count: int = 0,
    unclaimed_cents: int = 0,
    policy: SpendThresholds | None = None,
    extensions: Sequence[Extension] = (),
) -> list[Block]:
    blocks: list[Block] = [
        section(f"Hello {user(user_id)} — your GPU clusters on AI Reserve. Every cluster bills "
                "its whole hourly rate from the moment it is ready until someone terminates it."),
        *_clusters(clusters, now=now),
        *stock_blocks.home_section(waiting, viewer=user_id),
    ]
    if is_approver:
        blocks.extend([divider(), *_pending(pending, now=now, policy=policy,
                                            extensions=extensions)])
        if unclaimed_count:
            blocks.extend([divider(), *found_blocks.home_section(
                unclaimed, count=unclaimed_count, hourly_cents=unclaimed_cents)])
    blocks.extend([divider(), *_spend(month_spent_cents, budget_cents, month)])
    if templates:
        blocks.extend([divider(), *template_blocks.home_section(templates, user_id=user_id)])
    blocks.append(context(f"`/cluster help` lists every command · updated {when(now)}"))
    if len(blocks) > MAX_VIEW_BLOCKS:  # cannot happen: every list is cut above
        raise ValueError(f"a home view holds at most {MAX_VIEW_BLOCKS} blocks")
    return blocks


def home_view(**fields: Any) -> View:
    """The home tab of `user_id` (≤ 100 blocks with any number of clusters and requests):
    `_blocks`' arguments."""
    blocks, _ = _identified(_blocks(**fields))
    return View(type="home", blocks=blocks)


def home_payload(facts: object, *, now: datetime) -> dict[str, Any]:
    """What `views.publish` sends for the Home of `facts` (bot/services/home.py): `home_view`'s
    view as slack_sdk's `to_dict` gives it, each block rendered once. (A View handed to
    `views_publish` is rendered again by slack_sdk's reflection, validators and all: the
    larger part of a Home's CPU, and a Home is published after every change.) One shape for
    every publisher of a Home."""
    _, rendered = _identified(_blocks(**{n: getattr(facts, n) for n in _FACTS}, now=now))
    return {"type": "home", "blocks": rendered}


_FACTS = tuple(n for n in inspect.signature(_blocks).parameters if n != "now")


def spend_bar(spent_cents: int, budget_cents: int) -> tuple[str, int]:
    """`("▓▓▓▓░░░░░░", 42)`: the share of the budget spent, the bar capped at full."""
    if budget_cents <= 0:
        pct = 100 if spent_cents > 0 else 0
    else:
        pct = spent_cents * 100 // budget_cents
    filled = min(BAR_WIDTH, max(0, round(min(pct, 100) * BAR_WIDTH / 100)))
    return "▓" * filled + "░" * (BAR_WIDTH - filled), max(0, pct)


def _clusters(clusters: Sequence[ClusterRecord], *, now: datetime) -> list[Block]:
    blocks: list[Block] = [header("Your live clusters")]
    if not clusters:
        blocks.append(section("You have no live clusters. `/cluster quote h100x8 nodes=2` prices "
                              "one; *Request launch* on the quote asks an approver."))
        return blocks
    blocks.append(context(together_line(totals_by_state(clusters))))
    for c in clusters[:CLUSTERS_SHOWN]:
        hours = f"{c.accrued_hours} billed hour{'s' if c.accrued_hours != 1 else ''}"
        envelope = f" · envelope {c.lifetime_hours} h" if c.lifetime_hours else ""
        text = (f"{cluster_ref(c)} · {escaped(shape_label(c.shape, c.accelerator_name), 60)} · "
                f"{escaped(c.location, ID_MAX)}\n{cluster_state_line(c, now=now)}\n"
                f"*{hourly(c.hourly_cents)}* · {money(c.accrued_cents)} so far over {hours} "
                f"(AI Reserve's figures){envelope}")
        accessory = terminate_button(c) if c.status in TERMINABLE else None
        blocks.append(section(text, accessory=accessory))
    more = len(clusters) - CLUSTERS_SHOWN
    if more > 0:
        blocks.append(context(f"…and {more} more. `/cluster list` shows them all."))
    return blocks


def _pending(pending: Sequence[tuple[LaunchRequest, QuoteInfo]], *, now: datetime,
             policy: SpendThresholds | None,
             extensions: Sequence[Extension] = ()) -> list[Block]:
    """Launch requests, then envelope extensions, waiting for this approver (PENDING_SHOWN in
    all, two blocks each)."""
    blocks: list[Block] = [header("Waiting for your approval")]
    if not pending and not extensions:
        blocks.append(section("Nothing is waiting for your approval."))
        return blocks
    for req, q in pending[:PENDING_SHOWN]:
        blocks.append(section(_request_text(req, q, now=now, policy=policy)))
        # a reason: on the card
        blocks.append(actions(*approval_buttons(req, q, policy=policy)[:2]))
    room = max(0, PENDING_SHOWN - len(pending))
    for ext in extensions[:room]:
        blocks.append(section(extension_blocks.pending_line(ext)))
        blocks.append(actions(*extension_blocks.extension_buttons(ext)))
    more = len(pending) + len(extensions) - PENDING_SHOWN
    if more > 0:
        what = "requests and extensions" if extensions else "requests"
        blocks.append(context(f"…and {more} more {what}: their cards are in the approvals "
                              "channel."))
    return blocks


def _request_text(req: LaunchRequest, q: QuoteInfo, *, now: datetime,
                  policy: SpendThresholds | None) -> str:
    label = escaped(shape_label(q.spec.shape, q.accelerator_name), 60)
    lines = [f"{user(req.requester_id)} asks for *{label}* in {escaped(q.location, ID_MAX)} at "
             f"*{hourly(req.hourly_cents)}* ({money(req.hourly_cents * 24)} per day) · request "
             f"{code(escaped(req.id, ID_MAX))}"]
    if req.lifetime_hours:
        lines.append(":hourglass: " + envelope_terms(req.lifetime_hours, req.hourly_cents,
                                                    terminates=terminates(q, policy)))
    if req.approvals_needed >= 2:
        lines.append(f":busts_in_silhouette: Needs {req.approvals_needed} approvers")
    lines.extend(override_lines(req, decided=False))
    if q.is_expired(now):
        lines.append(f"Quote expired {when(q.expires_at)}: a fresh card follows.")
    else:
        lines.append(f"Quote expires in {duration((q.expires_at - now).total_seconds())}")
    return "\n".join(lines)


def _spend(spent: int, budget: int | None, month: str) -> list[Block]:
    label = escaped(month, 20)
    blocks: list[Block] = [header("Your spend this month")]
    if budget is None:
        blocks.append(section(f"*{money(spent)}* spent in {label} · no monthly budget applies "
                              "to you."))
        return blocks
    bar, pct = spend_bar(spent, budget)
    over = (f"\n:warning: *Over budget by {money(spent - budget)}*: a new launch breaks the "
            "spend policy." if spent > budget else "")
    blocks.append(section(f"*{money(spent)}* of your *{money(budget)}* budget in {label}\n"
                          f"`{bar}` {pct} %{over}"))
    blocks.append(context("AI Reserve's billed hours so far this month."))
    return blocks


def _identified(blocks: list[Block]) -> tuple[list[Block], list[dict[str, Any]]]:
    """Content-derived block ids (as `message.compose` gives), so a re-published home keeps its
    ids and an edited one gets new ones: the blocks, and each rendered (once) with its id."""
    rendered = [render(block) for block in blocks]
    digest = hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()[:10]
    for index, (block, out) in enumerate(zip(blocks, rendered, strict=True)):
        if block.block_id is None:
            block.block_id = out["block_id"] = f"home.{index}.{digest}"
    return blocks, rendered
