"""Month maths for budgets and `/cluster spend`, from the provider's own billing figures.

In `hour` mode (contract §5.3) a cluster accrues one full hour at `ready_at + k·1 h` for
k = 0, 1, 2, … while it runs; `ClusterRecord.accrued_hours` counts the accruals so far and
`accrued_cents` is what the provider says they cost. So "what was spent in March" is the
accruals whose instant falls in March, priced from the provider's figure (never recomputed from
the rate), and "what will still be spent" is the accruals still to come before the month ends
(or the cluster's approved lifetime runs out), at the locked rate.

Where the record cannot be exact we overestimate: for a bot that guards spend, that is the safe
error (the contract makes the same choice for the billing increment).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from pydantic import Field

# Re-exported: callers have long asked this module for them (one source: bot/domain/charges.py).
from bot.domain.charges import HOUR as HOUR
from bot.domain.charges import VolumeSpan as VolumeSpan
from bot.domain.charges import accruals_before as accruals_before
from bot.domain.charges import charge_instants as charge_instants
from bot.domain.charges import uncharged_marks as uncharged_marks
from bot.domain.charges import volume_charges as volume_charges
from bot.domain.models import ClusterRecord, ClusterState, Frozen, LaunchRequest, RequestStatus

_INSTANT = timedelta(microseconds=1)
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
# States in which a cluster will still accrue: provisioning becomes ready (and billable) in
# minutes, so a cluster launched a moment ago already counts against the month.
_WILL_ACCRUE = (ClusterState.PROVISIONING, ClusterState.RUNNING, ClusterState.DEGRADED)


class Team(Frozen):
    """A group of people sharing one monthly budget (a person may be in several)."""

    name: str
    members: frozenset[str]
    monthly_cents: int


def month_bounds(month: str | None, now: datetime) -> tuple[datetime, datetime]:
    """`"2026-11"` (or the month of `now` when None) → [first instant, first of the next month).

    Raises ValueError for anything that is not a month like `2026-11`.
    """
    if month is None:
        year, number = now.astimezone(UTC).year, now.astimezone(UTC).month
    else:
        match = _MONTH.match(month.strip())
        if match is None or not 1 <= int(match.group(2)) <= 12:
            raise ValueError(f"{month!r} is not a month like 2026-11")
        year, number = int(match.group(1)), int(match.group(2))
    start = datetime(year, number, 1, tzinfo=UTC)
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=UTC)
    return start, end


def accrued_in(c: ClusterRecord, start: datetime, end: datetime) -> int:
    """Cents the cluster has accrued (per its last billing figures) with an instant in [start, end).

    Each accrual is priced from the provider's `accrued_cents`, spread over `accrued_hours` so the
    months of one cluster always add up to exactly what the provider charged.
    """
    if c.ready_at is None or c.accrued_cents <= 0:
        return 0
    if c.accrued_hours <= 0:
        # Cents without an hour count (a per-second provider): all of it at ready_at.
        return c.accrued_cents if start <= c.ready_at < end else 0
    if uncharged_marks(c):
        # Marks passed while every node was down were not charged: the k-th charge is the k-th
        # charged mark, not ready_at + k h.
        charged = charge_instants(c)
        first = sum(1 for at in charged if at < start)
        stop = sum(1 for at in charged if at < end)
        return _cumulative(c, stop) - _cumulative(c, first) if stop > first else 0
    first = min(accruals_before(c.ready_at, start), c.accrued_hours)
    stop = min(accruals_before(c.ready_at, end), c.accrued_hours)
    if stop <= first:
        return 0
    return _cumulative(c, stop) - _cumulative(c, first)


def _cumulative(c: ClusterRecord, hours: int) -> int:
    """Cents of the first `hours` accruals (integer shares that sum to `accrued_cents`)."""
    return c.accrued_cents * hours // c.accrued_hours


def projected_in(c: ClusterRecord, *, now: datetime, end: datetime,
                 lifetime_hours: int | None) -> int:
    """Cents a live cluster will still accrue before `end`, at its locked rate.

    Counts every accrual not yet in the record, including one that fell due after the record was
    last refreshed, up to `end` and at most `lifetime_hours` accruals in all (the approved
    envelope). A cluster still provisioning is assumed ready now. Terminating, terminated and
    failed clusters accrue nothing more.
    """
    if c.status not in _WILL_ACCRUE:
        return 0
    if c.ready_at is None:
        anchor, done = now, 0
    else:  # the marks already passed: the charged ones and the uncharged ones
        anchor, done = c.ready_at, c.accrued_hours + len(uncharged_marks(c))
    stop = accruals_before(anchor, end)
    if lifetime_hours is not None:
        stop = min(stop, lifetime_hours)
    return max(0, stop - done) * c.hourly_cents


class Commitment(Frozen):
    """A request approved or launching (no cluster yet): room it holds in its requester's and
    their teams' budgets, at its rate until the month ends or its envelope runs out."""

    request_id: str
    requester_id: str
    cents: int


