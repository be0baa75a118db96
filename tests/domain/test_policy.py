"""The spend policy matrix: who may approve, how many approvals a rate needs, which rule breaks."""

from datetime import UTC, datetime

import pytest

from bot.domain.policy import (
    Policy,
    Verdict,
    accelerator_allowed,
    admin_still_needed,
    budget_refusal,
    evaluate,
    may_approve,
    money,
    request_month_cents,
)
from bot.domain.spend import Commitment, MonthSpend, Team
from tests.domain import NOW

# NOW is 29 Nov 10:00 UTC: a cluster launched now accrues 38 times before 1 Dec 00:00.
HOURS_LEFT = 38
RESEARCH = Team(name="research", members=frozenset({"U0ALICE", "U0DAVE"}),
                monthly_cents=150_000_00)

POLICY = Policy(
    approvals_channel="C0APPROVALS",
    approver_ids=frozenset({"U0BOB", "U0CAROL"}),
    approver_group="S0MLLEADS",
    admin_ids=frozenset({"U0CAROL"}),
    auto_approve_below_cents=20_00,
    one_approver_up_to_cents=200_00,
    default_user_budget_cents=40_000_00,
    user_budget_cents={"U0ALICE": 80_000_00},
    teams=(RESEARCH,),
    allowed_accelerators=frozenset({"h100", "h200"}),
    max_nodes=4,
    max_lifetime_hours=72,
    overrides_by_admins=False,
)
NOTHING_SPENT = MonthSpend(user_cents=0, team_cents={})


def verdict(policy: Policy = POLICY, *, requester="U0ERIN", accelerator_id="h100-sxm-80gb",
            nodes=2, hourly_cents=100_00, spend=NOTHING_SPENT, now=NOW) -> Verdict:
    return evaluate(policy, requester=requester, accelerator_id=accelerator_id, nodes=nodes,
                    hourly_cents=hourly_cents, month_spend=spend, now=now)


# --- who may approve --------------------------------------------------------------------------

def test_nobody_approves_their_own_request():
    why = may_approve(POLICY, "U0BOB", requester="U0BOB", group_members=frozenset(),
                      override=False)
    assert why == "You can't approve your own launch request; another approver has to decide."


def test_an_admin_cannot_override_their_own_request_either():
    why = may_approve(POLICY, "U0CAROL", requester="U0CAROL", group_members=frozenset(),
                      override=True)
    assert why is not None and "your own" in why


def test_someone_who_is_not_an_approver_may_not_approve():
    why = may_approve(POLICY, "U0EVE", requester="U0ALICE", group_members=frozenset({"U0FRANK"}),
                      override=False)
    assert why == "Only the configured approvers can approve launch requests."


def test_listed_approvers_and_group_members_may_approve():
    for approver in ("U0BOB", "U0FRANK"):
        assert may_approve(POLICY, approver, requester="U0ALICE",
                           group_members=frozenset({"U0FRANK"}), override=False) is None


def test_group_members_count_only_when_the_policy_names_a_group():
    no_group = POLICY.model_copy(update={"approver_group": None})
    assert may_approve(no_group, "U0FRANK", requester="U0ALICE",
                       group_members=frozenset({"U0FRANK"}), override=False) is not None


def test_an_override_needs_an_admin():
    why = may_approve(POLICY, "U0BOB", requester="U0ALICE", group_members=frozenset(),
                      override=True)
    assert why is not None and "only a policy admin" in why
    assert may_approve(POLICY, "U0CAROL", requester="U0ALICE", group_members=frozenset(),
                       override=True) is None


def test_an_admin_need_not_be_an_approver_to_override_but_only_to_approve():
    policy = POLICY.model_copy(update={"admin_ids": frozenset({"U0GRACE"})})
    assert may_approve(policy, "U0GRACE", requester="U0ALICE", group_members=frozenset(),
                       override=True) is None
    assert may_approve(policy, "U0GRACE", requester="U0ALICE", group_members=frozenset(),
                       override=False) is not None


