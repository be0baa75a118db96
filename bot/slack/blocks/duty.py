"""Who is on a degraded cluster, as people see it: the degraded notice's Acknowledge and
Snooze 1 h buttons, the notice as edited once someone is on it, the thread lines, and the
escalation message (bot/domain/duty.py decides; this only renders)."""

from __future__ import annotations

import json
from datetime import datetime

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement

from bot.domain.duty import Duty, Escalation
from bot.domain.models import ClusterRecord
from bot.slack.blocks.cluster import cluster_ref
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, DutyRef

DUTY_ACTIONS = (Action.ACKNOWLEDGE, Action.SNOOZE)
# A cluster id this long once escaped (AI Reserve's are ~10 characters) would push the notice,
# with two more buttons carrying it, past Slack's message size: the notice goes without them
# (the escalation still follows).
_ID_BUDGET = 128


def duty_buttons(c: ClusterRecord, episode: int, duty: Duty | None) -> list[ButtonElement]:
    """Acknowledge and Snooze 1 h, while nobody has acknowledged the episode."""
    if (duty is not None and duty.acknowledged_by is not None) or \
            len(json.dumps(c.id)) > _ID_BUDGET:
        return []
    snoozes = duty.snoozes if duty is not None else 0
    value = DutyRef(cluster_id=c.id, episode=episode, snoozes=snoozes).pack()
    return [button("Acknowledge", action_id=Action.ACKNOWLEDGE, value=value),
            button("Snooze 1 h", action_id=Action.SNOOZE, value=value)]


def duty_line(duty: Duty, *, now: datetime) -> str | None:
    if duty.acknowledged_by is not None and duty.acknowledged_at is not None:
        return (f":raising_hand: Acknowledged by {user(duty.acknowledged_by)} at "
                f"{when(duty.acknowledged_at)}: they are on it.")
    if duty.snoozed_until is not None and duty.snoozed_by is not None and \
            now < duty.snoozed_until:
        return (f":zzz: Snoozed by {user(duty.snoozed_by)} until {when(duty.snoozed_until)}; "
                "nobody is escalated before then.")
    return None


def degraded_notice(base: Message, c: ClusterRecord, duty: Duty, *, now: datetime) -> Message:
    """The degraded notice (`base`, as thread_notice renders it) with who is on it, and the
    duty buttons as they are now (Acknowledge gone once someone has)."""
    blocks: list[Block] = []
    line = duty_line(duty, now=now)
    placed = False
    for block in base.blocks:
        if isinstance(block, ActionsBlock):
            if line:
                blocks.append(context(line))
                placed = True
            kept = [e for e in block.elements
                    if isinstance(e, ButtonElement) and e.action_id not in DUTY_ACTIONS]
            shown = kept + duty_buttons(c, duty.episode, duty)
            if shown:
                blocks.append(actions(*shown))
            continue
        block.block_id = None  # numbered afresh: the edit is a new rendering
        blocks.append(block)
    if line and not placed:
        blocks.append(context(line))
    text = base.text + (f" — acknowledged by {user(duty.acknowledged_by)}"
                        if duty.acknowledged_by else "")
    return compose(text, blocks, key="notice.degraded")


def acknowledged_line(c: ClusterRecord, duty: Duty) -> str:
    return (f":raising_hand: {user(duty.acknowledged_by or '?')} acknowledged the degraded "
            f"episode of {cluster_ref(c)}: they are on it (nobody is escalated for it).")


def snoozed_line(c: ClusterRecord, duty: Duty) -> str:
    until = when(duty.snoozed_until) if duty.snoozed_until else "later"
    return (f":zzz: {user(duty.snoozed_by or '?')} snoozed {cluster_ref(c)} until {until}: "
            f"it still bills {hourly(c.hourly_cents)} meanwhile.")


def target_mention(target: str) -> str:
    return f"<!subteam^{target}>" if target.startswith("S") else f"<#{target}>"


def escalation(c: ClusterRecord, kind: Escalation, *, target: str, lost_cents: int,
               charges: int, after_minutes: int, thread: str | None,
               now: datetime) -> Message:
    """The escalation, posted where the target sees it: who should look, why, and what the
    degraded episode has cost so far (AI Reserve's charges inside it)."""
    rate = hourly(c.hourly_cents)
    started = c.observed.episode_started_at if c.observed else None
    since = f" since {when(started)}" if started else ""
    if kind is Escalation.EXHAUSTED:
        why = ("every recovery attempt is spent and AI Reserve makes no more: only "
               "terminating it ends the bill")
    else:
        why = f"nobody acknowledged, recovered or terminated it within {after_minutes} minutes"
    hours = f"{charges} hourly charge{'s' if charges != 1 else ''}"
    body = (f":rotating_light: {target_mention(target)} {cluster_ref(c)} has been *degraded"
            f"{since}* and {why}. This episode has cost *{money(lost_cents)}* so far "
            f"({hours} at {rate}, AI Reserve's figures), and it keeps billing {rate} "
            f"({money(c.hourly_cents * 24)} per day).")
    blocks: list[Block] = [section(body)]
    owner = user(c.owner_id) if c.owner_id else "nobody (unclaimed)"
    notes = f"Owner: {owner}."
    if thread:
        notes += f" The cluster's thread: {thread}"
    blocks.append(context(notes))
    state = "recovery exhausted" if kind is Escalation.EXHAUSTED else "nobody on it"
    text = (f"Escalated: {escaped(c.id, ID_MAX)} is degraded ({state}); "
            f"{money(lost_cents)} lost so far, {rate} on")
    return compose(text, blocks, key=f"escalation.{kind.value}")


def escalated_line(c: ClusterRecord, kind: Escalation, *, target: str, lost_cents: int) -> str:
    what = "recovery is exhausted" if kind is Escalation.EXHAUSTED else "nobody is on it"
    return (f":rotating_light: Escalated to {target_mention(target)} ({what}): this episode of "
            f"{cluster_ref(c)} has cost {money(lost_cents)} so far.")


def permalink(channel_id: str, ts: str) -> str:
    """A link to a message (its thread) that works in any workspace the reader is in."""
    return f"https://slack.com/archives/{channel_id}/p{ts.replace('.', '')}"
