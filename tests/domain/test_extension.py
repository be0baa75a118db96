"""The one extend rule (bot/domain/extension.py), pure: tiers on the added amount, the lifetime,
the budgets through the same `judge_spend` as a launch, who may ask and approve, bad hours."""

import pytest

from bot.domain.errors import InvalidCommand
from bot.domain.extension import (
    MAX_EXTEND_HOURS,
    check_hours,
    judge_extension,
    may_approve,
    may_ask,
    month_cents,
)
from bot.domain.policy import Policy, evaluate, judge_spend
from bot.domain.spend import MonthSpend
from tests.domain import NOW, make_cluster

# $10/h auto, $100/h one approver, 72 h: an added $720 is where approvers start, $7,200 two.
POLICY = Policy(approver_ids=frozenset({"U0BOB", "U0CAROL"}), auto_approve_below_cents=10_00,
                one_approver_up_to_cents=100_00, max_lifetime_hours=72,
                default_user_budget_cents=40_000_00)


def judge(hours, *, asker="U0ALICE", approver=False, lifetime=10, rate=6253, policy=POLICY,
          spent=0):
    cluster = make_cluster(lifetime_hours=lifetime, hourly_cents=rate)
    return judge_extension(policy, cluster=cluster, hours=hours, asker=asker,
                           asker_is_approver=approver, month_spend=MonthSpend(user_cents=spent),
                           now=NOW)


def test_the_tiers_apply_to_the_added_amount_over_the_policy_lifetime():
    assert judge(11).verdict.approvals_needed == 0  # $687.83 < $720
    assert judge(11).applies_now
    assert judge(12).verdict.approvals_needed == 1  # $750.36
    assert not judge(12).applies_now
    assert judge(62, lifetime=10).verdict.approvals_needed == 1  # $3,876.86, 72 h in all
    assert judge(116, lifetime=1).verdict.approvals_needed == 2  # $7,253.48 > $7,200


def test_beyond_the_lifetime_a_cheap_extension_needs_an_approver():
    cheap = judge(10, lifetime=70, rate=303)  # $30.30, but 80 h > 72
    assert cheap.verdict.approvals_needed == 1 and not cheap.applies_now


def test_an_approver_asking_counts_once_but_the_owner_never():
    assert judge(12, asker="U0BOB", approver=True).applies_now
    assert not judge(116, lifetime=1, asker="U0BOB", approver=True).applies_now  # needs two
    assert not judge(12, asker="U0ALICE", approver=True).applies_now  # the owner, approver too


def test_without_a_lifetime_the_tiers_judge_the_rate_like_a_launch():
    open_ended = POLICY.model_copy(update={"max_lifetime_hours": None})
    assert judge(1000, rate=900, policy=open_ended).verdict.approvals_needed == 0  # $9/h
    assert judge(1, rate=6253, policy=open_ended).verdict.approvals_needed == 1
    assert judge(1, rate=12485, policy=open_ended).verdict.approvals_needed == 2


def test_the_budget_counts_the_part_of_the_extension_in_this_month():
    # NOW is 29 Nov 10:00, ready at 09:00: the month has 39 accrual marks left from ready.
    cluster = make_cluster(lifetime_hours=10)
    assert month_cents(cluster, to_hours=15, now=NOW) == 5 * 6253
    assert month_cents(cluster, to_hours=500, now=NOW) == (39 - 10) * 6253
    refused = judge(5, spent=40_000_00 - 4 * 6253)
    assert refused.verdict.is_refusal
    assert "of your $40,000.00 budget" in (refused.verdict.refused or "")
    assert "$312.65 for this one" in (refused.verdict.refused or "")
    assert not judge(4, spent=40_000_00 - 4 * 6253).verdict.is_refusal


def test_launch_and_extension_share_one_decision():
    spent = MonthSpend(user_cents=39_000_00)
    launch = evaluate(POLICY, requester="U0ALICE", accelerator_id="h100", nodes=2,
                      hourly_cents=6253, month_spend=spent, now=NOW)
    same = judge_spend(POLICY, spender="U0ALICE", adds_cents=38 * 6253, approvals_needed=1,
                       month_spend=spent, lifetime_hours=72)
    assert launch == same  # 38 accruals from NOW to the month's end, capped at 72


def test_who_may_ask_and_approve():
    cluster = make_cluster(lifetime_hours=10)
    assert may_ask(cluster, "U0ALICE", asker_is_approver=False) is None
    assert may_ask(cluster, "U0BOB", asker_is_approver=True) is None
    why = may_ask(cluster, "U0DAVE", asker_is_approver=False)
    assert why is not None and "Only the owner (<@U0ALICE>) or an approver" in why
    assert "its owner or an approver" in why  # the rule, said where it is refused
    assert "your own" in (may_approve(POLICY, "U0ALICE", owner="U0ALICE", is_approver=True,
                                      admin_needed=False, approved_by=frozenset()) or "")
    assert "already approved" in (may_approve(POLICY, "U0BOB", owner="U0ALICE",
                                              is_approver=True, admin_needed=False,
                                              approved_by=frozenset({"U0BOB"})) or "")
    assert may_approve(POLICY, "U0CAROL", owner="U0ALICE", is_approver=True,
                       admin_needed=False, approved_by=frozenset({"U0BOB"})) is None


@pytest.mark.parametrize(("raw", "said"), [
    ("0", "`0` adds nothing"), ("-3", "`-3` is negative"), ("1.5", "not a whole number"),
    ("2,5", "not a whole number"), ("100000", "more than ten years"),
    (str(MAX_EXTEND_HOURS + 1), "more than ten years"), ("99999999999", "more than ten years"),
    ("abc", "`abc` is not a number of hours"), ("", "is not a number of hours")])
def test_bad_hours_are_named(raw, said):
    with pytest.raises(InvalidCommand) as caught:
        check_hours(raw)
    assert said in caught.value.user_message
    assert caught.value.usage.startswith("/cluster extend")


def test_good_hours():
    assert check_hours("12") == 12 and check_hours("+3") == 3
    assert check_hours(str(MAX_EXTEND_HOURS)) == MAX_EXTEND_HOURS
