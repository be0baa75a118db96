"""The approval card and its outcome under the spend policy: two approvers, overrides,
envelopes, auto-approval."""

from dataclasses import dataclass
from datetime import timedelta

import pytest

from bot.domain.models import Decision, RequestStatus
from bot.domain.policy import Policy
from bot.slack.blocks.approval import approval_card, approval_outcome
from bot.slack.ids import Action, ApprovalRef
from tests.slack.blocks import *

RULE = "This would bring your month to $41,200.00 of your $40,000.00 budget."


@dataclass(frozen=True)
class Thresholds:
    auto_approve_below_cents: int | None = 2000
    one_approver_up_to_cents: int | None = 20000


POLICY = Thresholds()


def test_two_approvers_progress_on_the_card():
    req = make_request(approvals_needed=2, hourly_cents=25000)
    none_yet = approval_card(req, make_quote(), now=NOW, policy=POLICY)
    check_message(none_yet)
    assert "Needs two approvers (over $200.00/h): 0 of 2 so far" in all_text(none_yet)
    one = approval_card(req, make_quote(), now=NOW, policy=POLICY,
                        approvals=[make_approval(hourly_cents=25000),
                                   make_approval(approver_id="U0BOB"),  # a double click
                                   make_approval(request_id="req_other", approver_id="U0DAN")])
    text = all_text(one)
    assert "Needs two approvers (over $200.00/h): 1 of 2 so far — <@U0BOB>" in text
    assert "U0DAN" not in text
    assert "It needs 2 approvers: 1 so far." in button(one, Action.APPROVE)["confirm"]["text"][
        "text"]


def test_two_approvers_without_thresholds_omits_the_number():
    req = make_request(approvals_needed=2)
    text = all_text(approval_card(req, make_quote(), now=NOW))
    assert "Needs two approvers: 0 of 2 so far" in text


def test_single_approver_card_has_no_policy_lines():
    text = all_text(approval_card(make_request(), make_quote(), now=NOW, policy=POLICY))
    assert "approvers" not in text and "spend policy" not in text and "Approves up" not in text


def test_override_warning_and_confirm():
    req = make_request(override_rule=RULE)
    msg = approval_card(req, make_quote(), now=NOW, policy=POLICY)
    text = checked_text(msg)
    assert ("Breaks the spend policy: This would bring your month to $41,200.00 of your "
            "$40,000.00 budget.* Only an admin can approve it, as an explicit override.") in text
    approve = button(msg, Action.APPROVE)
    assert approve["confirm"]["title"]["text"] == "Override and approve $62.53/h?"
    assert approve["confirm"]["confirm"]["text"] == "Override and approve"
    assert approve["confirm"]["style"] == "danger"
    assert "You override the spend policy: This would bring" in approve["confirm"]["text"]["text"]
    assert_confirms_state(msg, "$62.53")
    ref = ApprovalRef.unpack(approve["value"])
    assert (ref.request_id, ref.hourly_cents) == ("req_1", 6253)


NOT_A_CAP = "Envelope 72 h ≈ $4,502.16, not a cap: at its end the owner and approvers are only"
ENFORCED = ("Envelope 72 h ≈ $4,502.16, enforced: the cluster is terminated before hour 73 is "
            "charged")


@pytest.mark.parametrize(("enforce", "planned", "said"), [
    (False, False, NOT_A_CAP), (True, False, ENFORCED), (False, True, ENFORCED)])
def test_lifetime_envelope_on_card_and_confirm_says_how_it_ends(enforce, planned, said):
    # Issue 16: with enforcement off the card read "Approves up to 72 hours" and billed 73.
    req = make_request(lifetime_hours=72)
    q = make_quote()
    if planned:
        q = q.model_copy(update={"spec": q.spec.model_copy(update={"planned_hours": 72})})
    policy = Policy(enforce_lifetime=enforce)
    msg = approval_card(req, q, now=NOW, policy=policy)
    text = all_text(msg)
    assert said in text and "up to" not in text
    confirm = button(msg, Action.APPROVE)["confirm"]["text"]["text"]
    assert confirm.startswith("The whole cluster bills $62.53 per hour ($1,500.72 per day)")
    assert ("it ends in termination" if said == ENFORCED else "not a cap") in confirm
    outcome = approval_outcome(req.model_copy(update={"status": RequestStatus.APPROVED}),
                               q, [make_approval()], now=NOW, policy=policy)
    assert said in all_text(outcome)


