"""What the readiness check says (bot/services/readiness.py): **Serving** in the cluster's
thread, and the owner's DM when the limit passed without the line. Money is the locked rate at
the provider's hour marks (readyAt + k·1 h), as every other message counts it. Serving is a
state: after a lost node the line says since when it stopped and what the outage has cost."""

from __future__ import annotations

from datetime import datetime

from slack_sdk.models.blocks import Block

from bot.domain.models import ClusterRecord, ClusterState
from bot.domain.readiness import ReadinessState, ReadinessWatch, outage_charges
from bot.domain.watch import Notice
from bot.slack.blocks.cluster import TERMINABLE, cluster_ref, terminate_button
from bot.slack.blocks.format import *
from bot.slack.blocks.idle import idle_line, last_lines
from bot.slack.blocks.message import *
from bot.slack.ids import Action, ReadinessRef

LINES_BUDGET = 2600


def serving_line(c: ClusterRecord, w: ReadinessWatch | None) -> str | None:
    """Running is not serving: what the readiness check has seen (None: no check asked for),
    and "idle since …" once an idle rule fired (bot/slack/blocks/idle.py)."""
    idle = idle_line(c, w)
    serving = _serving_line(c, w)
    return "\n".join(part for part in (serving, idle) if part) or None


def _serving_line(c: ClusterRecord, w: ReadinessWatch | None) -> str | None:
    if w is None or w.pattern is None or c.status not in (ClusterState.RUNNING,
                                                          ClusterState.DEGRADED):
        return None
    where = "every rank" if w.all_ranks else "rank 0"
    stopped = w.stopped_at
    if w.state is ReadinessState.SERVING and w.serving_at is not None:
        if stopped is not None:
            lost = outage_charges(c, began=stopped, until=w.serving_at) * c.hourly_cents
            took = (f" (again: it stopped at {when(stopped)} when a node was lost; the outage "
                    f"lasted {duration((w.serving_at - stopped).total_seconds())} and cost "
                    f"{money(lost)})")
        else:
            took = (f" ({duration((w.serving_at - c.ready_at).total_seconds())} after ready)"
                    if c.ready_at else "")
        return f":white_check_mark: *Serving since {when(w.serving_at)}*{took}"
    if stopped is not None:  # a node was lost: stopped, or watching again after the restart
        cost = _outage_cost(c, stopped)
        if w.state is ReadinessState.STOPPED:
            return (f":warning: *Stopped serving since {when(stopped)}*: a node was lost. "
                    f"{cost}")
        restart = f" at {when(w.rearmed_at)}" if w.rearmed_at else ""
        return (f":hourglass_flowing_sand: *Not serving since {when(stopped)}* (a node was "
                f"lost): waiting for {code(escaped(w.pattern, 80))} in {where}'s log after "
                f"the restart{restart}. {cost}")
    return (f":hourglass_flowing_sand: *Not serving yet*: waiting for "
            f"{code(escaped(w.pattern, 80))} in {where}'s log")


def _outage_cost(c: ClusterRecord, stopped: datetime) -> str:
    """What not serving since `stopped` has billed so far: AI Reserve's charged hour marks."""
    charges = outage_charges(c, began=stopped)
    marks = f"{charges} hourly charge{'s' if charges != 1 else ''} of {hourly(c.hourly_cents)}"
    return (f"The outage has cost *{money(charges * c.hourly_cents)}* so far ({marks}); it "
            "bills the full rate meanwhile.")


def _outage_billed(n: Notice, c: ClusterRecord) -> str:
    charges = n.facts.waiting_charges or 0
    marks = f"{charges} hourly charge{'s' if charges != 1 else ''} of {hourly(c.hourly_cents)}"
    return f"*{money(n.facts.waiting_cents or 0)}* ({marks})"


def _billed(n: Notice, c: ClusterRecord) -> str:
    f = n.facts
    charges = f.waiting_charges or 0
    marks = f"{charges} hourly charge{'s' if charges != 1 else ''} of {hourly(c.hourly_cents)}"
    return f"*{money(f.waiting_cents or 0)}* ({marks}, the first at ready)"


def serving_notice(n: Notice, c: ClusterRecord) -> Message:
    """The thread reply: it serves, how long after ready, what that wait billed — or, after a
    lost node, that it serves again and what the outage billed."""
    f = n.facts
    took = duration(f.waited_seconds or 0)
    if f.stopped_at is not None:
        back = f.restarted_at or f.stopped_at
        lasted = duration((back - f.stopped_at).total_seconds() + (f.waited_seconds or 0))
        body = (f":white_check_mark: {cluster_ref(c)} *is serving again*: the readiness line "
                f"appeared {took} after the restart at {when(back)}. It had stopped serving at "
                f"{when(f.stopped_at)} when a node was lost; the outage lasted {lasted} and "
                f"billed {_outage_billed(n, c)}.")
        text = f"{escaped(c.id, ID_MAX)} is serving again (the outage lasted {lasted})"
    else:
        body = (f":white_check_mark: {cluster_ref(c)} *is serving*: the readiness line appeared "
                f"{took} after the cluster was ready. Getting there billed {_billed(n, c)}.")
        text = f"{escaped(c.id, ID_MAX)} is serving ({took} after ready)"
    blocks: list[Block] = [section(body)]
    if c.status.value == "degraded":
        blocks.append(context(":large_orange_circle: It is degraded (a node is down) and bills "
                              "the full rate."))
    return compose(text, blocks, key="notice.serving")


def not_serving_dm(n: Notice, c: ClusterRecord) -> Message:
    """The owner's DM: not serving after the limit — the last lines, the cost, two ways on."""
    f = n.facts
    waited = duration(f.waited_seconds or 0)
    if f.stopped_at is not None:
        body = (f":hourglass: {cluster_ref(c)} has run again for {waited} since the restart "
                f"after a lost node and *the readiness line hasn't appeared again*. Not serving "
                f"since {when(f.stopped_at)} has billed {_outage_billed(n, c)} so far; it bills "
                f"{hourly(c.hourly_cents)} until terminated.")
    else:
        body = (f":hourglass: {cluster_ref(c)} has been ready for {waited} and *the readiness "
                f"line hasn't appeared*. Not serving has billed {_billed(n, c)} so far; it "
                f"bills {hourly(c.hourly_cents)} until terminated.")
    blocks: list[Block] = [section(body)]
    blocks.append(last_lines(f.log_lines, budget=LINES_BUDGET, empty="(no lines yet)"))
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
