"""The policy file: the example loads, and every mistake names its line and what is wrong."""

from pathlib import Path
from textwrap import dedent

import pytest

from bot.config.policy_file import (
    PolicyError,
    load_policies_or_default,
    load_policy,
    parse_policies,
    parse_policy,
)
from bot.domain.places import Place
from bot.domain.policy import Policy, Project
from bot.domain.spend import Team

ROOT = Path(__file__).parent.parent


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        parse_policy(dedent(text), name="policy.yaml")
    assert str(caught.value) == "\n".join(caught.value.problems)
    return caught.value.problems


def test_the_example_file_loads_with_every_key():
    policy = load_policy(ROOT / "policy.example.yaml")
    assert policy == Policy(
        approvals_channel="C0APPROVALS",
        approver_ids=frozenset({"U0BOB", "U0CAROL"}),
        approver_group="S0MLLEADS",
        admin_ids=frozenset({"U0CAROL"}),
        auto_approve_below_cents=2000,
        one_approver_up_to_cents=20000,
        default_user_budget_cents=4_000_000,
        user_budget_cents={"U0ALICE": 8_000_000},
        teams=(Team(name="research", members=frozenset({"U0ALICE", "U0DAVE"}),
                    monthly_cents=15_000_000),),
        projects=(Project(name="llama-ft", monthly_cents=6_000_000), Project(name="vision")),
        allowed_accelerators=frozenset({"h100", "h200"}),
        max_nodes=8,
        max_lifetime_hours=72,
        enforce_lifetime=False,
        max_stock_wait_hours=48,
        overrides_by_admins=True,
        requester_ids=frozenset({"U0ALICE", "U0DAVE"}),
        requester_groups=frozenset({"S0MLTEAM"}),
        allow_guests=False,
        escalate_to="S0ONCALL",
        escalate_after_minutes=30,
        idle_after_minutes=60,
        idle_every_rank=False,
        idle_done="Training completed",
        idle_terminate_after_minutes=30,
        idle_keep_hours=2,
    )


def test_requesters_and_guests_default_to_everyone_but_guests_and_are_checked():
    policy = parse_policy("approvers: {users: [U0BOB]}\n")
    assert (policy.requester_ids, policy.requester_groups, policy.allow_guests) == (
        frozenset(), frozenset(), False)
    assert problems("approvers: {users: [U0BOB]}\nrequesters: {users: [alice], groups: S0X}\n"
                    "allow_guests: maybe\n") == [
        "policy.yaml:2: requesters.users: 'alice' is not a Slack user id (like U012ABCDEF)",
        "policy.yaml:2: requesters.groups must be a list like [S012ABCDEF], not 'S0X'",
        "policy.yaml:3: allow_guests must be true or false, not 'maybe'"]
    assert problems("approvers: {users: [U0BOB]}\nrequesters:\n  users: []\n") == [
        "policy.yaml:3: requesters lists nobody: list users or groups, or remove it to let "
        "everyone request"]


def test_a_minimal_file_is_approvers_only_with_no_limits():
    policy = parse_policy("approvers:\n  group: S0MLLEADS\n")
    assert policy.approver_group == "S0MLLEADS" and policy.approver_ids == frozenset()
    assert policy.approvals_channel is None and policy.teams == ()
    assert policy.allowed_accelerators is None and policy.max_nodes is None
    assert not policy.overrides_by_admins and not policy.enforce_lifetime


def test_empty_values_mean_not_set_and_money_takes_cents():
    policy = parse_policy(dedent("""\
        approvers: {users: [U0BOB], group:}
        approval: {auto_approve_below: 0.5, one_approver_up_to: 1_000}
        budgets: {default_user: 12.34, teams:}
        limits:
        overrides: none
        """))
    assert policy.approver_group is None and policy.teams == ()
    assert policy.auto_approve_below_cents == 50 and policy.one_approver_up_to_cents == 100_000
    assert policy.default_user_budget_cents == 1234
    assert not policy.overrides_by_admins


