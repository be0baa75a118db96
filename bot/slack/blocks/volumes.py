"""The daily DM about a persistent volume nothing holds: it bills on its own until deleted;
`/cluster volumes`, the list with Grow and Delete; and the Grow form.

A volume outlives its cluster (AI Reserve's docs), so the bot keeps reminding whoever owns it —
the approvers when nobody does — with the two ways out: delete it, or keep it for another week.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from slack_sdk.models.blocks import Block, ButtonElement, InputBlock, PlainTextInputElement
from slack_sdk.models.views import View

from bot.domain.models import VolumeRecord
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, GrowRef, VolumeRef
from bot.slack.ids import View as ViewId

LIST_MAX = 20  # two blocks a volume: Slack's 50-block message limit
FIELD_SIZE = "volume_size"

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
            _delete_button(v, value),
            button("Keep (remind me again in a week)", action_id=Action.KEEP_VOLUME, value=value),
        ))
    return compose(f"Volume {escaped(v.id, ID_MAX)} is not attached to any cluster and bills "
                   f"{monthly}/month until deleted", blocks, key="volume")


def volume_ref(v: VolumeRecord) -> str:
    """`` `vol_…` *name* ``: the id as code, then the name when it has one (escaped, clipped)."""
    ref = code(escaped(v.id, ID_MAX))
    return f"{ref} *{escaped(v.name, NAME_MAX)}*" if v.name else ref


def _delete_button(v: VolumeRecord, value: str) -> ButtonElement:
    monthly = money(v.monthly_cents)
    return button("Delete volume", action_id=Action.DELETE_VOLUME, value=value, style="danger",
                  confirm=confirm(
                      f"Delete volume {v.id}?",
                      f"Volume {truncate(v.id, ID_MAX)} bills {monthly} per month "
                      f"({money(v.hourly_cents)} per hour) until deleted. Deleting stops that "
                      "and cannot be undone — the data is gone.",
                      ok="Delete it", deny="Cancel", danger=True))


class Listed(Protocol):
    """What `volume_list` reads of each row (the service's `VolumeListing` fits)."""

    @property
    def volume(self) -> VolumeRecord: ...

    @property
    def created_at(self) -> datetime: ...


def volume_list(rows: Sequence[Listed], *, now: datetime) -> Message:
    """`/cluster volumes`: each volume's size, place, holder, monthly cost and age; *Grow* and
    *Delete* while detached, the reason otherwise."""
    if not rows:
        return compose("No shared volumes at AI Reserve.",
                       [section(":floppy_disk: No shared volumes at AI Reserve. "
                                "`/cluster quote … storage=<GB>` creates one with a cluster.")],
                       key="volumes")
    total = sum(r.volume.monthly_cents for r in rows)
    blocks: list[Block] = [header(f"Shared volumes ({len(rows)})"),
                           context(f"Together *{money(total)}/month*. A volume outlives its "
                                   "cluster and bills until deleted; it grows, never shrinks, "
                                   "and only while no cluster holds it.")]
    for row in rows[:LIST_MAX]:
        v = row.volume
        holder = (f"held by cluster {code(escaped(v.cluster_id, ID_MAX))}"
                  if v.status == "attached" else
                  ":warning: *orphaned* (no cluster holds it)")
        owner = f" · owner {user(v.owner_id)}" if v.owner_id else " · no owner"
        blocks.append(section(
            f"{volume_ref(v)} · {v.size_gb:,} GB · {escaped(v.location, ID_MAX)} · {holder}"
            f"{owner}\n*{money(v.monthly_cents)}/month* ({hourly(v.hourly_cents)}) · "
            f"{duration((now - row.created_at).total_seconds())} old"))
        if v.status == "attached":
            blocks.append(context(f"Grow and Delete wait until cluster "
                                  f"{code(escaped(v.cluster_id, ID_MAX))} is terminated: AI "
                                  "Reserve changes a volume only while no cluster holds it."))
        else:
            blocks.append(actions(
                button("Grow", action_id=Action.GROW_VOLUME,
                       value=GrowRef(volume_id=v.id, size_gb=v.size_gb).pack()),
                _delete_button(v, VolumeRef(volume_id=v.id).pack())))
    if len(rows) > LIST_MAX:
        blocks.append(context(f"…and {len(rows) - LIST_MAX} more."))
    return compose(f"{len(rows)} shared volumes, together {money(total)}/month", blocks,
                   key="volumes")


def grow_modal(ref: GrowRef) -> View:
    """Asks the new size; the volume and its size as shown travel in private_metadata."""
    return View(
        type="modal", callback_id=ViewId.GROW_VOLUME, private_metadata=ref.pack(),
        title=plain("Grow volume", 24), submit=plain("Grow", 24), close=plain("Cancel", 24),
        blocks=[
            section(f"Volume {code(escaped(ref.volume_id, ID_MAX))} is {ref.size_gb:,} GB. "
                    "A volume only grows, and later hours bill at the new size."),
            InputBlock(block_id=FIELD_SIZE, label=plain("New size (GB)", 2000),
                       element=PlainTextInputElement(
                           action_id=FIELD_SIZE, placeholder=plain(str(ref.size_gb * 2), 150))),
        ])


def read_size(values: Mapping[str, Mapping[str, Any]], *, current_gb: int) -> int | str:
    """The new size typed in the form, or what is wrong with it (shown under the field)."""
    element = (values.get(FIELD_SIZE) or {}).get(FIELD_SIZE) or {}
    text = str(element.get("value") or "").strip().lower().removesuffix("gb").strip()
    if not text.isdigit() or len(text) > 6:
        return f"A whole number of GB, e.g. {current_gb * 2}."
    if int(text) <= current_gb:
        return (f"The volume is {current_gb:,} GB; volumes only grow: give more than that.")
    return int(text)