def test_admin_still_needed_until_an_admin_has_approved_an_override():
    assert not admin_still_needed(POLICY, override_rule=None, approved_by=[])
    assert admin_still_needed(POLICY, override_rule="Team research: …", approved_by=[])
    assert admin_still_needed(POLICY, override_rule="Team research: …", approved_by=["U0BOB"])
    assert not admin_still_needed(POLICY, override_rule="Team research: …",
                                  approved_by=["U0CAROL"])


# --- thresholds -------------------------------------------------------------------------------

@pytest.mark.parametrize(("hourly", "needed"), [
    (0, 0), (19_99, 0),  # below auto_approve_below
    (20_00, 1), (62_53, 1), (200_00, 1),  # from the threshold up to one_approver_up_to
    (200_01, 2), (5_000_00, 2),  # above it: two distinct approvers
])
def test_the_rate_decides_how_many_approvers(hourly, needed):
    spend = MonthSpend(user_cents=0)
    v = evaluate(POLICY.model_copy(update={"default_user_budget_cents": None, "teams": ()}),
                 requester="U0ERIN", accelerator_id="h100", nodes=2, hourly_cents=hourly,
                 month_spend=spend, now=NOW)
    assert v == Verdict(approvals_needed=needed, refused=None, override=False, lifetime_hours=72)
    assert v.auto_approved is (needed == 0) and not v.is_refusal


def test_the_simple_policy_is_one_approver_for_everything():
    simple = Policy.simple(approvers=["U0BOB"], approvals_channel="C0APPROVALS")
    assert simple.approver_ids == frozenset({"U0BOB"})
    assert simple.approvals_channel == "C0APPROVALS"
    for hourly in (1, 100_00, 10_000_00):
        v = verdict(simple, accelerator_id="b200", nodes=8, hourly_cents=hourly,
                    spend=MonthSpend(user_cents=10**12))
        assert v == Verdict(approvals_needed=1, refused=None, override=False,
                            lifetime_hours=None)


# --- limits -----------------------------------------------------------------------------------

def test_a_disallowed_accelerator_is_refused_by_name():
    v = verdict(POLICY.model_copy(update={"allowed_accelerators": frozenset({"h100"})}),
                accelerator_id="b200")
    assert v.refused == "h100 only: b200 is not allowed by the spend policy."
    assert v.is_refusal and not v.override
    v = verdict(accelerator_id="b200-sxm-192gb")
    assert v.refused == "h100 or h200 only: b200-sxm-192gb is not allowed by the spend policy."


def test_short_names_match_catalog_ids_by_prefix():
    allowed = frozenset({"h100", "a100-pcie-40gb"})
    assert accelerator_allowed(allowed, "h100-sxm-80gb")
    assert accelerator_allowed(allowed, "H100")
    assert accelerator_allowed(allowed, "a100-pcie-40gb")
    assert not accelerator_allowed(allowed, "h1000-x")
    assert not accelerator_allowed(allowed, "a100-sxm-80gb")
    assert accelerator_allowed(None, "anything")


def test_too_many_nodes_is_refused():
    assert verdict(nodes=4).refused is None
    assert verdict(nodes=6).refused == ("The spend policy allows at most 4 nodes per cluster; "
                                        "this asks for 6.")


# --- budgets ----------------------------------------------------------------------------------

def test_the_requesters_own_budget_with_the_numbers():
    adds = 100_00 * HOURS_LEFT  # $3,800.00 until the month ends
    spent = MonthSpend(user_cents=41_200_00 - adds)
    v = verdict(spend=spent)
    assert v.refused == ("This would bring your month to $41,200.00 of your $40,000.00 budget "
                         "($37,400.00 spent or still to run on clusters; $3,800.00 for this one).")
    assert v.is_refusal and v.approvals_needed >= 1
    # Exactly reaching the budget is allowed.
    assert verdict(spend=MonthSpend(user_cents=40_000_00 - adds)).refused is None


def test_a_personal_budget_replaces_the_default():
    spent = MonthSpend(user_cents=41_200_00 - 100_00 * HOURS_LEFT)
    assert verdict(requester="U0ALICE", spend=spent).refused is None


