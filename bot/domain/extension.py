"""Extending a cluster's envelope is spending: the one rule for who may add hours, and how much.

THE RULE (stated once, here; the README, `/cluster help`, every message and button use
`EXTEND_RULE` or `extend_hint`):

    The cluster's owner or an approver may ask to extend its envelope by any whole number of
    hours. What it adds — hours × the cluster's locked hourly rate — is judged like a launch
    (`policy.judge_spend`): against the owner's and their teams' monthly budgets, and against
    the approval tiers. It applies at once (after a confirm that states the dollars added and
    the new total) when it is under the auto-approve tier and the envelope stays within the
    policy's lifetime; otherwise it goes to the approvals channel as a card needing one
    approver, or two above the one-approver tier — never the owner; an approver who asks counts
    as the first of them.

Tiers are $/h of a cluster, so an added *amount* is compared with each tier times the policy's
lifetime (`max_lifetime_hours`): exactly what a launch at that tier is approved to spend. An
extension that adds no more than an auto-approved launch may spend is auto-approved; one that
adds more than a one-approver launch may spend needs two. With no lifetime in the policy a
launch has no envelope to compare with, so the tiers apply over the added hours themselves
(the extension is judged as the launch of those hours: by its rate).

An extension only spends from the owner's budgets what falls in this month: the hours it adds
after the envelope's current end, before the month ends (`month_cents`).
"""

from __future__ import annotations

import enum
from datetime import datetime

from bot.domain import spend
from bot.domain.commands import USAGE as COMMAND_USAGE
from bot.domain.errors import InvalidCommand
from bot.domain.models import ClusterRecord, Frozen
from bot.domain.policy import Policy, Verdict, approvals_for_spend, judge_spend, money
from bot.domain.spend import MonthSpend

MAX_EXTEND_HOURS = 24 * 365 * 10  # ten years: beyond it a number of hours is a typo
USAGE = COMMAND_USAGE["extend"]

EXTEND_RULE = (
    "The owner or an approver may extend a cluster's envelope by whole hours. The dollars added "
    "(hours × the cluster's rate) are judged like a launch: against the owner's and their "
    "teams' budgets and the approval tiers. Under the auto-approve tier and within the policy's "
    "lifetime it applies at once, after a confirm; otherwise an approval card goes to the "
    "approvals channel for one approver (two above the one-approver tier), never the owner — "
    "an approver who asks counts as one.")

# The rule in a clause, for texts that only need who decides.
EXTEND_WHO = ("its owner or an approver asks; the spend policy applies it at once under the "
              "auto-approve tier and within its lifetime, else approvers decide")


class ExtensionStatus(enum.StrEnum):
    PENDING = "pending"  # its card waits for approvers
    APPLIED = "applied"  # the envelope was extended
    REJECTED = "rejected"  # an approver said no
    REFUSED = "refused"  # the budgets no longer fit it when it was approved
    STALE = "stale"  # the envelope moved (or the cluster ended) before it was decided


class _Growth(Frozen):
    """`hours` more on an envelope of `from_hours`, at the cluster's locked rate."""

    hours: int
    from_hours: int  # the envelope it extends: applied only if it is still this
    hourly_cents: int

    @property
    def to_hours(self) -> int:
        return self.from_hours + self.hours

    @property
    def total_cents(self) -> int:
        return self.hourly_cents * self.to_hours


class Extension(_Growth):
    """An extension that needs approvers (stored; its card in the approvals channel)."""

    id: str
    cluster_id: str
    owner_id: str
    requested_by: str
    approvals_needed: int
    override_rule: str | None = None  # broke a rule: an admin must approve (an override)
    approved_by: tuple[str, ...] = ()
    status: ExtensionStatus = ExtensionStatus.PENDING
    decided_by: str | None = None
    note: str | None = None  # why it was refused or went stale, or the reject reason
    created_at: datetime
    updated_at: datetime

    @property
    def added_cents(self) -> int:
        return self.hourly_cents * self.hours


class ExtensionJudgement(_Growth):
    """What the spend policy says about adding `hours` to a cluster's envelope, for `actor`."""

    added_cents: int  # hours × rate: the whole extension, for the tiers and the confirm
    month_cents: int  # the part of it that falls in this month, for the budgets
    verdict: Verdict  # approvals_needed: the tier (≥ 1 beyond the lifetime), or the refusal
    preapproved: bool  # the asker is an approver other than the owner: counts as one approval

    @property
    def applies_now(self) -> bool:
        """No card needed: within the auto tier, or the asking approver is all it needs."""
        if self.verdict.refused is not None:
            return False
        return self.verdict.approvals_needed <= (1 if self.preapproved else 0)


