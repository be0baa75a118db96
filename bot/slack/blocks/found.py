"""Clusters found at AI Reserve that nobody here launched, many at once (a first install, a
restore from an old backup): one digest per channel instead of a card each, and the approvers'
App Home section — each with a way to claim them (bot/slack/found.py decides who is in it).

"40 clusters running that nobody here launched, $9,120/h", the dearest first with a **Claim**
each, then how many more and where to claim those. Like the storm digest, the rendering holds
no relative time: an unchanged set renders the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import Block

from bot.domain.models import ClusterRecord
from bot.slack.blocks.cluster import ADOPTED, cluster_ref
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.blocks.notices import claim_button

SHOWN = 20  # one block each: the message stays far inside Slack's 50 blocks


def headline(count: int, hourly_cents: int) -> str:
    if not count:
        return "Every cluster found at AI Reserve here has been claimed or has ended"
    return (f"{count} cluster{'s' if count != 1 else ''} running that nobody here launched, "
            f"{money(hourly_cents)}/h")


def _row(c: ClusterRecord) -> Block:
    return section(f"{cluster_ref(c)} · *{escaped(shape_label(c.shape, c.accelerator_name), 60)}*"
                   f" · {escaped(c.location, 40)} · *{hourly(c.hourly_cents)}* · "
                   f"{money(c.accrued_cents)} so far", accessory=claim_button(c))


def _rows(members: Sequence[ClusterRecord], shown: int) -> list[Block]:
    dearest = sorted(members, key=lambda c: (-c.hourly_cents, c.created_at, c.id))
    return [_row(c) for c in dearest[:shown]]


def digest(members: Sequence[ClusterRecord]) -> Message:
    """The channel's digest of the clusters found here and still unclaimed."""
    total = sum(c.hourly_cents for c in members)
    line = headline(len(members), total)
    blocks: list[Block] = [header("Found at AI Reserve"), section(f"*{line}.* {ADOPTED}")]
    if members:
        blocks.append(context("They bill until someone terminates them. Each is watched and "
                              "reminded here until an approver claims it: *Claim* below, or "
                              "from your App Home."))
        blocks += _rows(members, SHOWN)
        more = len(members) - SHOWN
        if more > 0:
            blocks.append(context(f"…and {more} more (the dearest are shown): claim them from "
                                  "the App Home as these are taken; `/cluster list` shows them "
                                  "all."))
    return compose(line, blocks, key="found")


def more_found(count: int) -> Message:
    """The digest's thread, when more are found later."""
    line = f"{count} more cluster{'s' if count != 1 else ''} found at AI Reserve: the digest " \
           "above lists them"
    return compose(line, [section(line + ".")], key="found-more")


def home_section(unclaimed: Sequence[ClusterRecord], *, count: int,
                 hourly_cents: int) -> list[Block]:
    """The approvers' Home: what nobody claimed yet (`unclaimed`: the dearest of `count`),
    each with Claim."""
    blocks: list[Block] = [header("Found at AI Reserve, unclaimed"),
                           context(f"{headline(count, hourly_cents)}. {ADOPTED}")]
    blocks += _rows(unclaimed, len(unclaimed))
    if count > len(unclaimed):
        blocks.append(context(f"…and {count - len(unclaimed)} more: each one claimed leaves "
                              "this list to the next."))
    return blocks
