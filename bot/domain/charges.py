"""What AI Reserve charged, in one place: which hour marks of a cluster were charged, and what a
shared volume was charged on its own, hour by hour.

A cluster (contract §5.3) passes a mark at `ready_at + k·1 h` (k = 0, 1, …) while it runs; the
mark is charged only if a node runs at that instant. `accrued_hours` counts the charged marks
and the watcher keeps the uncharged ones (`Observation.skipped_marks`); every message, report,
budget and chart asks `charge_instants` / `uncharged_marks` / `hour_in_progress` rather than
assuming the k-th mark is the k-th charge.

A volume (§5.4) is paid by the cluster holding it at each mark that cluster is charged (for that
hour), and bills on its own, one hour at a time at its size then, at every other time until it
is deleted. `volume_span` replays that from what the bot recorded — when the volume was made
and with which cluster, every cluster that mounted it and its charged and uncharged marks, each
price the volume had — exactly as AI Reserve's simulator books it (aireserve_sim/
billing.py): the own hours run in a chain from where the last paid hour ended; a cluster's
charge stops the chain, an uncharged mark or the cluster's end restarts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from bot.domain.models import ClusterRecord, ClusterState, Frozen, PriceStep

HOUR = timedelta(hours=1)
_HOLDING = (ClusterState.PROVISIONING, ClusterState.RUNNING, ClusterState.DEGRADED)


def accruals_before(anchor: datetime, when: datetime) -> int:
    """How many hourly accruals anchored at `anchor` (at anchor + k h) happen before `when`."""
    if when <= anchor:
        return 0
    whole, rest = divmod(when - anchor, HOUR)
    return int(whole) + (1 if rest else 0)


# --- clusters -------------------------------------------------------------------------------


def uncharged_marks(c: ClusterRecord) -> tuple[datetime, ...]:
    """The hour marks the provider passed without charging (no node running), as watched."""
    return c.observed.skipped_marks if c.observed is not None else ()


def charge_instants(c: ClusterRecord, skipped: Sequence[datetime] | None = None
                    ) -> list[datetime]:
    """When each of the cluster's `accrued_hours` charges was made: the marks from ready_at on,
    less the uncharged ones (`skipped`, by default the watched ones)."""
    if c.ready_at is None:
        return []
    gone = set(uncharged_marks(c) if skipped is None else skipped)
    out: list[datetime] = []
    k = 0
    while len(out) < c.accrued_hours:
        at = c.ready_at + HOUR * k
        if at not in gone:
            out.append(at)
        k += 1
    return out


def charges_between(c: ClusterRecord, start: datetime | None, end: datetime | None) -> int:
    """How many charges the cluster was made with an instant in [start, end)."""
    return sum(1 for at in charge_instants(c)
               if (start is None or at >= start) and (end is None or at < end))


def charges_by(c: ClusterRecord, when: datetime) -> int:
    """How many charges the cluster had been made by `when` (a mark at `when` counts): every
    mark from ready on less the uncharged ones — a mark the watcher has not seen yet is taken
    as charged (the safe error)."""
    if c.ready_at is None or when < c.ready_at:
        return 0
    marks = int((when - c.ready_at) // HOUR) + 1
    return marks - sum(1 for at in uncharged_marks(c) if at <= when)


def hour_in_progress(c: ClusterRecord, now: datetime) -> tuple[datetime, bool] | None:
    """The mark the hour in progress began at, and whether AI Reserve charged it (False: every
    node was down then). None before the first mark, or once the cluster stopped billing."""
    if c.ready_at is None or c.status not in (ClusterState.RUNNING, ClusterState.DEGRADED) \
            or now < c.ready_at:
        return None
    mark = c.ready_at + HOUR * (accruals_before(c.ready_at, now + timedelta(microseconds=1)) - 1)
    return mark, mark not in uncharged_marks(c)


# --- volumes --------------------------------------------------------------------------------


class Mount(Frozen):
    """One cluster holding a volume: from its launch, paying for it at each charged mark, until
    it ended (None: it still holds it)."""

    cluster_id: str
    attached_at: datetime
    charged: tuple[datetime, ...] = ()
    uncharged: tuple[datetime, ...] = ()
    ended_at: datetime | None = None


def mount_of(c: ClusterRecord) -> Mount:
    """The mount a cluster record describes (its volume is `c.volume_id`)."""
    # The provider's terminatedAt comes a moment after terminate was accepted (when billing
    # stopped); it only matters when no paid hour runs past it, and is the closest it says.
    ended = None if c.status in _HOLDING else (c.terminated_at or c.updated_at)
    return Mount(cluster_id=c.id, attached_at=c.created_at, charged=tuple(charge_instants(c)),
                 uncharged=uncharged_marks(c), ended_at=ended)


class VolumeSpan(Frozen):
    """What a shared volume was charged on its own: each charge so far (`charged`: instant,
    cents), and, if it keeps billing alone, the instant of its next charge (`own_from`) at
    `hourly_cents` each hour until `until` (its deletion)."""

    id: str
    owner_id: str | None
    hourly_cents: int
    charged: tuple[tuple[datetime, int], ...] = ()
    own_from: datetime | None = None
    until: datetime | None = None
    project: str | None = None  # the project of the cluster that created it: its hours' too


def volume_span(*, id: str, owner_id: str | None, created_at: datetime, with_cluster: bool,
                prices: Sequence[PriceStep], hourly_cents: int, mounts: Sequence[Mount],
                until: datetime | None, now: datetime, project: str | None = None) -> VolumeSpan:
    """Replay the volume's own hours up to `now` (a charge at `now` itself has been made).

    `with_cluster`: it was made by its first mount's launch, and is free while that cluster
    provisions; otherwise it bills alone from `created_at`. `prices` are the hourly prices it
    had, oldest first (a price set at an instant applies to the charges after it).
    """
    charged: list[tuple[datetime, int]] = []
    chain: datetime | None = None if with_cluster else created_at
    paid_until: datetime | None = None

    def price(at: datetime) -> int:
        cents = prices[0].hourly_cents if prices else hourly_cents
        for step in prices[1:]:
            if step.at < at:
                cents = step.hourly_cents
        return cents

    def run(to: datetime, *, inclusive: bool) -> None:
        """Book the chain's own hours before `to` (or at it)."""
        nonlocal chain, paid_until
        while chain is not None and (chain < to or (inclusive and chain == to)):
            if until is not None and chain >= until:
                chain = None
                return
            charged.append((chain, price(chain)))
            paid_until = chain + HOUR
            chain = paid_until

    def release(at: datetime) -> None:
        nonlocal chain
        chain = max(paid_until or at, at)

    # (instant, order at that instant, what): a cluster's charge or uncharged mark comes before
    # the volume's own hour at the same instant; a cluster's end after it.
    happenings: list[tuple[datetime, int, str]] = []
    for m in mounts:
        happenings += [(at, 0, "cover") for at in m.charged]
        happenings += [(at, 0, "release") for at in m.uncharged]
        if m.ended_at is not None:
            happenings.append((m.ended_at, 1, "release"))
    for at, order, what in sorted(happenings):
        if at > now:
            break
        run(at, inclusive=order == 1)
        if what == "cover":
            chain = None
            paid_until = max(paid_until or at + HOUR, at + HOUR)
        else:
            release(at)
    run(now, inclusive=True)
    if until is not None and chain is not None and chain >= until:
        chain = None
    return VolumeSpan(id=id, owner_id=owner_id, hourly_cents=hourly_cents,
                      charged=tuple(charged), own_from=chain, until=until, project=project)


def volume_charges(v: VolumeSpan, start: datetime, end: datetime) -> int:
    """Cents the volume is charged on its own with an instant in [start, end): the charges
    booked so far, then (from `own_from`) an hour at its price until it is deleted."""
    stop = min(end, v.until) if v.until is not None else end
    if stop <= start:
        return 0
    cents = sum(c for at, c in v.charged if start <= at < stop)
    if v.own_from is not None:
        hours = accruals_before(v.own_from, stop) - accruals_before(v.own_from, start)
        cents += max(0, hours) * v.hourly_cents
    return cents
