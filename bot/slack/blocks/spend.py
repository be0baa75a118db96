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
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *

# Payload characters: both lists together stay well under Slack's ~13k message budget.
OWNERS_BUDGET = 3000
CLUSTERS_BUDGET = 5000
VOLUMES_BUDGET = 1500
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

    @property
    def by_volume(self) -> Sequence[tuple[VolumeLine, int]]: ...

    @property
    def volumes_cents(self) -> int: ...

    @property
    def month_end(self) -> datetime | None: ...

    @property
    def capped_by_envelopes(self) -> bool: ...

    @property
    def by_project(self) -> Sequence[tuple[str | None, int]]: ...


class VolumeLine(Protocol):
    """A volume billing on its own (`bot.domain.spend.VolumeSpan` fits)."""

    @property
    def id(self) -> str: ...

    @property
    def owner_id(self) -> str | None: ...


def spend_report(report: SpendReport, *, now: datetime, by: str = "owner") -> Message:
    """The month's total, by owner (unclaimed clusters together) or by project (`by`), and by
    cluster."""
    month = escaped(report.month, 20)
    blocks: list[Block] = [
        header(f"Spend for {report.month} (AI Reserve's billed hours)"),
        section(f"*Total: {money(report.total_cents)}* in {month} across "
                f"{_count(len(report.by_cluster), 'cluster')}{_volumes_part(report)}"),
    ]
    if report.projected_cents > 0 and report.month_end is not None:
        stop = (" (each cluster stops at its approved envelope: the policy enforces them)"
                if report.capped_by_envelopes else "")
        blocks.append(context(
            f"If nobody terminates anything, the live clusters and kept volumes add "
            f"≈ {money(report.projected_cents)} more from now to the end of the month "
            f"({when(report.month_end)}), at their locked rates{stop}."))
    if not report.by_cluster and not report.by_owner:
        blocks.append(section(f"Nothing was billed in {month}."))
    else:
        if by == "project":
            groups = [f"• {project_label(project)} — *{money(cents)}*"
                      for project, cents in _largest_first(report.by_project)]
        else:
            groups = [f"• {owner_mention(owner)} — *{money(cents)}*"
                      for owner, cents in _largest_first(report.by_owner)]
        blocks.append(section(f"*By {by}*"))
        blocks.extend(section(text) for text in line_sections(
            fit_lines(groups, OWNERS_BUDGET, f"…and {{n}} more {by}s")))
        clusters = [_cluster_line(c, cents) for c, cents in _largest_first(report.by_cluster)]
        blocks.append(section("*By cluster*"))
        blocks.extend(section(text) for text in line_sections(
            fit_lines(clusters, CLUSTERS_BUDGET, "…and {n} more clusters")))
        if report.by_volume:
            volumes = [f"• {code(escaped(v.id, ID_MAX))} · {owner_mention(v.owner_id)} — "
                       f"*{money(cents)}*" for v, cents in _largest_first(report.by_volume)]
            blocks.append(section("*Volumes billed on their own* (kept after their cluster)"))
            blocks.extend(section(text) for text in line_sections(
                fit_lines(volumes, VOLUMES_BUDGET, "…and {n} more volumes")))
    blocks.append(context(f"Only hours AI Reserve billed count (a cluster bills from the moment "
                          f"every node is ready; a kept volume bills on its own once no "
                          f"cluster pays for it). As of {when(now)}."))
    return compose(f"Spend for {month}: {money(report.total_cents)} across "
                   f"{_count(len(report.by_cluster), 'cluster')}", blocks, key="spend")


def project_label(project: str | None) -> str:
    return code(escaped(project, 40)) if project else "_no project_"


def _volumes_part(report: SpendReport) -> str:
    if not report.by_volume:
        return ""
    return (f" and {_count(len(report.by_volume), 'volume')} "
            f"({money(report.volumes_cents)} for volumes on their own)")


def _cluster_line(c: ClusterRecord, cents: int) -> str:
    name = f" *{escaped(c.name, 40)}*" if c.name else ""
    return (f"• {code(escaped(c.id, ID_MAX))}{name} · "
            f"{escaped(shape_label(c.shape, c.accelerator_name), 60)} · "
            f"{owner_mention(c.owner_id)} — *{money(cents)}*")


def _largest_first(rows: Sequence[tuple[T, int]]) -> list[tuple[T, int]]:
    return sorted(rows, key=lambda row: row[1], reverse=True)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"
