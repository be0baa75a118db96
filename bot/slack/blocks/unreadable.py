"""What the bot says when AI Reserve lists a cluster it can't read (bot/services/unreadable.py):
the owner and the approvals channel once per episode, and a line in its thread when it reads
again. The figures are the last ones read — said as such, since it may still be billing."""

from __future__ import annotations

from bot.domain.models import ClusterRecord
from bot.domain.watch import Notice
from bot.slack.blocks.cluster import cluster_ref, owner_mention
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *

FIELD_MAX = 80  # a field path from the provider's answer: shown, never the value


def unreadable_notice(n: Notice, c: ClusterRecord) -> Message:
    f = n.facts
    since = f"since {when(f.unreadable_since)}" if f.unreadable_since else "for several sweeps"
    field = code(escaped(f.unreadable_field, FIELD_MAX)) if f.unreadable_field else "a field"
    body = (f":warning: The bot *can't read* {cluster_ref(c)} from AI Reserve {since} "
            f"({field} in its answer doesn't parse), so it can't watch it. *It may still be "
            f"billing* — last known burn rate {hourly(c.hourly_cents)}, "
            f"{money(f.accrued_cents)} accrued when last read.")
    text = (f"Can't read cluster {escaped(c.id, ID_MAX)} from AI Reserve; it may still be "
            f"billing {hourly(c.hourly_cents)}")
    note = "Check it at AI Reserve directly; the bot keeps trying every sweep."
    return compose(text, [section(body), context(f"Owner: {owner_mention(c.owner_id)} · {note}")],
                   key="notice.unreadable")


def readable_again_notice(n: Notice, c: ClusterRecord) -> Message:
    body = (f":white_check_mark: {cluster_ref(c)} reads again from AI Reserve: the bot is "
            f"watching it again ({money(n.facts.accrued_cents)} accrued).")
    return compose(f"Cluster {escaped(c.id, ID_MAX)} reads again from AI Reserve",
                   [section(body)], key="notice.readable_again")