class MonthSpend(Frozen):
    """What a requester (and each of their teams) has spent this month plus what their live
    clusters will still spend before it ends — and, from `committed_spend`, what the requests
    already approved or launching will spend (`requests`, counted in the totals too)."""

    user_cents: int = 0
    team_cents: Mapping[str, int] = Field(default_factory=dict)
    requests: tuple[Commitment, ...] = ()
    # The project being judged (`committed_spend(project=)`): everyone's spend on it.
    project_cents: Mapping[str, int] = Field(default_factory=dict)


def _month_cents(c: ClusterRecord, *, start: datetime, end: datetime, now: datetime) -> int:
    return accrued_in(c, start, end) + projected_in(c, now=now, end=end,
                                                    lifetime_hours=c.lifetime_hours)


def month_spend(clusters: Iterable[ClusterRecord], *, user: str, teams: Sequence[Team],
                now: datetime, volumes: Iterable[VolumeSpan] = ()) -> MonthSpend:
    """Spent + projected this month, for `user` and for each team in `teams` (by name): their
    clusters, and the hours their volumes bill on their own (so far, and until the month ends
    while kept).

    Clusters and volumes nobody owns yet (adopted, unclaimed) count against no budget.
    """
    start, end = month_bounds(None, now)
    user_cents = 0
    team_cents = {team.name: 0 for team in teams}
    owed = [(c.owner_id, _month_cents(c, start=start, end=end, now=now)) for c in clusters]
    owed += [(v.owner_id, volume_charges(v, start, end)) for v in volumes]
    for owner, cents in owed:
        if owner is None or not cents:
            continue
        if owner == user:
            user_cents += cents
        for team in teams:
            if owner in team.members:
                team_cents[team.name] += cents
    return MonthSpend(user_cents=user_cents, team_cents=team_cents)


# Approved requests hold budget room until their cluster exists (then the cluster counts: the
# launch records it and marks the request launched in one transaction, so nothing counts twice).
# A launch that failed for capacity or payment is kept to be retried (back to approved without
# another approval), so it holds its room too; so does one waiting for stock (it launches at
# the approved rate the moment stock appears, without asking again).
COMMITTED_STATES = (RequestStatus.APPROVED, RequestStatus.LAUNCHING,
                    RequestStatus.LAUNCH_FAILED, RequestStatus.WAITING)


def request_cents(request: LaunchRequest, *, now: datetime) -> int:
    """What a request launched now adds to this month: an accrual every hour from now until the
    month ends, at most its envelope's worth (`lifetime_hours`)."""
    _, end = month_bounds(None, now)
    hours = accruals_before(now, end)
    if request.lifetime_hours is not None:
        hours = min(hours, request.lifetime_hours)
    return request.hourly_cents * hours


def committed_spend(clusters: Iterable[ClusterRecord], requests: Iterable[LaunchRequest], *,
                    user: str, teams: Sequence[Team], now: datetime,
                    excluding: str | None = None,
                    volumes: Iterable[VolumeSpan] = (), project: str | None = None,
                    project_clusters: Iterable[ClusterRecord] = (),
                    project_volumes: Iterable[VolumeSpan] = ()) -> MonthSpend:
    """`month_spend` plus every request approved, launching or kept for a retry (but
    `excluding`, the one being decided) of `user` or of a member of one of `teams`: everything
    the budgets already hold.

    `clusters` may repeat a record (e.g. this month's and the live ones): each id counts once.
    A request whose cluster is among them counts as that cluster only (read apart, a launch can
    show as both: bot/services/budgets.py).
    `volumes`: the shared volumes of the same people (what they bill on their own).
    `project`: also what it holds — `project_clusters` (this month's and the live ones of
    that project, whoever owns them), the own hours of `project_volumes` (the volumes its
    clusters created) and every committed request of it.
    """
    unique = {c.id: c for c in clusters}
    in_project = {c.id: c for c in project_clusters}
    base = month_spend(unique.values(), user=user, teams=teams, now=now, volumes=volumes)
    user_cents, team_cents = base.user_cents, dict(base.team_cents)
    held: list[Commitment] = []
    start, end = month_bounds(None, now)
    project_total = sum(_month_cents(c, start=start, end=end, now=now)
                        for c in in_project.values()
                        if project is not None and c.project == project)
    project_total += sum(volume_charges(v, start, end) for v in project_volumes
                         if project is not None and v.project == project)
    launched = {c.request_id for c in (*unique.values(), *in_project.values())}
    for r in requests:
        if r.status not in COMMITTED_STATES or r.id == excluding or r.id in launched:
            continue
        if project is not None and r.project == project:
            project_total += request_cents(r, now=now)
        mine = r.requester_id == user
        in_teams = [t.name for t in teams if r.requester_id in t.members]
        if not mine and not in_teams:
            continue
        cents = request_cents(r, now=now)
        held.append(Commitment(request_id=r.id, requester_id=r.requester_id, cents=cents))
        if mine:
            user_cents += cents
        for name in in_teams:
            team_cents[name] += cents
    return MonthSpend(user_cents=user_cents, team_cents=team_cents, requests=tuple(held),
                      project_cents={project: project_total} if project is not None else {})


