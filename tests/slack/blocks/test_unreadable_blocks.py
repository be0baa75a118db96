"""The 'can't read this cluster' notice: who, since when, which field, the burn — no value."""

from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from bot.slack.blocks.unreadable import readable_again_notice, unreadable_notice
from tests.slack.blocks import NOW, check_message, make_cluster


def test_unreadable_says_it_may_still_bill_with_the_last_rate_and_the_field():
    cluster = make_cluster(hourly_cents=6253)
    notice = Notice(cluster_id=cluster.id, key="unreadable:x", kind=NoticeKind.UNREADABLE,
                    created_at=NOW, facts=NoticeFacts(accrued_cents=12506,
                                                      unreadable_field="billing`<!here>",
                                                      unreadable_since=NOW))
    msg = unreadable_notice(notice, cluster)
    check_message(msg)
    text = msg.text + str(msg.as_kwargs())
    assert "$62.53/h" in text and "$125.06" in text
    assert "may still be billing" in text.lower()
    assert cluster.id in text and "<@U0ALICE>" in text
    assert "<!here>" not in text  # a field path from the provider can't ping anyone


def test_readable_again_is_one_line_in_the_thread():
    cluster = make_cluster()
    notice = Notice(cluster_id=cluster.id, key="readable:x", kind=NoticeKind.READABLE_AGAIN,
                    created_at=NOW, facts=NoticeFacts(accrued_cents=100, unreadable_since=NOW))
    msg = readable_again_notice(notice, cluster)
    check_message(msg)
    assert "reads again" in msg.text
