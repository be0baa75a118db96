"""What a person's budgets hold, read under their locks: the one place every spend decision
(an approval, an auto-approval, an extension) counts committed money from.

A decision that commits money locks every budget it counts against — the spender's and each of
their teams' (storage/budgets.py) — before reading what they hold, so decisions at the same
instant take turns and together never commit more than a budget.
"""

from __future__ import annotations

from datetime import datetime

from bot.domain import policy as rules
from bot.domain import spend
from bot.services.volume_charges import project_volume_spans, volume_spans
from storage.budgets import project_budget, team_budget, user_budget
from storage.repositories import Repos


async def committed(repos: Repos, policy: rules.Policy, *, requester: str, now: datetime,
                    excluding: str | None = None,
                    project: str | None = None) -> spend.MonthSpend:
    """What `requester`'s budgets hold now: this month's clusters (accrued, and what the live
    ones will still accrue within their envelopes), their volumes' own hours (so far, and while
    kept) plus every request approved or launching but `excluding`.

    Only the clusters of the people the budgets cover are read (the requester and their teams'
    members), however many clusters the month has. With a `project` that has a budget in the
    policy, also everything that project holds (`MonthSpend.project_cents`), whoever spends it.

    The requests are read before the clusters. On PostgreSQL (READ COMMITTED) each statement
    sees what was committed when it began, and a launch links its cluster and marks its request
    launched in one transaction: read in this order, a launch committing between the reads is
    seen as its request *and* its cluster (`committed_spend` counts it once), never as neither
    (clusters first missed it in both, and twenty approvals at once let a fourth launch through
    a budget that fits three)."""
    start, end = spend.month_bounds(None, now)
    teams = policy.teams_of(requester)
    owners = {requester}.union(*(t.members for t in teams))
    held = await repos.requests.list_by_status(spend.COMMITTED_STATES)
    clusters = [*await repos.clusters.list_in_period(start, end, owners=owners),
                *await repos.clusters.list_live(owners=owners)]
    volumes = await volume_spans(repos, now=now, owners=owners)
    budgeted = _budgeted(policy, project)
    in_project = [] if budgeted is None else [
        *await repos.clusters.list_in_period(start, end, project=budgeted),
        *await repos.clusters.list_live(project=budgeted)]
    return spend.committed_spend(clusters, held, user=requester, teams=teams, now=now,
                                 excluding=excluding, volumes=volumes, project=budgeted,
                                 project_clusters=in_project,
                                 project_volumes=await project_volume_spans(
                                     repos, now=now, project=budgeted))


def _budgeted(policy: rules.Policy, project: str | None) -> str | None:
    """`project` if the policy gives it a monthly budget (else nothing to count or lock)."""
    found = policy.project_named(project)
    return found.name if found is not None and found.monthly_cents is not None else None


async def hold(repos: Repos, policy: rules.Policy, spender: str,
               project: str | None = None) -> bool:
    """Lock `spender`'s budgets (and `project`'s, if it has one) until the transaction ends;
    False if none applies."""
    teams = policy.teams_of(spender)
    budgeted = _budgeted(policy, project)
    if policy.budget_of(spender) is None and not teams and budgeted is None:
        return False
    await repos.budgets.hold([user_budget(spender), *(team_budget(t.name) for t in teams),
                              *([project_budget(budgeted)] if budgeted is not None else [])])
    return True