def test_every_team_budget_of_the_requester_with_the_numbers():
    spent = MonthSpend(user_cents=0, team_cents={"research": 151_000_00 - 100_00 * HOURS_LEFT})
    assert verdict(requester="U0DAVE", spend=spent).refused == (
        "Team research: $151,000.00 of $150,000.00 ($147,200.00 spent or still to run on "
        "clusters; $3,800.00 for this one).")
    assert verdict(requester="U0ERIN", spend=spent).refused is None  # not in the team


def test_the_lifetime_caps_what_the_request_adds_to_the_month():
    start_of_month = datetime(2026, 11, 1, tzinfo=UTC)  # 720 hours to go
    capped = POLICY.model_copy(update={"max_lifetime_hours": 10})
    uncapped = POLICY.model_copy(update={"max_lifetime_hours": None})
    assert request_month_cents(capped, hourly_cents=100_00, now=start_of_month) == 1_000_00
    assert request_month_cents(uncapped, hourly_cents=100_00, now=start_of_month) == 72_000_00
    # Noon on 30 Nov: 12 hours left, so the month ends before the 72 h envelope does.
    noon = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert request_month_cents(POLICY, hourly_cents=100_00, now=noon) == 12 * 100_00
    spent = MonthSpend(user_cents=30_000_00)
    assert verdict(capped, spend=spent, now=start_of_month).refused is None
    assert verdict(uncapped, spend=spent, now=start_of_month).refused.startswith(
        "This would bring your month to $102,000.00 of your $40,000.00 budget (")


def test_every_broken_rule_is_named_in_order():
    spent = MonthSpend(user_cents=40_000_00, team_cents={"research": 150_000_00})
    v = verdict(requester="U0DAVE", accelerator_id="b200", nodes=8, spend=spent)
    assert v.refused is not None
    assert v.refused.split(". ")[0].startswith("h100 or h200 only")
    assert "at most 4 nodes" in v.refused
    assert "Team research: $153,800.00 of $150,000.00 (" in v.refused


def test_a_budget_refusal_names_the_approved_requests_that_hold_the_room():
    held = (Commitment(request_id="lr_a", requester_id="U0BOB", cents=10_000_00),
            Commitment(request_id="lr_b", requester_id="U0BOB", cents=5_000_00))
    spent = MonthSpend(user_cents=39_950_00, requests=held)
    refusal = budget_refusal(POLICY, requester="U0BOB", hourly_cents=100_00, lifetime_hours=1,
                             month_spend=spent, now=NOW)
    assert refusal == ("This would bring your month to $40,050.00 of your $40,000.00 budget "
                       "($24,950.00 spent or still to run on clusters; $15,000.00 held by 2 "
                       "approved requests not launched yet: `lr_a` $10,000.00, `lr_b` "
                       "$5,000.00; $100.00 for this one).")
    assert budget_refusal(POLICY, requester="U0BOB", hourly_cents=100_00, lifetime_hours=1,
                          month_spend=MonthSpend(user_cents=39_900_00), now=NOW) is None


# --- overrides --------------------------------------------------------------------------------

def test_a_broken_rule_goes_to_the_admins_when_overrides_are_on():
    admins = POLICY.model_copy(update={"overrides_by_admins": True})
    v = verdict(admins, nodes=6, hourly_cents=5_00)  # cheap enough to auto-approve otherwise
    assert v.override and not v.is_refusal and not v.auto_approved
    assert v.approvals_needed == 1  # an admin must approve
    assert v.refused is not None and "at most 4 nodes" in v.refused
    assert v.lifetime_hours == 72


def test_an_expensive_override_still_needs_two_approvers():
    admins = POLICY.model_copy(update={"overrides_by_admins": True})
    v = verdict(admins, nodes=6, hourly_cents=300_00)
    assert v.override and v.approvals_needed == 2


def test_without_overrides_a_broken_rule_is_refused():
    v = verdict(nodes=6, hourly_cents=5_00)
    assert v.is_refusal and not v.override and v.approvals_needed == 1


def test_money_formats_cents_as_dollars():
    assert money(4_120_000) == "$41,200.00"
    assert money(5) == "$0.05"
    assert money(-150) == "-$1.50"
