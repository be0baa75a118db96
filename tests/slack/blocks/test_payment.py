"""The payment notices: past due (the deadline, the amount) and the reminder before grace ends."""

from datetime import timedelta

import pytest

from bot.domain.watch import Notice, NoticeKind
from bot.slack.blocks.payment import payment_notice
from tests.slack.blocks import (
    EXTREME_CLUSTER,
    NOW,
    all_text,
    buttons,
    check_message,
    checked_text,
    make_cluster,
    make_notice,
)

DEADLINE = NOW + timedelta(minutes=45)


def notice(kind: NoticeKind, unpaid: int = 6253) -> Notice:
    return make_notice(kind, f"{kind.value}:x", grace_ends_at=DEADLINE, unpaid_cents=unpaid)


def test_past_due_says_the_deadline_the_amount_and_what_happens():
    msg = payment_notice(notice(NoticeKind.PAST_DUE), make_cluster(), now=NOW)
    text = checked_text(msg)
    assert "*$62.53 unpaid*" in text and "(in 45 min)" in text
    assert f"<!date^{int(DEADLINE.timestamp())}^" in text
    assert "terminates the cluster; its volume is kept" in text
    assert "Owner: <@U0ALICE>" in text and "Top up the AI Reserve account" in text
    assert msg.text.endswith("($62.53 unpaid); AI Reserve terminates it in 45 min unless the "
                             "account is topped up")
    assert buttons(msg) == [] and "ssh" not in text.lower()


def test_the_reminder_says_how_long_is_left():
    msg = payment_notice(notice(NoticeKind.GRACE_ENDING), make_cluster(),
                         now=DEADLINE - timedelta(minutes=14))
    check_message(msg)
    assert "in *14 min*" in all_text(msg)


@pytest.mark.parametrize("kind", [NoticeKind.PAST_DUE, NoticeKind.GRACE_ENDING])
def test_extreme_clusters_still_validate(kind):
    check_message(payment_notice(notice(kind, unpaid=10**12), make_cluster(**EXTREME_CLUSTER),
                                 now=NOW))
