"""The spend policy: who approves what, the budgets and the limits, and the pure evaluator.

`evaluate` turns one launch request into a `Verdict`: how many distinct approvers its hourly rate
needs (0, 1 or 2), or the rule it breaks — with the numbers, in plain words — and whether that
goes to an admin for an explicit override or is refused outright. `may_approve` says whether a
given person may approve it. Both are pure: the caller supplies the month's spend, the resolved
user-group members and `now`. The file format lives in bot/config/policy_file.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pydantic import Field

from bot.domain.models import Frozen, IdleRule
from bot.domain.spend import MonthSpend, Team, accruals_before, month_bounds


class Project(Frozen):
    """A line of work spend is charged to beside the person and the team (`project=`); its
    monthly budget, if any, is judged like a team's."""

    name: str
    monthly_cents: int | None = None


class Policy(Frozen):
    """The rules, in integer cents. Every limit is optional: None means "no such limit"."""

    approvals_channel: str | None = None
    approver_ids: frozenset[str] = frozenset()
    approver_group: str | None = None  # a Slack user group id; the bot resolves its members
    admin_ids: frozenset[str] = frozenset()
    auto_approve_below_cents: int | None = None  # $/h of the whole cluster
    one_approver_up_to_cents: int | None = None  # above it: two distinct approvers
    default_user_budget_cents: int | None = None  # monthly
    user_budget_cents: Mapping[str, int] = Field(default_factory=dict)
    teams: tuple[Team, ...] = ()
    allowed_accelerators: frozenset[str] | None = None  # lower-case short names or catalog ids
    max_nodes: int | None = None
    max_lifetime_hours: int | None = None  # the approved spend envelope of each cluster
    enforce_lifetime: bool = False  # an unanswered envelope ends in termination
    max_stock_wait_hours: int = 72  # the longest a request may wait for stock (stock.py)
    overrides_by_admins: bool = False  # a broken rule goes to the admins instead of a refusal
    # Who may spend (bot/domain/spenders.py): both empty means everyone in the installed team.
    requester_ids: frozenset[str] = frozenset()
    requester_groups: frozenset[str] = frozenset()  # Slack user group ids, resolved by the bot
    allow_guests: bool = False  # Slack guests (restricted / ultra-restricted accounts)
    # A degraded episode nobody acts on (bot/domain/duty.py): escalated to this user group
    # (S…, mentioned in the cluster's channel) or channel (C…/G…) after so many minutes.
    escalate_to: str | None = None
    escalate_after_minutes: int = 30
    # Projects (`projects:`): when any is listed, a quote must name a listed one, if any.
    projects: tuple[Project, ...] = ()
    # Idle rules (bot/domain/idle.py): the launch form's defaults, and the grace after which
    # an idle cluster nobody kept is terminated (None: never, the owner decides).
    idle_after_minutes: int | None = None
    idle_every_rank: bool = False
    idle_done: str | None = None
    idle_terminate_after_minutes: int | None = None
    idle_keep_hours: int = 2  # what Keep for N h keeps (bot/domain/idle.py DEFAULT_KEEP_HOURS)

    def idle_default(self) -> IdleRule | None:
        """The launch form's idle rule before anyone edits it."""
        if self.idle_after_minutes is None and self.idle_done is None:
            return None
        return IdleRule(quiet_minutes=self.idle_after_minutes, all_ranks=self.idle_every_rank,
                        done=self.idle_done)

    @classmethod
    def simple(cls, *, approvers: Iterable[str], approvals_channel: str | None) -> Policy:
        """Today's behaviour without a policy file: one approver for everything, no limits."""
        return cls(approvals_channel=approvals_channel, approver_ids=frozenset(approvers))

    def budget_of(self, user: str) -> int | None:
        """The monthly budget of one person: their own line, else the default, else none."""
        return self.user_budget_cents.get(user, self.default_user_budget_cents)

    def teams_of(self, user: str) -> tuple[Team, ...]:
        return tuple(team for team in self.teams if user in team.members)

    def project_named(self, name: str | None) -> Project | None:
        return next((p for p in self.projects if p.name == name), None)

    def project_problem(self, name: str | None) -> str | None:
        """Why `project=<name>` is refused (the policy lists projects and not this one)."""
        if name is None or not self.projects or self.project_named(name) is not None:
            return None
        known = ", ".join(f"`{p.name}`" for p in self.projects)
        return f"Unknown project `{name[:40]}`; the spend policy lists {known}."


class Verdict(Frozen):
    """What the policy says about one launch request."""

    approvals_needed: int  # 0 = auto-approve, 1, or 2 distinct approvers (never the requester)
    refused: str | None = None  # the rule(s) broken, with the numbers, in plain words
    override: bool = False  # True: route to the admins for an explicit override, do not refuse
    lifetime_hours: int | None = None  # the envelope to approve

    @property
    def is_refusal(self) -> bool:
        """Broken rule and nobody may override it: tell the requester `refused` and stop."""
        return self.refused is not None and not self.override

    @property
    def auto_approved(self) -> bool:
        return self.refused is None and self.approvals_needed == 0