class SpendReport(Frozen):
    """One month's accrued spend, largest first; `projected_cents` is what the live clusters and
    kept volumes will still add from now to the end of the month (0 for a month that is over).
    `volumes_cents` is the part of `total_cents` that volumes billed on their own."""

    month: str  # "YYYY-MM"
    by_owner: list[tuple[str | None, int]]  # None: clusters nobody has claimed
    by_cluster: list[tuple[ClusterRecord, int]]
    total_cents: int
    projected_cents: int = 0
    by_volume: list[tuple[VolumeSpan, int]] = Field(default_factory=list)
    volumes_cents: int = 0
    month_end: datetime | None = None
    capped_by_envelopes: bool = False
    # By project (`/cluster spend by=project`): None is spend on no project; a volume's own
    # hours go to the project of the cluster that created it, so the lines add up to
    # `total_cents` like `by_owner`.
    by_project: list[tuple[str | None, int]] = Field(default_factory=list)


def spend_report(clusters: Iterable[ClusterRecord], month: str | None,
                 now: datetime, *, volumes: Iterable[VolumeSpan] = (),
                 enforce_lifetime: bool = False) -> SpendReport:
    """What each cluster, volume and owner was charged in `month` (None: this month), and, for
    the current month, what will still be charged from now until the month ends if nobody
    terminates anything: every live cluster at its locked rate (stopping at its approved
    envelope only when the policy enforces envelopes) and every kept volume.

    Raises ValueError for a malformed month (see `month_bounds`).
    """
    start, end = month_bounds(month, now)
    by_cluster: list[tuple[ClusterRecord, int]] = []
    owners: dict[str | None, int] = {}
    projects: dict[str | None, int] = {}
    projected = 0
    current = start <= now < end
    for c in clusters:
        cents = accrued_in(c, start, end)
        if current:
            projected += projected_in(
                c, now=now, end=end,
                lifetime_hours=c.lifetime_hours if enforce_lifetime or c.auto_terminate else None)
        if cents:
            by_cluster.append((c, cents))
            owners[c.owner_id] = owners.get(c.owner_id, 0) + cents
            projects[c.project] = projects.get(c.project, 0) + cents
    by_volume: list[tuple[VolumeSpan, int]] = []
    charged_by = now + _INSTANT  # a charge at this very instant has been made
    for v in volumes:
        cents = volume_charges(v, start, min(end, charged_by))
        if current:
            projected += volume_charges(v, charged_by, end)
        if cents:
            by_volume.append((v, cents))
            owners[v.owner_id] = owners.get(v.owner_id, 0) + cents
            projects[v.project] = projects.get(v.project, 0) + cents
    by_cluster.sort(key=lambda item: (-item[1], item[0].id))
    by_volume.sort(key=lambda item: (-item[1], item[0].id))
    # Unclaimed spend last among equals: it is the line someone has to act on, but not a person.
    by_owner = sorted(owners.items(), key=lambda item: (-item[1], item[0] is None, item[0] or ""))
    volumes_cents = sum(cents for _, cents in by_volume)
    return SpendReport(month=f"{start:%Y-%m}", by_owner=by_owner, by_cluster=by_cluster,
                       total_cents=sum(cents for _, cents in by_cluster) + volumes_cents,
                       projected_cents=projected, by_volume=by_volume,
                       volumes_cents=volumes_cents, month_end=end,
                       capped_by_envelopes=enforce_lifetime,
                       by_project=sorted(projects.items(),
                                         key=lambda item: (-item[1], item[0] is None,
                                                           item[0] or "")))
