"""The daily DM about a persistent volume nothing holds: it bills on its own until deleted.

A volume outlives its cluster (AI Reserve's docs), so the bot keeps reminding whoever owns it —
the approvers when nobody does — with the two ways out: delete it, or keep it for another week.
"""

from __future__ import annotations

from datetime import datetime

from slack_sdk.models.blocks import Block

from bot.domain.models import VolumeRecord
from bot.slack.blocks.format import (
    ID_MAX,
    NAME_MAX,
    code,
    escaped,
    hourly,
    money,
    truncate,
    when,
)
from bot.slack.blocks.message import Message, actions, button, compose, confirm, context, section
from bot.slack.ids import Action, VolumeRef

_GONE = {"deleting": "It is being deleted: its billing has stopped.",
         "deleted": "It was deleted: its billing has stopped.",
         "attached": "It is attached to a cluster again: nothing to do."}


def volume_reminder(v: VolumeRecord, *, now: datetime) -> Message:
    """Volume X (size, location) holds no cluster since when and bills $/month until deleted."""
    monthly, rate = money(v.monthly_cents), hourly(v.hourly_cents)
    since = f" since {when(v.orphaned_since)}" if v.orphaned_since else ""
    body = (f":floppy_disk: Volume {volume_ref(v)} ({v.size_gb:,} GB, "
            f"{escaped(v.location, ID_MAX)}) is not attached to any cluster{since} and bills "
            f"*{monthly}/month* ({rate}) until it is deleted.")
    blocks: list[Block] = [section(body)]
    if v.cluster_id:
        blocks.append(context(f"It was last with cluster {code(escaped(v.cluster_id, ID_MAX))}. "
                              "Its data stays until the volume is deleted."))
    if v.owner_id is None:
        blocks.append(context("Nobody owns it, so this reminder goes to the approvers."))
    gone = _GONE.get(v.status)
    if gone:
        blocks.append(context(gone))
    else:
        due = int(v.next_reminder_at.timestamp()) if v.next_reminder_at else 0
        value = VolumeRef(volume_id=v.id, reminder=due).pack()
        blocks.append(actions(
            button("Delete volume", action_id=Action.DELETE_VOLUME, value=value, style="danger",
                   confirm=confirm(
                       f"Delete volume {v.id}?",
                       f"Volume {truncate(v.id, ID_MAX)} bills {monthly} per month "
                       f"({money(v.hourly_cents)} per hour) until deleted. Deleting stops that "
                       "and cannot be undone — the data is gone.",
                       ok="Delete it", deny="Cancel", danger=True)),
            button("Keep (remind me again in a week)", action_id=Action.KEEP_VOLUME, value=value),
        ))
    return compose(f"Volume {escaped(v.id, ID_MAX)} is not attached to any cluster and bills "
                   f"{monthly}/month until deleted", blocks, key="volume")


def volume_ref(v: VolumeRecord) -> str:
    """`` `vol_…` *name* ``: the id as code, then the name when it has one (escaped, clipped)."""
    ref = code(escaped(v.id, ID_MAX))
    return f"{ref} *{escaped(v.name, NAME_MAX)}*" if v.name else ref
