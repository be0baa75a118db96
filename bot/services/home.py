"""What one person's App Home shows: their live clusters, what waits for their approval, and
their spend this month against their budget."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from bot.clock import Clock
from bot.domain import spend
from bot.domain import templates as template_rules
from bot.domain.extension import Extension
from bot.domain.models import ClusterRecord, LaunchRequest, QuoteInfo, RequestStatus
from bot.domain.policy import Policy
from bot.services.people import People
from bot.services.volume_charges import volume_spans
from storage.db import Database
from storage.repositories import Repos


@dataclass(frozen=True)
class HomeFacts:
    user_id: str
    clusters: list[ClusterRecord]
    pending: list[tuple[LaunchRequest, QuoteInfo]]
    is_approver: bool
    month_spent_cents: int
    budget_cents: int | None
    month: str
    waiting: tuple[tuple[LaunchRequest, QuoteInfo], ...] = ()  # their requests waiting for stock
    templates: tuple[template_rules.ClusterTemplate, ...] = ()  # theirs and their teams'
    policy: Policy | None = None  # how the envelopes of pending requests end
    extensions: tuple[Extension, ...] = ()  # envelope extensions waiting for this approver
    # Approvers: clusters found at AI Reserve nobody claimed (the dearest), how many, $/h.
    unclaimed: tuple[ClusterRecord, ...] = ()
    unclaimed_count: int = 0
    unclaimed_cents: int = 0


UNCLAIMED_SHOWN = 8  # the dearest of the unclaimed, each with Claim


class HomeService:
    def __init__(self, *, db: Database, people: People, clock: Clock) -> None:
        self._db = db
        self._people = people
        self._clock = clock

    async def facts(self, user_id: str) -> HomeFacts:
        now = self._clock.now()
        start, end = spend.month_bounds(None, now)
        is_approver = user_id in await self._people.approvers()
        async with self._db.transaction() as repos:
            month_clusters = await repos.clusters.list_in_period(start, end, owners={user_id})
            volumes = await volume_spans(repos, now=now, owners={user_id})
            mine = await repos.clusters.list_for_owner(user_id, live=True)
            waiting = await _with_quotes(repos, [
                r for r in await repos.requests.list_by_status([RequestStatus.WAITING])
                if r.requester_id == user_id])
            teams = [t.name for t in self._people.policy.teams_of(user_id)]
            templates = await repos.templates.in_scopes(
                template_rules.visible_scopes(user_id, teams))
            pending: list[tuple[LaunchRequest, QuoteInfo]] = []
            extensions: list[Extension] = []
            unclaimed: list[ClusterRecord] = []
            unclaimed_count = unclaimed_cents = 0
            if is_approver:  # extensions: never the owner's own, nor one they approved
                extensions = [e for e in await repos.extensions.pending()
                              if e.owner_id != user_id and user_id not in e.approved_by]
                unclaimed_count, unclaimed_cents = await repos.clusters.unclaimed_totals()
                if unclaimed_count:
                    unclaimed = await repos.clusters.unclaimed(limit=UNCLAIMED_SHOWN,
                                                               dearest=True)
                pending = await _with_quotes(repos, [
                    r for r in await repos.requests.list_pending() if r.requester_id != user_id])
        # What AI Reserve has billed so far this month, clusters and volumes alone (the budget
        # check also counts what is still to come; the home shows what is spent).
        charged_by = now + timedelta(microseconds=1)  # a charge at this instant has been made
        spent = sum(spend.accrued_in(c, start, end) for c in month_clusters) + sum(
            spend.volume_charges(v, start, min(end, charged_by)) for v in volumes)
        return HomeFacts(user_id=user_id, clusters=mine, pending=pending,
                         is_approver=is_approver, month_spent_cents=spent,
                         budget_cents=self._people.policy.budget_of(user_id),
                         month=f"{start:%Y-%m}", waiting=tuple(waiting), templates=tuple(templates),
                         unclaimed=tuple(unclaimed), unclaimed_count=unclaimed_count,
                         unclaimed_cents=unclaimed_cents,
                         policy=self._people.policy, extensions=tuple(extensions))


async def _with_quotes(repos: Repos, requests: list[LaunchRequest]
                       ) -> list[tuple[LaunchRequest, QuoteInfo]]:
    """Each of `requests` beside its quote, read in one statement (no quote: left out)."""
    quotes = await repos.quotes.get_many([r.quote_id for r in requests])
    return [(r, quotes[r.quote_id]) for r in requests if r.quote_id in quotes]