def check_hours(raw: str) -> int:
    """`/cluster extend <id> <hours>`: a whole number of hours from 1 to ten years, each bad
    form refused by name (InvalidCommand)."""
    text = raw.strip()
    bad = text[:20]
    if text.lstrip("+-").replace(".", "", 1).replace(",", "", 1).isdigit():
        if text.startswith("-"):
            raise InvalidCommand(f"`{bad}` is negative: extending adds hours; to end a cluster "
                                 "sooner, terminate it.", bad_part=bad, usage=USAGE)
        if "." in text or "," in text:
            raise InvalidCommand(f"`{bad}` is not a whole number of hours: AI Reserve charges "
                                 "every started hour in full, so extend by whole hours, e.g. "
                                 "`2`.", bad_part=bad, usage=USAGE)
        digits = text.lstrip("+")
        if len(digits) > 7 or int(digits) > MAX_EXTEND_HOURS:
            raise InvalidCommand(f"`{bad}` hours is more than ten years "
                                 f"({MAX_EXTEND_HOURS:,} h): say how many hours to add, e.g. "
                                 "`12`.", bad_part=bad, usage=USAGE)
        if int(digits) == 0:
            raise InvalidCommand("`0` adds nothing: extend by at least 1 hour.",
                                 bad_part=bad, usage=USAGE)
        return int(digits)
    raise InvalidCommand(f"`{bad}` is not a number of hours: say how many whole hours to add, "
                         "e.g. `12`.", bad_part=bad, usage=USAGE)


def tier_hours(policy: Policy, hours: int) -> int:
    """The hours a tier in $/h is multiplied by to judge an added amount (see the module)."""
    return policy.max_lifetime_hours or hours


def month_cents(cluster: ClusterRecord, *, to_hours: int, now: datetime) -> int:
    """What the owner's budgets count more this month once the envelope is `to_hours`."""
    _, end = spend.month_bounds(None, now)
    before = spend.projected_in(cluster, now=now, end=end, lifetime_hours=cluster.lifetime_hours)
    after = spend.projected_in(cluster, now=now, end=end, lifetime_hours=to_hours)
    return max(0, after - before)


def judge_extension(policy: Policy, *, cluster: ClusterRecord, hours: int, asker_is_approver: bool,
                    asker: str, month_spend: MonthSpend, now: datetime) -> ExtensionJudgement:
    """The rule above, for `asker` adding `hours` to `cluster`'s envelope now.

    `month_spend` is everything the owner's budgets hold (committed spend, this cluster at its
    current envelope included)."""
    assert cluster.owner_id is not None and cluster.lifetime_hours is not None
    added = cluster.hourly_cents * hours
    needed = approvals_for_spend(policy, added_cents=added, tier_hours=tier_hours(policy, hours))
    limit = policy.max_lifetime_hours
    if limit is not None and cluster.lifetime_hours + hours > limit:
        needed = max(needed, 1)  # beyond the lifetime a launch could be approved for
    adds = month_cents(cluster, to_hours=cluster.lifetime_hours + hours, now=now)
    verdict = judge_spend(policy, spender=cluster.owner_id, adds_cents=adds,
                          approvals_needed=needed, month_spend=month_spend,
                          lifetime_hours=cluster.lifetime_hours + hours, project=cluster.project)
    return ExtensionJudgement(
        hours=hours, from_hours=cluster.lifetime_hours, hourly_cents=cluster.hourly_cents,
        added_cents=added, month_cents=adds, verdict=verdict,
        preapproved=asker_is_approver and asker != cluster.owner_id)


def may_ask(cluster: ClusterRecord, asker: str, *, asker_is_approver: bool) -> str | None:
    """None if `asker` may ask to extend `cluster`, else why not (naming who may)."""
    if asker == cluster.owner_id or asker_is_approver:
        return None
    owner = f"<@{cluster.owner_id}>" if cluster.owner_id else "nobody yet (unclaimed)"
    return (f"Only the owner ({owner}) or an approver can extend `{cluster.id}`. "
            + extend_hint(cluster, hours=None))


def may_approve(policy: Policy, approver: str, *, owner: str, is_approver: bool,
                admin_needed: bool, approved_by: frozenset[str]) -> str | None:
    """None if `approver` may approve an extension card of `owner`'s cluster, else why not."""
    if approver == owner:
        return ("You can't approve extending your own cluster; another approver has to "
                "decide.")
    if approver in approved_by:
        return "You already approved this extension; it needs another approver."
    if admin_needed:
        if approver in policy.admin_ids:
            return None
        return ("This extension breaks the spend policy, so only a policy admin can approve it "
                "(as an explicit override).")
    if not is_approver:
        return "Only the configured approvers can approve an extension."
    return None


def what_happens(j: ExtensionJudgement) -> str:
    """One line for a confirm or an answer: what is added, the new total, and who decides."""
    head = (f"+{j.hours} h ≈ {money(j.added_cents)} at {money(j.hourly_cents)}/h; the envelope "
            f"becomes {j.to_hours} h ≈ {money(j.total_cents)}.")
    if j.verdict.is_refusal:
        return f"{head} The spend policy refuses it: {j.verdict.refused}"
    if j.applies_now:
        return f"{head} It applies at once."
    who = "a policy admin (an override)" if j.verdict.override else (
        "two approvers" if j.verdict.approvals_needed >= 2 else "an approver")
    first = " (yours counts as the first)" if j.preapproved and not j.verdict.override else ""
    return f"{head} It needs {who}{first}: a card goes to the approvals channel."


def extend_hint(cluster: ClusterRecord, *, hours: int | None) -> str:
    """The rule in a line for a cluster's messages: who may extend and how."""
    example = f"`/cluster extend {cluster.id} {hours or 4}`"
    return (f"To extend: its owner or an approver, {example} or *Extend*; under the "
            "auto-approve tier and within the policy's lifetime it applies at once, beyond "
            "that an approver (two above the one-approver tier) decides, never the owner.")
