"""What the readiness check says (bot/services/readiness.py): **Serving** in the cluster's
thread, and the owner's DM when the limit passed without the line. Money is the locked rate at
the provider's hour marks (readyAt + k·1 h), as every other message counts it."""

from __future__ import annotations

from slack_sdk.models.blocks import Block

from bot.domain.models import ClusterRecord
from bot.domain.watch import Notice
from bot.slack.blocks.cluster import TERMINABLE, cluster_ref, terminate_button
from bot.slack.blocks.format import ID_MAX, duration, escaped, hourly, money
from bot.slack.blocks.message import Message, actions, button, compose, context, section
from bot.slack.ids import Action, ReadinessRef

LINE_MAX = 300
LINES_BUDGET = 2600


def _billed(n: Notice, c: ClusterRecord) -> str:
    f = n.facts
    charges = f.waiting_charges or 0
    marks = f"{charges} hourly charge{'s' if charges != 1 else ''} of {hourly(c.hourly_cents)}"
    return f"*{money(f.waiting_cents or 0)}* ({marks}, the first at ready)"


def serving_notice(n: Notice, c: ClusterRecord) -> Message:
    """The thread reply: it serves, how long after ready, what that wait billed."""
    took = duration(n.facts.waited_seconds or 0)
    body = (f":white_check_mark: {cluster_ref(c)} *is serving*: the readiness line appeared "
            f"{took} after the cluster was ready. Getting there billed {_billed(n, c)}.")
    blocks: list[Block] = [section(body)]
    if c.status.value == "degraded":
        blocks.append(context(":large_orange_circle: It is degraded (a node is down) and bills "
                              "the full rate."))
    return compose(f"{escaped(c.id, ID_MAX)} is serving ({took} after ready)", blocks,
                   key="notice.serving")


def not_serving_dm(n: Notice, c: ClusterRecord) -> Message:
    """The owner's DM: not serving after the limit — the last lines, the cost, two ways on."""
    f = n.facts
    waited = duration(f.waited_seconds or 0)
    body = (f":hourglass: {cluster_ref(c)} has been ready for {waited} and *the readiness line "
            f"hasn't appeared*. Not serving has billed {_billed(n, c)} so far; it bills "
            f"{hourly(c.hourly_cents)} until terminated.")
    blocks: list[Block] = [section(body)]
    lines = [escaped(line, LINE_MAX).replace("```", "'''") for line in f.log_lines]
    while lines and sum(len(line) + 1 for line in lines) > LINES_BUDGET:
        lines.pop(0)
    shown = "\n".join(lines) if lines else "(no lines yet)"
    blocks.append(section(f"*The last lines of rank 0:*\n```{shown}```"))
    if c.status in TERMINABLE:
        value = ReadinessRef(cluster_id=c.id, prompt=f.prompt or 1).pack()
        blocks.append(context("*Keep waiting* gives it the same limit again; I'll post "
                              "*Serving* in its thread when the line appears."))
        blocks.append(actions(terminate_button(c),
                              button("Keep waiting", action_id=Action.KEEP_WAITING,
                                     value=value)))
    else:
        blocks.append(context(f"It is {c.status.value} now."))
    return compose(f"{escaped(c.id, ID_MAX)} is not serving after {waited}; it has billed "
                   f"{money(f.waiting_cents or 0)} meanwhile", blocks, key="not_serving")
