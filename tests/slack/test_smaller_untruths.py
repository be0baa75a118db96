"""Issue 16, build 11: the smaller untruths, each checked against the text that said it —
a terminate confirm before anything billed, a failed launch's doubled full stop, Keep waiting's
missing words, a too-large `hours=`, a grace-terminated cluster's unpaid amount, a plain
`#channel` in `/cluster notify`."""

from __future__ import annotations

import json

import pytest

from bot.domain.commands import NotifyCommand
from bot.domain.errors import InvalidCommand
from bot.domain.models import ClusterState, Observation, RequestStatus
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from bot.slack.actions import BUTTONS
from bot.slack.blocks.approval import outcome_line
from bot.slack.blocks.audit import receipt
from bot.slack.blocks.cluster import request_progress, terminate_prompt
from bot.slack.blocks.notices import thread_notice
from bot.slack.ids import Action, ReadinessRef
from bot.slack.parsing import parse
from tests.slack.blocks import *

CAPACITY = ("AI Reserve couldn't place every node together in us-tx (only 2 fit right now). "
            "Nothing was launched or billed.")


def test_the_terminate_confirm_before_ready_says_nothing_is_billed():
    provisioning = make_cluster(status=ClusterState.PROVISIONING, ready_at=None, nodes_ready=1,
                                accrued_cents=0, accrued_hours=0)
    confirm = json.dumps(button(terminate_prompt(provisioning, now=NOW),
                                Action.TERMINATE)["confirm"])
    assert "already paid" not in confirm
    # Issue 27.4: it may be ready (and its first hour charged) by the time this is read.
    assert "Nothing is charged yet" not in confirm and "costs nothing" not in confirm
    assert "it is free to terminate until it is ready" in confirm
    prompt = all_text(terminate_prompt(provisioning, now=NOW))
    assert "costs nothing" not in prompt and "free to terminate until it is ready" in prompt
    running = json.dumps(button(terminate_prompt(make_cluster(), now=NOW),
                                Action.TERMINATE)["confirm"])
    assert "The current hour is already paid" in running


def test_a_failed_launch_says_its_reason_with_one_full_stop():
    req = make_request(status=RequestStatus.LAUNCH_FAILED, last_error=CAPACITY)
    card = outcome_line(req, [])
    progress = all_text(request_progress(req, make_quote(), None, now=NOW))
    for text in (card, progress):
        assert "billed.." not in text and "Nothing was launched or billed. " in text, text


def test_keep_waiting_says_what_it_waits_for():
    cluster = make_cluster()
    said = BUTTONS[Action.KEEP_WAITING].said(ReadinessRef(cluster_id=cluster.id, prompt=1),
                                             cluster)
    assert isinstance(said, str)
    assert "Waiting on for" not in said
    assert f"Waiting longer for `{cluster.id}`'s readiness line" in said


@pytest.mark.parametrize("hours", ["100000", "87601", "99999999999999999999"])
def test_too_many_hours_is_still_a_number_of_hours(hours):
    """The parser takes it; the quoting service names the limit it passes (tests/e2e)."""
    assert parse(f"quote h100x8 nodes=2 hours={hours}").hours == int(hours)  # type: ignore[union-attr]
    with pytest.raises(InvalidCommand) as caught:
        parse("quote h100x8 nodes=2 hours=1.5")
    assert "not a number of hours" in caught.value.user_message


def test_a_plain_channel_name_in_notify_is_taken_as_a_channel():
    assert parse("notify clu_1 #approvals") == NotifyCommand("clu_1", "",
                                                             channel_name="approvals")
    assert parse("notify clu_1 #ML-infra") == NotifyCommand("clu_1", "", channel_name="ml-infra")
    with pytest.raises(InvalidCommand) as caught:
        parse("notify clu_1 #bad!name")
    assert caught.value.bad_part == "#bad!name"
    assert "`#ml-infra`" in caught.value.user_message


def test_a_grace_terminated_cluster_says_what_was_left_unpaid():
    ended = make_cluster(status=ClusterState.TERMINATED, termination_reason="payment_grace_expired",
                         terminated_at=NOW, observed=Observation(
                             status=ClusterState.TERMINATED, payment_status="past_due",
                             unpaid_cents=12506, accrued_cents=5 * 6253, accrued_hours=5))
    text = all_text(receipt(ended, requester="U0ALICE", approvers=["U0BOB"],
                            auto_approved=False, now=NOW))
    assert "*$125.06 of it is unpaid*" in text
    notice = Notice(cluster_id=ended.id, key="terminated", kind=NoticeKind.GRACE_TERMINATED,
                    facts=NoticeFacts(accrued_cents=5 * 6253, unpaid_cents=12506),
                    created_at=NOW)
    assert "*$125.06 of it unpaid*" in all_text(thread_notice(notice, ended, now=NOW))
    paid = ended.model_copy(update={"termination_reason": "requested"})
    assert "unpaid" not in all_text(receipt(paid, requester="U0ALICE", approvers=[],
                                            auto_approved=True, now=NOW))
