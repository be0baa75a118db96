"""When payment trouble is said: once per grace period, and a reminder before it ends."""

from datetime import timedelta

from bot.domain.models import ClusterState, Observation
from bot.domain.payment import REMIND_BEFORE, payment_notices
from bot.domain.watch import NoticeKind
from tests.domain import NOW

DEADLINE = NOW + timedelta(hours=1)
CURRENT = Observation(status=ClusterState.RUNNING)
PAST_DUE = CURRENT.model_copy(update={"payment_status": "past_due", "grace_ends_at": DEADLINE,
                                      "unpaid_cents": 6253})


def kinds(before, after, now):
    return [(n.kind, n.key) for n in payment_notices(before, after, cluster_id="c", now=now)]


def test_nothing_while_the_account_pays():
    assert kinds(None, CURRENT, NOW) == []
    assert kinds(PAST_DUE, CURRENT, NOW) == []


def test_past_due_is_keyed_by_its_grace_period():
    stamp = DEADLINE.isoformat()
    assert kinds(CURRENT, PAST_DUE, NOW) == [(NoticeKind.PAST_DUE, f"past_due:{stamp}")]
    [n] = payment_notices(CURRENT, PAST_DUE, cluster_id="c", now=NOW)
    assert (n.facts.grace_ends_at, n.facts.unpaid_cents) == (DEADLINE, 6253)
    later = PAST_DUE.model_copy(update={"grace_ends_at": DEADLINE + timedelta(hours=5)})
    assert kinds(CURRENT, later, NOW)[0][1] != f"past_due:{stamp}"  # a new period, said again


def test_the_reminder_comes_in_the_last_minutes_after_the_notice():
    before_window = DEADLINE - REMIND_BEFORE - timedelta(seconds=1)
    assert [k for k, _ in kinds(PAST_DUE, PAST_DUE, before_window)] == [NoticeKind.PAST_DUE]
    assert [k for k, _ in kinds(PAST_DUE, PAST_DUE, DEADLINE - REMIND_BEFORE)] == [
        NoticeKind.PAST_DUE, NoticeKind.GRACE_ENDING]
    assert kinds(PAST_DUE, PAST_DUE, DEADLINE) == []  # over: the termination notice follows
