"""Payment trouble, said before it kills: the past-due notice and the reminder before the grace
period ends (bot/domain/payment.py decides when). To the cluster's owner and the approvals
channel, so the amounts are AI Reserve's figures and nothing here is a secret."""

from __future__ import annotations

from datetime import datetime

from bot.domain.models import ClusterRecord
from bot.domain.watch import Notice, NoticeKind
from bot.slack.blocks.cluster import cluster_ref, owner_mention
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *


def payment_notice(n: Notice, c: ClusterRecord, *, now: datetime) -> Message:
    f = n.facts
    assert f.grace_ends_at is not None
    unpaid = money(f.unpaid_cents or 0)
    deadline = f.grace_ends_at
    left = duration(max(0.0, (deadline - now).total_seconds()))
    if n.kind is NoticeKind.GRACE_ENDING:
        body = (f":rotating_light: AI Reserve terminates {cluster_ref(c)} in *{left}* (at "
                f"{when(deadline)}) unless the account is topped up: *{unpaid} unpaid* for it.")
        text = (f"Cluster {escaped(c.id, ID_MAX)}: AI Reserve terminates it in {left} unless "
                f"the account is topped up ({unpaid} unpaid)")
    else:
        body = (f":credit_card: AI Reserve could not charge the account for {cluster_ref(c)}: "
                f"*{unpaid} unpaid*. Unless the balance covers it by *{when(deadline)}* (in "
                f"{left}), AI Reserve terminates the cluster; its volume is kept. Until then it "
                f"goes on billing {hourly(c.hourly_cents)}.")
        text = (f"Cluster {escaped(c.id, ID_MAX)}: payment past due ({unpaid} unpaid); AI "
                f"Reserve terminates it in {left} unless the account is topped up")
    note = "Top up the AI Reserve account to keep it running."
    return compose(text, [section(body), context(f"Owner: {owner_mention(c.owner_id)} · {note}")],
                   key=f"payment.{n.kind.value}")
