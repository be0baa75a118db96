"""`/cluster spend [YYYY-MM]` — one month's spend from AI Reserve's billed hours.

The sums come from bot/domain/spend.py (`SpendReport`); this module only lays them out: the
total, then by owner and by cluster, largest first, the overflow summarised.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, TypeVar

from slack_sdk.models.blocks import Block

from bot.domain.models import ClusterRecord
from bot.slack.blocks.audit import line_sections
from bot.slack.blocks.cluster import owner_mention
from bot.slack.blocks.format import (
    ID_MAX,
    code,
    escaped,
    fit_lines,
    money,
    shape_label,
    when,
)
from bot.slack.blocks.message import Message, compose, context, header, section

# Payload characters: both lists together stay well under Slack's ~13k message budget.
OWNERS_BUDGET = 3000
CLUSTERS_BUDGET = 6000
T = TypeVar("T")


class SpendReport(Protocol):
    """What `bot.domain.spend.spend_report` returns (its `SpendReport` fits)."""

    @property
    def month(self) -> str: ...

    @property
    def by_owner(self) -> Sequence[tuple[str | None, int]]: ...

    @property
    def by_cluster(self) -> Sequence[tuple[ClusterRecord, int]]: ...

    @property
    def total_cents(self) -> int: ...

    @property
    def projected_cents(self) -> int: ...


def spend_report(report: SpendReport, *, now: datetime) -> Message:
    """The month's total, by owner (unclaimed clusters together) and by cluster."""
    month = escaped(report.month, 20)
    blocks: list[Block] = [
        header(f"Spend for {report.month} (AI Reserve's billed hours)"),
        section(f"*Total: {money(report.total_cents)}* in {month} across "
                f"{_count(len(report.by_cluster), 'cluster')}"),
    ]
    if report.projected_cents > 0:
        blocks.append(context(f"The live clusters will add ≈ {money(report.projected_cents)} "
                              "more before the month ends, at their locked rates."))
    if not report.by_cluster and not report.by_owner:
        blocks.append(section(f"Nothing was billed in {month}."))
    else:
        owners = [f"• {owner_mention(owner)} — *{money(cents)}*"
                  for owner, cents in _largest_first(report.by_owner)]
        blocks.append(section("*By owner*"))
        blocks.extend(section(text) for text in line_sections(
            fit_lines(owners, OWNERS_BUDGET, "…and {n} more owners")))
        clusters = [_cluster_line(c, cents) for c, cents in _largest_first(report.by_cluster)]
        blocks.append(section("*By cluster*"))
        blocks.extend(section(text) for text in line_sections(
            fit_lines(clusters, CLUSTERS_BUDGET, "…and {n} more clusters")))
    blocks.append(context(f"Only hours AI Reserve billed count (a cluster bills from the moment "
                          f"every node is ready). As of {when(now)}."))
    return compose(f"Spend for {month}: {money(report.total_cents)} across "
                   f"{_count(len(report.by_cluster), 'cluster')}", blocks, key="spend")


def _cluster_line(c: ClusterRecord, cents: int) -> str:
    name = f" *{escaped(c.name, 40)}*" if c.name else ""
    return (f"• {code(escaped(c.id, ID_MAX))}{name} · "
            f"{escaped(shape_label(c.shape, c.accelerator_name), 60)} · "
            f"{owner_mention(c.owner_id)} — *{money(cents)}*")


def _largest_first(rows: Sequence[tuple[T, int]]) -> list[tuple[T, int]]:
    return sorted(rows, key=lambda row: row[1], reverse=True)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"