def test_load_policy_names_the_file_it_was_given(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("approvers:\n  users: [bob]\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert caught.value.problems == [
        f"{path}:2: approvers.users: 'bob' is not a Slack user id (like U012ABCDEF)"]


def test_a_missing_or_unreadable_file_is_one_clear_problem(tmp_path):
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy(tmp_path / "nope.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(PolicyError, match="not UTF-8"):
        load_policy(binary)


def test_without_a_file_the_policy_is_todays_behaviour(tmp_path):
    policy = load_policies_or_default(None, approvers=("U0BOB",),
                                      approvals_channel="C0APPROVALS").default
    assert policy == Policy.simple(approvers=["U0BOB"], approvals_channel="C0APPROVALS")
    path = tmp_path / "policy.yaml"
    path.write_text("approvers: {users: [U0CAROL]}\n")
    assert load_policies_or_default(path, approvers=("U0BOB",), approvals_channel=None
                                    ).default.approver_ids == frozenset({"U0CAROL"})


VALID = "approvers:\n  users: [U0BOB]\n"

# (the file, the one problem expected) — each names the line and what is wrong.
MALFORMED = [
    ("yaml-syntax", VALID + "approval:\n  auto_approve_below: 1: 2\n",
     "policy.yaml:4: not valid YAML: mapping values are not allowed here"),
    ("yaml-unclosed", VALID + "admins: [U0CAROL\n",
     "policy.yaml:4: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    ("two-documents", VALID + "---\n" + VALID,
     "policy.yaml:3: not valid YAML: but found another document"),
    ("empty", "# nothing yet\n", "policy.yaml:1: the policy file is empty; it needs at least "
                                 "approvers"),
    ("not-a-mapping", "- U0BOB\n", "policy.yaml:1: the policy must be a mapping of keys, "
                                   "not a list"),
    ("unknown-top-key", VALID + "approvels_channel: C0APPROVALS\n",
     "policy.yaml:3: unknown key approvels_channel (did you mean approvals_channel?)"),
    ("unknown-nested-key", VALID + "approval:\n  auto_aprove_below: 20\n",
     "policy.yaml:4: unknown key approval.auto_aprove_below (did you mean auto_approve_below?)"),
    ("unknown-key-no-guess", VALID + "limits:\n  colour: blue\n",
     "policy.yaml:4: unknown key limits.colour (known: accelerators, enforce_lifetime, "
     "max_lifetime_hours, max_nodes, max_stock_wait_hours)"),
    ("duplicate-key", VALID + "admins: [U0CAROL]\nadmins: [U0BOB]\n",
     "policy.yaml:4: duplicate key admins"),
    ("section-not-mapping", VALID + "approval: 20\n",
     "policy.yaml:3: approval must be a mapping of keys, not the number 20"),
    ("money-as-text", VALID + "approval:\n  auto_approve_below: $20\n",
     "policy.yaml:4: approval.auto_approve_below must be an amount in dollars like 20 or 20.50, "
     "not '$20'"),
    ("money-as-bool", VALID + "budgets:\n  default_user: yes\n",
     "policy.yaml:4: budgets.default_user must be an amount in dollars like 20 or 20.50, "
     "not true"),
    ("negative-money", VALID + "budgets:\n  default_user: -5\n",
     "policy.yaml:4: budgets.default_user must not be negative (-5)"),
    ("three-decimals", VALID + "approval:\n  one_approver_up_to: 200.005\n",
     "policy.yaml:4: approval.one_approver_up_to has more than 2 decimals (200.005): "
     "money is in cents"),
    ("infinite-money", VALID + "budgets:\n  default_user: .inf\n",
     "policy.yaml:4: budgets.default_user must be an amount in dollars, not inf"),
    ("thresholds-inverted", VALID + "approval:\n  auto_approve_below: 200\n"
                                    "  one_approver_up_to: 200.00\n",
     "policy.yaml:5: approval.one_approver_up_to must be above auto_approve_below "
     "($200.00 is not above $200.00)"),
    ("bad-approver-id", "approvers:\n  users:\n    - U0BOB\n    - bob@example.com\n",
     "policy.yaml:4: approvers.users: 'bob@example.com' is not a Slack user id (like U012ABCDEF)"),
    ("approvers-not-a-list", "approvers:\n  users: U0BOB\n",
     "policy.yaml:2: approvers.users must be a list like [U012ABCDEF], not 'U0BOB'"),
    ("no-approvers", "approvals_channel: C0APPROVALS\n",
     "policy.yaml:1: approvers must list users or a group: someone has to approve"),
    ("empty-approvers", "approvers:\n  users: []\n",
     "policy.yaml:2: approvers must list users or a group: someone has to approve"),
    ("bad-admin-id", VALID + "admins: [C0CAROL]\n",
     "policy.yaml:3: admins: 'C0CAROL' is not a Slack user id (like U012ABCDEF)"),
    ("bad-channel", VALID + "approvals_channel: '#gpu-approvals'\n",
     "policy.yaml:3: approvals_channel: '#gpu-approvals' is not a Slack channel id "
     "(like C012ABCDEF)"),
    ("bad-group", "approvers:\n  users: [U0BOB]\n  group: ml-leads\n",
     "policy.yaml:3: approvers.group: 'ml-leads' is not a Slack user group id (like S012ABCDEF)"),
    ("bad-budget-user", VALID + "budgets:\n  users:\n    alice: 100\n",
     "policy.yaml:5: budgets.users: 'alice' is not a Slack user id (like U012ABCDEF)"),
    ("team-without-members", VALID + "budgets:\n  teams:\n    research:\n      monthly: 1000\n",
     "policy.yaml:5: team research has no members: list them in budgets.teams.research.members"),
    ("team-empty-members", VALID + "budgets:\n  teams:\n    research:\n      members: []\n"
                                   "      monthly: 1000\n",
     "policy.yaml:6: team research has no members: list them in budgets.teams.research.members"),
    ("team-without-budget", VALID + "budgets:\n  teams:\n    research:\n      members: [U0BOB]\n",
     "policy.yaml:5: team research has no budget: set budgets.teams.research.monthly (dollars)"),
    ("max-nodes-too-many", VALID + "limits:\n  max_nodes: 16\n",
     "policy.yaml:4: limits.max_nodes must be between 2 and 8 (the provider's self-serve range), "
     "not 16"),
    ("max-nodes-one", VALID + "limits:\n  max_nodes: 1\n",
     "policy.yaml:4: limits.max_nodes must be between 2 and 8 (the provider's self-serve range), "
     "not 1"),
    ("max-nodes-text", VALID + "limits:\n  max_nodes: eight\n",
     "policy.yaml:4: limits.max_nodes must be a whole number, not 'eight'"),
    ("max-nodes-float", VALID + "limits:\n  max_nodes: 4.5\n",
     "policy.yaml:4: limits.max_nodes must be a whole number, not the number 4.5"),
    ("lifetime-zero", VALID + "limits:\n  max_lifetime_hours: 0\n",
     "policy.yaml:4: limits.max_lifetime_hours must be at least 1, not 0"),
    ("lifetime-negative", VALID + "limits:\n  max_lifetime_hours: -3\n",
     "policy.yaml:4: limits.max_lifetime_hours must be at least 1, not -3"),
    ("enforce-without-lifetime", VALID + "limits:\n  enforce_lifetime: true\n",
     "policy.yaml:4: limits.enforce_lifetime needs limits.max_lifetime_hours"),
    ("enforce-not-bool", VALID + "limits:\n  max_lifetime_hours: 4\n  enforce_lifetime: maybe\n",
     "policy.yaml:5: limits.enforce_lifetime must be true or false, not 'maybe'"),
    ("accelerators-empty", VALID + "limits:\n  accelerators: []\n",
     "policy.yaml:4: limits.accelerators is empty: remove it to allow every accelerator"),
    ("accelerator-not-a-name", VALID + "limits:\n  accelerators: [h100, 4090]\n",
     "policy.yaml:4: limits.accelerators: the number 4090 is not an accelerator name"),
    ("overrides-unknown", VALID + "admins: [U0CAROL]\noverrides: everyone\n",
     "policy.yaml:4: overrides must be admins or none, not 'everyone'"),
    ("overrides-bool", VALID + "admins: [U0CAROL]\noverrides: false\n",
     "policy.yaml:4: overrides must be admins or none, not false"),
    ("overrides-without-admins", VALID + "overrides: admins\n",
     "policy.yaml:3: overrides is admins but no admins are listed: add admins, or set "
     "overrides: none"),
    ("overrides-empty-admins", VALID + "admins: []\noverrides: admins\n",
     "policy.yaml:3: admins is empty but overrides is admins: list at least one admin, or set "
     "overrides: none"),
    ("idle-minutes", VALID + "idle:\n  after_minutes: 2\n",
     "policy.yaml:4: idle.after_minutes must be a whole number from 5 to 1440, not the "
     "number 2"),
    ("idle-grace", VALID + "idle:\n  terminate_after_minutes: soon\n",
     "policy.yaml:4: idle.terminate_after_minutes must be a whole number from 0 to 1440, not "
     "'soon'"),
    ("idle-done-backtracking", VALID + "idle:\n  done: '(x)\\1'\n",
     "policy.yaml:4: idle.done: `(x)\\1` needs backtracking (a backreference or a lookaround), "
     "which could take super-linear time on a long line; write it without."),
    ("idle-done-invalid", VALID + "idle:\n  done: 'Training (completed'\n",
     "policy.yaml:4: idle.done: `Training (completed` is not a valid pattern: missing ): "
     "Training (completed."),
    ("idle-every-rank", VALID + "idle:\n  every_rank: sometimes\n",
     "policy.yaml:4: idle.every_rank must be true or false, not 'sometimes'"),
    ("python-tag", VALID + "budgets:\n  default_user: !!python/object:os.system 1\n",
     "policy.yaml:4: budgets.default_user must be an amount in dollars like 20 or 20.50, "
     "not a value tagged tag:yaml.org,2002:python/object:os.system"),
]


@pytest.mark.parametrize(("text", "expected"), [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_every_mistake_names_its_line_and_the_problem(text, expected):
    assert problems(text) == [expected]


def test_a_typo_is_named_with_what_it_leaves_missing():
    assert problems(VALID + "budgets:\n  teams:\n    research:\n      members: [U0BOB]\n"
                            "      montly: 1000\n") == [
        "policy.yaml:5: team research has no budget: set budgets.teams.research.monthly "
        "(dollars)",
        "policy.yaml:7: unknown key budgets.teams.research.montly (did you mean monthly?)",
    ]


def test_all_the_mistakes_are_reported_at_once_in_file_order():
    found = problems("""\
        approvers:
          users: [U0BOB, bob]
        approval:
          auto_approve_below: 20.001
        limits:
          max_nodes: 9
          max_lifetime_hours: 0
        colour: blue
        """)
    assert [line.split(":")[1] for line in found] == ["2", "4", "6", "7", "8"]


def test_escalation_settings_are_read_and_bad_values_are_named():
    policy = parse_policy("approvers: {users: [U0BOB]}\n"
                          "degraded: {escalate_to: C0ONCALL, escalate_after_minutes: 45}\n")
    assert (policy.escalate_to, policy.escalate_after_minutes) == ("C0ONCALL", 45)
    assert parse_policy("approvers: {users: [U0BOB]}\n").escalate_to is None
    assert problems("""\
        approvers: {users: [U0BOB]}
        degraded:
          escalate_to: oncall
          escalate_after_minutes: 0
        """) == [
        "policy.yaml:3: degraded.escalate_to: 'oncall' is not a Slack user group id (like "
        "S012ABCDEF) or channel id (like C012ABCDEF)",
        "policy.yaml:4: degraded.escalate_after_minutes must be between 1 and 1440 minutes, "
        "not 0"]
    assert problems("approvers: {users: [U0BOB]}\n"
                    "degraded: {escalate_after_minutes: soon}\n") == [
        "policy.yaml:2: degraded.escalate_after_minutes must be a whole number of minutes, "
        "not 'soon'",
        "policy.yaml:2: degraded.escalate_after_minutes needs degraded.escalate_to (a user "
        "group or channel to escalate to)"]
    assert problems("approvers: {users: [U0BOB]}\ndegraded: {escalate_too: S0X1}\n") == [
        "policy.yaml:2: unknown key degraded.escalate_too (did you mean escalate_to?)"]


def test_projects_are_listed_with_or_without_a_monthly_budget():
    policy = parse_policy(dedent("""\
        approvers: {users: [U0BOB]}
        projects:
          llama-ft: {monthly_budget: 500.50}
          vision: {}
        """), name="policy.yaml")
    assert policy.projects == (Project(name="llama-ft", monthly_cents=50_050),
                               Project(name="vision"))
    assert policy.project_problem("ghost") == ("Unknown project `ghost`; the spend policy "
                                               "lists `llama-ft`, `vision`.")
    assert policy.project_problem("vision") is None and policy.project_problem(None) is None


def test_a_bad_project_line_is_named():
    found = problems("""\
        approvers: {users: [U0BOB]}
        projects:
          llama: {budget: 5}
          vision: {monthly_budget: lots}
        """)
    assert any("projects.llama.budget" in p and "monthly_budget" in p for p in found), found
    assert any("projects.vision.monthly_budget" in p for p in found), found


def test_an_installation_replaces_the_sections_it_lists_and_inherits_the_rest():
    # Issue 29: a workspace (T…) or organization (E…) with a policy of its own.
    policies = parse_policies(dedent("""\
        approvals_channel: C0TOP
        approvers: {users: [U0BOB]}
        limits: {max_nodes: 4}
        installations:
          T0ONE:
            approvals_channel: C0ONE
            approvers: {group: S0LEADS}
          E0ORG:
            limits: {max_nodes: 8}
        """))
    top, one, org = policies.default, policies.places["T0ONE"], policies.places["E0ORG"]
    assert (top.approvals_channel, top.approver_ids, top.max_nodes) == (
        "C0TOP", frozenset({"U0BOB"}), 4)
    assert (one.approvals_channel, one.approver_ids, one.approver_group, one.max_nodes) == (
        "C0ONE", frozenset(), "S0LEADS", 4)  # approvers replaced whole; limits inherited
    assert (org.approvals_channel, org.approver_ids, org.max_nodes) == (
        "C0TOP", frozenset({"U0BOB"}), 8)
    # The workspace's own first, then its organization's, then the top level.
    assert policies.for_place(Place(team_id="T0ONE", enterprise_id="E0ORG")) == one
    assert policies.for_place(Place(team_id="T0TWO", enterprise_id="E0ORG")) == org
    assert policies.for_place(Place(team_id="T0TWO")) == top and policies.for_place(None) == top
    assert parse_policy("approvers: {users: [U0BOB]}\n") == parse_policies(
        "approvers: {users: [U0BOB]}\n").default


def test_a_bad_installation_is_named_once_with_its_key():
    assert problems("""\
        approvers: {users: [U0BOB, bob]}
        installations:
          T0ONE:
            approvals_channel: general
            aprovers: {users: [U0ONE]}
          acme:
            approvers: {users: [U0ONE]}
          T0TWO: {}
          T0THREE:
            installations: {}
        """) == [
        "policy.yaml:1: approvers.users: 'bob' is not a Slack user id (like U012ABCDEF)",
        "policy.yaml:4: installations.T0ONE: approvals_channel: 'general' is not a Slack "
        "channel id (like C012ABCDEF)",
        "policy.yaml:5: installations.T0ONE: unknown key aprovers (did you mean approvers?)",
        "policy.yaml:6: installations: 'acme' is not a Slack workspace id (like T012ABCDEF) "
        "or organization id (like E012ABCDEF)",
        "policy.yaml:8: installations.T0TWO must be a mapping of the policy's keys "
        "(approvals_channel, approvers, …), not an empty one",
        "policy.yaml:10: installations.T0THREE: unknown key installations (known: admins, "
        "allow_guests, approval, approvals_channel, approvers, budgets, degraded, idle, "
        "limits, overrides, projects, requesters)"]
