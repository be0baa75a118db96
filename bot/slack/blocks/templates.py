"""Templates in Slack: `/cluster template list` and the App Home's "Your templates"."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import Block

from bot.domain.templates import EVERYONE, ClusterTemplate
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *

SECTION_BUDGET = 2900  # a section's text is at most 3000 characters
HOME_SHOWN = 10


def template_line(t: ClusterTemplate, *, user_id: str) -> str:
    """`llama-serve` — 4 × h100-sxm-80gb ×8 in us-tx · 36 h · project x · shared with team ml."""
    parts = [f"{t.nodes} × {escaped(t.accelerator, 40)} ×{t.gpus_per_node}"
             + (f" in {escaped(t.location, 40)}" if t.location else "")]
    if t.storage_gb:
        parts.append(f"{t.storage_gb:,} GB volume")
    if t.orchestrator != "none":
        parts.append(escaped(t.orchestrator, 10))
    if t.hours:
        parts.append(f"{t.hours} h")
    if t.project:
        parts.append(f"project {code(escaped(t.project, 40))}")
    if t.readiness is not None:
        parts.append("readiness rule")
    if t.ports:
        parts.append("ports " + ", ".join(escaped(p, 12) for p in t.ports[:5]))
    team = t.team
    if team == EVERYONE:
        parts.append("shared with everyone")
    elif team is not None:
        parts.append(f"shared with team {escaped(team, 40)}")
    if t.owner_id != user_id:
        parts.append(f"by {user(t.owner_id)}")
    return f"• {code(t.name)} — " + " · ".join(parts)


def template_list(templates: Sequence[ClusterTemplate], *, user_id: str) -> Message:
    if not templates:
        body = ("No templates yet. Save a launched cluster's settings with "
                "`/cluster template save <name> <cluster-id>` (add `shared` for your team).")
        return compose(body, [section(body)], key="templates")
    lines = fit_lines([template_line(t, user_id=user_id) for t in templates], SECTION_BUDGET,
                      "…and {n} more")
    blocks: list[Block] = [
        header("Cluster templates"), section("\n".join(lines)),
        context("Quote from one: `/cluster quote template=<name>` (options you add override "
                "it). Env values are never kept: the launch form lists the names to fill in."),
    ]
    return compose(f"{len(templates)} cluster templates", blocks, key="templates")


def home_section(templates: Sequence[ClusterTemplate], *, user_id: str) -> list[Block]:
    shown = [template_line(t, user_id=user_id) for t in templates[:HOME_SHOWN]]
    if len(templates) > HOME_SHOWN:
        shown.append(f"…and {len(templates) - HOME_SHOWN} more: `/cluster template list`")
    return [header("Your templates"),
            section("\n".join(fit_lines(shown, SECTION_BUDGET))),
            context("`/cluster quote template=<name>` quotes from one.")]


def saved_words(t: ClusterTemplate) -> str:
    team = t.team
    where = ("shared with everyone" if team == EVERYONE
             else f"shared with team {escaped(team, 40)}" if team else "yours")
    kept = f"; env names kept without values: {', '.join(t.env_names)}" if t.env_names else ""
    return (f"Saved `{t.name}` ({where}) from `{t.source_cluster_id}`: {t.shape_words()}"
            f"{kept}. Quote from it: `/cluster quote template={t.name}`.")

