"""`/cluster list`: one line per cluster (a page of them), the live clusters' totals by state
("together $X/h" counts only what bills now), and a **Status** and a **Terminate** button for
each listed cluster."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import accumulate
from typing import Any

from slack_sdk.models.blocks import Block

from bot.domain.models import ClusterRecord, ClusterState
from bot.slack.blocks.cluster import (
    BILLING_NOW,
    SECTION_BUDGET,
    TERMINABLE,
    owner_mention,
    terminate_button,
)
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.blocks.render import render
from bot.slack.ids import Action, ClusterRef

LIST_TEXT_BUDGET = 9000
ROWS = 20  # Slack's 50 blocks per message: the rest by `/cluster status <id>`
PAYLOAD_BUDGET = 12_000  # of Slack's ~13k characters per message


def cluster_list_with_buttons(clusters: Sequence[ClusterRecord], *, now: datetime,
                              by_state: Mapping[ClusterState, tuple[int, int]] | None = None,
                              page: int = 1, pages: int = 1) -> Message:
    """The list (one page of it: see `cluster_list`), then a row of buttons per cluster, as
    many as fit the message."""
    listed = cluster_list(clusters, now=now, by_state=by_state, page=page, pages=pages)
    used = len(json.dumps(list(listed.rendered)))
    return compose(listed.text, [*listed.pairs(), *rows(clusters, room=PAYLOAD_BUDGET - used)],
                   key="list")


def rows(clusters: Sequence[ClusterRecord], *, room: int
         ) -> list[tuple[Block, Mapping[str, Any]]]:
    """**Status** and **Terminate** (its confirm and claim) for the first clusters that fit,
    each with its rendering."""
    made = [actions(button(f"Status {truncate(c.id, 40)}", action_id=Action.CLUSTER_STATUS,
                           value=ClusterRef(cluster_id=c.id).pack()),
                    *([terminate_button(c)] if c.status in TERMINABLE else []))
            for c in clusters[:ROWS]]
    pairs = [(row, render(row)) for row in made]
    sizes = accumulate(len(json.dumps(d)) for _, d in pairs)
    return [pair for pair, size in zip(pairs, sizes, strict=True) if size <= room]


def cluster_list(clusters: Sequence[ClusterRecord], *, now: datetime,
                 by_state: Mapping[ClusterState, tuple[int, int]] | None = None,
                 page: int = 1, pages: int = 1) -> Message:
    """`/cluster list`: one line per cluster, summarising the overflow past the size budget.

    `clusters` may be one page of them: `by_state` (count and hourly cents per state) is then
    every live cluster's, and the message says which page it is and how to ask for the next."""
    if not clusters:
        return compose("No live clusters", [section("No live clusters.")], key="list")
    totals = by_state if by_state is not None else totals_by_state(clusters)
    n = sum(count for count, _ in totals.values())
    total = billing_now_cents(totals)
    blocks: list[Block] = [
        header(f"Live clusters ({n})"),
        section(together_line(totals)),
    ]
    more = "…and {n} more. `/cluster status <id>` shows one cluster."
    lines = fit_lines([_list_line(c, now=now) for c in clusters], LIST_TEXT_BUDGET, more)
    chunk: list[str] = []
    for line in lines:
        if chunk and payload_len("\n".join([*chunk, line])) > SECTION_BUDGET:
            blocks.append(section("\n".join(chunk)))
            chunk = []
        chunk.append(line)
    blocks.append(section("\n".join(chunk)))
    if pages > 1:
        after = f" · `/cluster list {page + 1}` for the next" if page < pages else ""
        blocks.append(context(f"Page {page} of {pages}{after}"))
    plural = "s" if n != 1 else ""
    return compose(f"{n} live cluster{plural}, billing {hourly(total)} together now", blocks,
                   key="list")


def totals_by_state(clusters: Iterable[ClusterRecord]) -> dict[ClusterState, tuple[int, int]]:
    """How many clusters are in each state, and their hourly cents together."""
    totals: dict[ClusterState, tuple[int, int]] = {}
    for c in clusters:
        n, cents = totals.get(c.status, (0, 0))
        totals[c.status] = (n + 1, cents + c.hourly_cents)
    return totals


def billing_now_cents(totals: Mapping[ClusterState, tuple[int, int]]) -> int:
    """What the clusters bill per hour right now: only running and degraded ones are charged
    (provisioning is not yet, terminating is no longer — contract §5.1)."""
    return sum(cents for state, (_, cents) in totals.items() if state in BILLING_NOW)


def together_line(totals: Mapping[ClusterState, tuple[int, int]]) -> str:
    """`"3 clusters · together *$125.06/h* ($3,001.44 per day) for the 2 billing now ·
    1 provisioning (not billing)"` (mrkdwn), from `totals_by_state` (or the database's own
    totals): the sum counts only the clusters that bill now."""
    total = billing_now_cents(totals)
    count = sum(n for n, _ in totals.values())
    billing = sum(n for state, (n, _) in totals.items() if state in BILLING_NOW)
    plural = "s" if count != 1 else ""
    line = f"{count} cluster{plural}"
    if billing:
        line += f" · together *{hourly(total)}* ({money(total * 24)} per day)"
        if billing != count:
            line += f" for the {billing} billing now"
    else:
        line += " · none is billing now"
    idle = {state.value: n for state, (n, _) in totals.items() if state not in BILLING_NOW}
    if idle:
        line += " · " + ", ".join(f"{n} {state}" for state, n in sorted(idle.items())) + \
            " (not billing)"
    return line


def _list_line(c: ClusterRecord, *, now: datetime) -> str:
    name = f" *{escaped(c.name, 40)}*" if c.name else ""
    age = duration((now - c.created_at).total_seconds())
    return (f"• {code(escaped(c.id, ID_MAX))}{name} · "
            f"{escaped(shape_label(c.shape, c.accelerator_name), 60)} · {c.status.value} · "
            f"{hourly(c.hourly_cents)} · {age} · {owner_mention(c.owner_id)}"
            f"{' (adopted)' if c.adopted else ''}")
