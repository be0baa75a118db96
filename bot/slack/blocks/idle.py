"""What the idle rules say (bot/services/idle.py): the owner's one DM per idle episode, the
warning in the cluster's thread before the policy terminates it, and the cluster message's
"idle since …" line. Money is the locked rate at the provider's hour marks, as everywhere.
Log lines are shown as the readiness DM shows them: escaped, cut, in a code block (the
workload's own output; the bot never writes env values into them)."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import Block

from bot.domain.idle import DEFAULT_KEEP_HOURS, IdleState
from bot.domain.models import ClusterRecord, ClusterState
from bot.domain.readiness import ReadinessWatch
from bot.domain.watch import Notice
from bot.slack.blocks.cluster import TERMINABLE, cluster_ref, terminate_button
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, IdleRef

LINE_MAX = 300
LINES_BUDGET = 2400


def idle_line(c: ClusterRecord, w: ReadinessWatch | None) -> str | None:
    """The cluster message's line while an idle rule has fired (None: not idle)."""
    if w is None or w.idle_since is None or c.status not in (ClusterState.RUNNING,
                                                              ClusterState.DEGRADED):
        return None
    if w.idle_state is IdleState.IDLE:
        end = (f"; terminated at {when(w.idle_terminate_at)} unless kept"
               if w.idle_terminate_at else "")
        return (f":zzz: *Idle since {when(w.idle_since)}*: it bills {hourly(c.hourly_cents)} "
                f"while idle{end}.")
    if w.idle_state is IdleState.TERMINATING:
        return f":zzz: *Idle since {when(w.idle_since)}*: being terminated (nobody kept it)."
    if w.idle_state is IdleState.ACTIVE and w.kept_until is not None:
        return f":zzz: Idle since {when(w.idle_since)}, kept until {when(w.kept_until)}."
    return None


def _why(n: Notice) -> str:
    f = n.facts
    if f.idle_reason == "done":
        line = escaped(f.idle_line or "", 120).replace("`", "'")
        return f"its log printed the done line (`{line}`)"
    return f"no new log line since {when(f.idle_since)}" if f.idle_since else "no new log line"


def last_lines(log_lines: Sequence[str], *, budget: int, empty: str) -> Block:
    """Rank 0's last lines in a code block: each clipped, the oldest dropped past `budget`."""
    lines = [escaped(line, LINE_MAX).replace("```", "'''") for line in log_lines]
    while lines and sum(len(line) + 1 for line in lines) > budget:
        lines.pop(0)
    shown = "\n".join(lines) if lines else empty
    return section(f"*The last lines of rank 0:*\n```{shown}```")


def idle_dm(n: Notice, c: ClusterRecord) -> Message:
    """The owner's DM: idle since when and why, what the idle time billed, what each further
    hour costs, the last lines — Terminate, or Keep for N h."""
    f = n.facts
    charges = f.waiting_charges or 0
    marks = f"{charges} hourly charge{'s' if charges != 1 else ''} of {hourly(c.hourly_cents)}"
    since = when(f.idle_since) if f.idle_since else "now"
    body = (f":zzz: {cluster_ref(c)} *looks idle since {since}*: {_why(n)}. The idle time has "
            f"billed *{money(f.waiting_cents or 0)}* ({marks}); each further hour costs "
            f"*{money(c.hourly_cents)}* until it is terminated.")
    blocks: list[Block] = [section(body)]
    blocks.append(last_lines(f.log_lines, budget=LINES_BUDGET, empty="(no new lines)"))
    hours = f.keep_hours or DEFAULT_KEEP_HOURS
    if f.terminate_at is not None:
        blocks.append(context(f":warning: The spend policy terminates it at "
                              f"{when(f.terminate_at)} unless someone keeps it."))
    if c.status in TERMINABLE:
        value = IdleRef(cluster_id=c.id, episode=f.prompt or 1, hours=hours).pack()
        blocks.append(actions(terminate_button(c),
                              button(f"Keep for {hours} h", action_id=Action.KEEP_IDLE,
                                     value=value)))
    else:
        blocks.append(context(f"It is {c.status.value} now."))
    return compose(f"{escaped(c.id, ID_MAX)} looks idle since {since}; each further hour costs "
                   f"{money(c.hourly_cents)}", blocks, key="idle")


def idle_warning(n: Notice, c: ClusterRecord) -> Message:
    """In the cluster's thread: the policy terminates it soon unless kept."""
    f = n.facts
    end = when(f.terminate_at) if f.terminate_at else "soon"
    idle_for = (f" (idle since {when(f.idle_since)})" if f.idle_since else "")
    body = (f":warning: {cluster_ref(c)} is idle{idle_for} and *will be terminated at {end}* "
            f"by the spend policy unless someone keeps it. It bills {hourly(c.hourly_cents)} "
            "until then.")
    blocks: list[Block] = [section(body)]
    if c.status in TERMINABLE:
        hours = f.keep_hours or DEFAULT_KEEP_HOURS
        value = IdleRef(cluster_id=c.id, episode=f.prompt or 1, hours=hours).pack()
        blocks.append(actions(button(f"Keep for {hours} h", action_id=Action.KEEP_IDLE,
                                     value=value)))
    return compose(f"{escaped(c.id, ID_MAX)} is idle and will be terminated at {end} unless "
                   "kept", blocks, key="notice.idle_warning")
