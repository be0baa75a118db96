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
from bot.services.volume_charges import volume_spans
from storage.budgets import team_budget, user_budget
from storage.repositories import Repos


async def committed(repos: Repos, policy: rules.Policy, *, requester: str, now: datetime,
                    excluding: str | None = None) -> spend.MonthSpend:
    """What `requester`'s budgets hold now: this month's clusters (accrued, and what the live
    ones will still accrue within their envelopes), their volumes' own hours (so far, and while
    kept) plus every request approved or launching but `excluding`.

    Only the clusters of the people the budgets cover are read (the requester and their teams'
    members), however many clusters the month has."""
    start, end = spend.month_bounds(None, now)
    teams = policy.teams_of(requester)
    owners = {requester}.union(*(t.members for t in teams))
    clusters = [*await repos.clusters.list_in_period(start, end, owners=owners),
                *await repos.clusters.list_live(owners=owners)]
    held = await repos.requests.list_by_status(spend.COMMITTED_STATES)
    volumes = await volume_spans(repos, now=now, owners=owners)
    return spend.committed_spend(clusters, held, user=requester, teams=teams, now=now,
                                 excluding=excluding, volumes=volumes)


async def hold(repos: Repos, policy: rules.Policy, spender: str) -> bool:
    """Lock `spender`'s budgets until the transaction ends; False if none applies to them."""
    teams = policy.teams_of(spender)
    if policy.budget_of(spender) is None and not teams:
        return False
    await repos.budgets.hold([user_budget(spender), *(team_budget(t.name) for t in teams)])
    return True
