"""What people see of waiting for stock: the failed card's button (capacity only), the waiting
card and message, `/cluster waiting`, the Home section."""

from datetime import timedelta

from bot.domain.models import RequestStatus
from bot.slack.blocks.approval import approval_outcome
from bot.slack.blocks.cluster import request_progress
from bot.slack.blocks.home import home_view
from bot.slack.blocks.stock import waiting_list
from bot.slack.ids import Action, WaitRef
from tests.slack.blocks import *

CAPACITY = ("AI Reserve couldn't place every node together in us-tx (only 2 fit right now). "
            "Nothing was launched or billed.")


def waiting(**changes):
    return make_request(status=RequestStatus.WAITING, wait_hours=12, wait_checks=3,
                        wait_until=NOW + timedelta(hours=12),
                        wait_next_at=NOW + timedelta(minutes=4), **changes)


def test_a_launch_failed_for_capacity_offers_wait_for_stock():
    msg = approval_outcome(make_request(status=RequestStatus.LAUNCH_FAILED, last_error=CAPACITY),
                           make_quote(), (), now=NOW)
    check_message(msg)
    ids = [b["action_id"] for b in buttons(msg)]
    assert ids == [Action.RETRY_LAUNCH, Action.WAIT_FOR_STOCK]
    [wait] = [b for b in buttons(msg) if b["action_id"] == Action.WAIT_FOR_STOCK]
    assert WaitRef.unpack(wait["value"]).request_id == "req_1"


def test_a_launch_failed_for_payment_offers_no_wait():
    msg = approval_outcome(make_request(status=RequestStatus.LAUNCH_FAILED,
                                        last_error="AI Reserve needs the account topped up"),
                           make_quote(), (), now=NOW)
    assert [b["action_id"] for b in buttons(msg)] == [Action.RETRY_LAUNCH]


def test_the_waiting_card_and_message_say_until_when_and_offer_withdraw():
    card = approval_outcome(waiting(), make_quote(), (), now=NOW)
    check_message(card)
    assert "waiting for stock" in all_text(card) and buttons(card) == []
    progress = request_progress(waiting(), make_quote(), None, now=NOW)
    check_message(progress)
    assert "Waiting for stock" in all_text(progress)
    assert [b["action_id"] for b in buttons(progress)] == [Action.WITHDRAW]


def test_waiting_list_shows_each_wait_and_withdraw_only_for_ones_own():
    mine, theirs = waiting(), waiting(id="req_2", requester_id="U0DAVE")
    msg = waiting_list([(mine, make_quote()), (theirs, make_quote())], viewer=mine.requester_id,
                       now=NOW)
    text = checked_text(msg)
    assert "Waiting for stock (2)" in text and "3 re-quotes so far" in text
    accessories = [d["accessory"]["action_id"] for d in block_dicts(msg) if "accessory" in d]
    assert accessories == [Action.WITHDRAW]  # beside alice's own wait only
    empty = waiting_list([], viewer="U0ALICE", now=NOW)
    assert "Nothing is waiting for stock" in all_text(empty)


def test_home_lists_ones_own_waits_only_when_there_are_some():
    args = {"user_id": "U0ALICE", "clusters": [], "pending": [], "is_approver": False,
            "month_spent_cents": 0, "budget_cents": None, "month": "2026-11", "now": NOW}
    assert "Waiting for stock" not in str(home_view(**args).to_dict())
    view = home_view(**args, waiting=[(waiting(requester_id="U0ALICE"), make_quote())])
    assert "Waiting for stock" in str(view.to_dict())
