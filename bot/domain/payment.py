"""Payment trouble is said before it kills (contract §5.5).

When AI Reserve cannot charge an hour to the account, the cluster's billing turns `past_due` with
a `graceEndsAt`: unless the balance covers what is unpaid by then, AI Reserve terminates the
cluster (`payment_grace_expired`). The watcher turns each poll into at most two notices per grace
period, keyed by its deadline so each is said once (the notices outbox is unique per cluster and
key): `past_due:<deadline>` as soon as it is seen, and `grace_ending:<deadline>` once less than
`REMIND_BEFORE` is left (from the poll after the first notice, so a first notice that came that
late is still followed by the reminder). The termination notice that follows is the watcher's
usual one.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.domain.models import Observation
from bot.domain.watch import Notice, NoticeFacts, NoticeKind

REMIND_BEFORE = timedelta(minutes=15)
PAST_DUE = "past_due"


def payment_notices(before: Observation | None, after: Observation, *, cluster_id: str,
                    now: datetime) -> list[Notice]:
    """The payment notices `after` calls for at `now` (AI Reserve's time); duplicates of
    notices already queued are dropped by their keys."""
    deadline = after.grace_ends_at
    if after.payment_status != PAST_DUE or deadline is None or now >= deadline:
        return []
    facts = NoticeFacts(episode=after.episode, accrued_cents=after.accrued_cents,
                        auto_recovery=after.auto_recovery, grace_ends_at=deadline,
                        unpaid_cents=after.unpaid_cents)
    stamp = deadline.isoformat()
    out = [Notice(cluster_id=cluster_id, key=f"past_due:{stamp}", kind=NoticeKind.PAST_DUE,
                  facts=facts, created_at=now)]
    seen_before = (before is not None and before.payment_status == PAST_DUE
                   and before.grace_ends_at == deadline)
    if seen_before and now >= deadline - REMIND_BEFORE:
        out.append(Notice(cluster_id=cluster_id, key=f"grace_ending:{stamp}",
                          kind=NoticeKind.GRACE_ENDING, facts=facts, created_at=now))
    return out