def money(cents: int) -> str:
    """`4120000` → `"$41,200.00"` (refusal texts; Slack rendering has its own helper)."""
    sign = "-" if cents < 0 else ""
    dollars, rest = divmod(abs(cents), 100)
    return f"{sign}${dollars:,}.{rest:02d}"


def accelerator_allowed(allowed: frozenset[str] | None, accelerator_id: str) -> bool:
    """A short name allows every catalog id it prefixes: "h100" → "h100-sxm-80gb"."""
    if allowed is None:
        return True
    wanted = accelerator_id.lower()
    return any(wanted == name or wanted.startswith(name + "-") for name in allowed)


def _either(names: Iterable[str]) -> str:
    ordered = sorted(names)
    return ordered[0] if len(ordered) == 1 else ", ".join(ordered[:-1]) + " or " + ordered[-1]


def approvals_for_rate(policy: Policy, hourly_cents: int) -> int:
    """0 below the auto-approve threshold, 2 above the one-approver ceiling, else 1."""
    return approvals_for_spend(policy, added_cents=hourly_cents, tier_hours=1)


def approvals_for_spend(policy: Policy, *, added_cents: int, tier_hours: int) -> int:
    """The approval tiers applied to an amount: the tiers are $/h of a cluster, so over
    `tier_hours` hours a tier lets `tier × tier_hours` through. A launch is judged on its rate
    (one hour of it); an extension on the dollars it adds, against the tiers over the policy's
    lifetime (bot/domain/extension.py: what a launch at those tiers is approved to spend)."""
    auto, one = policy.auto_approve_below_cents, policy.one_approver_up_to_cents
    if auto is not None and added_cents < auto * tier_hours:
        return 0
    if one is not None and added_cents > one * tier_hours:
        return 2
    return 1


def request_month_cents(policy: Policy, *, hourly_cents: int, now: datetime) -> int:
    """What a cluster launched now adds to this month: an accrual every hour from now until the
    month ends, at most the approved lifetime's worth."""
    _, end = month_bounds(None, now)
    hours = accruals_before(now, end)
    if policy.max_lifetime_hours is not None:
        hours = min(hours, policy.max_lifetime_hours)
    return hourly_cents * hours


def _shape_rules(policy: Policy, *, accelerator_id: str, nodes: int) -> list[str]:
    broken = []
    if not accelerator_allowed(policy.allowed_accelerators, accelerator_id):
        assert policy.allowed_accelerators is not None
        broken.append(f"{_either(policy.allowed_accelerators)} only: {accelerator_id} is not "
                      "allowed by the spend policy.")
    if policy.max_nodes is not None and nodes > policy.max_nodes:
        broken.append(f"The spend policy allows at most {policy.max_nodes} nodes per cluster; "
                      f"this asks for {nodes}.")
    return broken


def shape_allowed(policy: Policy, *, accelerator_id: str, nodes: int) -> bool:
    """Whether the policy lets anyone request this accelerator at this node count (the
    alternatives a quote offers keep to it: bot/services/alternatives.py)."""
    return not _shape_rules(policy, accelerator_id=accelerator_id, nodes=nodes)


def _budget_rules(policy: Policy, *, requester: str, adds: int,
                  month_spend: MonthSpend, project: str | None = None) -> list[str]:
    broken = []
    budget = policy.budget_of(requester)
    if budget is not None and month_spend.user_cents + adds > budget:
        broken.append(f"This would bring your month to {money(month_spend.user_cents + adds)} "
                      f"of your {money(budget)} budget"
                      f"{_breakdown(month_spend, month_spend.user_cents, adds, {requester})}.")
    for team in policy.teams_of(requester):
        spent = month_spend.team_cents.get(team.name, 0)
        if spent + adds > team.monthly_cents:
            broken.append(f"Team {team.name}: {money(spent + adds)} of "
                          f"{money(team.monthly_cents)}"
                          f"{_breakdown(month_spend, spent, adds, team.members)}.")
    budgeted = policy.project_named(project)
    if budgeted is not None and budgeted.monthly_cents is not None:
        spent = month_spend.project_cents.get(budgeted.name, 0)
        if spent + adds > budgeted.monthly_cents:
            broken.append(f"Project {budgeted.name}: {money(spent + adds)} of "
                          f"{money(budgeted.monthly_cents)} ({money(spent)} spent, held or "
                          f"still to run; {money(adds)} for this one).")
    return broken