def test_everything_at_once_keeps_the_rate_in_the_confirm():
    req = make_request(lifetime_hours=10_000, approvals_needed=2, override_rule=HOSTILE * 5)
    msg = approval_card(req, make_quote(), now=NOW, policy=POLICY)
    check_message(msg)
    assert_escaped(msg)
    assert_confirms_state(msg, "$62.53")
    text = button(msg, Action.APPROVE)["confirm"]["text"]["text"]
    assert "$62.53 per hour" in text and "≈ $625,300.00" in text


@pytest.mark.parametrize("status", [RequestStatus.APPROVED, RequestStatus.LAUNCHING,
                                    RequestStatus.LAUNCHED])
def test_outcome_auto_approved(status):
    req = make_request(status=status, approvals_needed=0, cluster_id="clu_9xQe1")
    msg = approval_outcome(req, make_quote(), [], now=NOW, policy=POLICY)
    check_message(msg)
    assert "Auto-approved by the spend policy (under $20.00/h)" in all_text(msg)
    plain = approval_outcome(req, make_quote(), [], now=NOW)
    assert "Auto-approved by the spend policy" in all_text(plain)
    assert "(under" not in all_text(plain)


def test_outcome_names_both_approvers():
    req = make_request(status=RequestStatus.LAUNCHED, approvals_needed=2, cluster_id="clu_1")
    approvals = [make_approval(), make_approval(approver_id="U0CAROL", at=NOW)]
    text = all_text(approval_outcome(req, make_quote(), approvals, now=NOW, policy=POLICY))
    assert "Approved by <@U0BOB> at <!date^" in text
    assert " and <@U0CAROL> at <!date^" in text
    assert "launched as `clu_1`" in text
    assert "Auto-approved" not in text


def test_outcome_pending_two_approvers_shows_progress():
    req = make_request(approvals_needed=2)
    text = all_text(approval_outcome(req, make_quote(), [make_approval()], now=NOW,
                                     policy=POLICY))
    assert "Waiting for approval — Needs two approvers (over $200.00/h): 1 of 2 so far" in text


def test_outcome_override_approved_and_rejected():
    req = make_request(status=RequestStatus.APPROVED, override_rule=RULE, decided_by="U0CAROL",
                       decided_at=NOW - timedelta(minutes=1))
    text = all_text(approval_outcome(req, make_quote(), [], now=NOW))
    assert "Approved by <@U0CAROL> at <!date^" in text
    assert "as an explicit override of the spend policy" in text
    assert "Broke the spend policy: This would bring" in text
    rejected = req.model_copy(update={"status": RequestStatus.REJECTED})
    text = all_text(approval_outcome(rejected, make_quote(),
                                     [make_approval(Decision.REJECT, approver_id="U0CAROL")],
                                     now=NOW))
    assert "Rejected by <@U0CAROL>" in text


def test_hostile_policy_texts_are_escaped_everywhere():
    for status in RequestStatus:
        req = make_request(status=status, override_rule=HOSTILE * 20, approvals_needed=2,
                           lifetime_hours=1)
        for msg in (approval_card(req, make_quote(), now=NOW, policy=POLICY),
                    approval_outcome(req, make_quote(), [], now=NOW, policy=POLICY)):
            check_message(msg)
            assert_escaped(msg)
            assert SECRET not in all_text(msg)


def test_the_domain_policy_supplies_the_thresholds():
    policy = Policy(auto_approve_below_cents=2000, one_approver_up_to_cents=20000)
    req = make_request(approvals_needed=2)
    assert "(over $200.00/h)" in all_text(approval_card(req, make_quote(), now=NOW,
                                                        policy=policy))