def _breakdown(month_spend: MonthSpend, total: int, adds: int, people: Iterable[str]) -> str:
    """` (… on clusters, … held by approved requests lr_a $x, lr_b $y, … for this one)`: the
    numbers behind a budget refusal and the other requests that used the room."""
    who = set(people)
    held = [c for c in month_spend.requests if c.requester_id in who]
    held_cents = sum(c.cents for c in held)
    parts = [f"{money(total - held_cents)} spent or still to run on clusters"]
    if held:
        listed = ", ".join(f"`{c.request_id}` {money(c.cents)}" for c in held[:5])
        more = f" and {len(held) - 5} more" if len(held) > 5 else ""
        parts.append(f"{money(held_cents)} held by {len(held)} approved request"
                     f"{'s' if len(held) != 1 else ''} not launched yet: {listed}{more}")
    parts.append(f"{money(adds)} for this one")
    return f" ({'; '.join(parts)})"


def judge_spend(policy: Policy, *, spender: str, adds_cents: int, approvals_needed: int,
                month_spend: MonthSpend, broken: Sequence[str] = (),
                lifetime_hours: int | None = None, project: str | None = None) -> Verdict:
    """The one decision for every dollar about to be committed — a launch, a re-priced or
    retried launch, an extension of an envelope: `adds_cents` (what it adds to this month) on
    top of `month_spend` (everything `spender`'s budgets already hold) against the spender's and
    each of their teams' budgets, after the rules the caller already found `broken`; the tier
    (`approvals_needed`, from `approvals_for_spend`) decides 0, 1 or 2 approvers. A `project`
    with a monthly budget is judged like a team (`month_spend.project_cents` holds its spend).

    Every broken rule is named (in that order) so the requester can fix them all at once. With
    overrides by admins a broken rule becomes an override: at least one approval, by an admin.
    A refusal also keeps approvals_needed ≥ 1, so no caller can mistake it for an auto-approval.
    """
    rules = [*broken, *_budget_rules(policy, requester=spender, adds=adds_cents,
                                     month_spend=month_spend, project=project)]
    if not rules:
        return Verdict(approvals_needed=approvals_needed, lifetime_hours=lifetime_hours)
    return Verdict(approvals_needed=max(1, approvals_needed), refused=" ".join(rules),
                   override=policy.overrides_by_admins, lifetime_hours=lifetime_hours)


def budget_refusal(policy: Policy, *, requester: str, hourly_cents: int,
                   lifetime_hours: int | None, month_spend: MonthSpend,
                   now: datetime, project: str | None = None) -> str | None:
    """The budget rules alone, for a request about to be approved (its accelerator and nodes
    were judged when it was made): None if it still fits every budget, else why not.

    `month_spend` must count every other approved or launching request (spend.committed_spend).
    """
    limited = policy.model_copy(update={"max_lifetime_hours": lifetime_hours})
    adds = request_month_cents(limited, hourly_cents=hourly_cents, now=now)
    return judge_spend(policy, spender=requester, adds_cents=adds, approvals_needed=1,
                       month_spend=month_spend, project=project).refused


def evaluate(policy: Policy, *, requester: str, accelerator_id: str, nodes: int,
             hourly_cents: int, month_spend: MonthSpend, now: datetime,
             project: str | None = None) -> Verdict:
    """A launch request: the accelerator and the node count, then `judge_spend` with this
    cluster until the month's end (capped at the lifetime) and the tier of its hourly rate."""
    return judge_spend(
        policy, spender=requester,
        adds_cents=request_month_cents(policy, hourly_cents=hourly_cents, now=now),
        approvals_needed=approvals_for_rate(policy, hourly_cents), month_spend=month_spend,
        broken=_shape_rules(policy, accelerator_id=accelerator_id, nodes=nodes),
        lifetime_hours=policy.max_lifetime_hours, project=project)


def is_approver(policy: Policy, user: str, group_members: frozenset[str]) -> bool:
    """Listed by id, or a member of the approvers' user group (resolved by the caller)."""
    return user in policy.approver_ids or (policy.approver_group is not None
                                           and user in group_members)


def may_approve(policy: Policy, approver: str, *, requester: str, group_members: frozenset[str],
                override: bool) -> str | None:
    """None if `approver` may approve this request, else why not, in plain words.

    `override`: this approval must be an admin's — the request broke a rule (its verdict had
    `override=True`) and no admin has approved it yet; `admin_still_needed` says when. An admin
    need not be an approver to approve an override: overriding is what admins are for.
    """
    if approver == requester:
        return "You can't approve your own launch request; another approver has to decide."
    if override:
        if approver in policy.admin_ids:
            return None
        return ("This request breaks the spend policy, so only a policy admin can approve it "
                "(as an explicit override).")
    if not is_approver(policy, approver, group_members):
        return "Only the configured approvers can approve launch requests."
    return None


def admin_still_needed(policy: Policy, *, override_rule: str | None,
                       approved_by: Iterable[str]) -> bool:
    """For `may_approve(override=...)`: an override request needs one admin among its approvers;
    until one has approved, only admins may approve."""
    return override_rule is not None and not any(a in policy.admin_ids for a in approved_by)
