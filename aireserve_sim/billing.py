"""Billing (contract §5): cluster accruals, volume hours, the balance, unpaid hours and grace.

Hour mode: at readyAt + k·3600 (k = 0, 1, …) one hour of `lockedRate.hourlyCents` is charged if
the cluster is running/degraded with at least one node running at that instant; the first hour
is charged the moment the cluster becomes running. A terminate accepted at the very instant an
hour k ≥ 1 was charged takes that hour back, so the count is exactly ⌈(terminate − readyAt)/3600⌉
for every terminate after readyAt (the first hour comes with the running transition, §4.1).

Second mode: a meter counts billable seconds (running/degraded and ≥ 1 node running).
`accruedCents` = round_half_up(⌊billable seconds⌋ × hourlyCents / 3600), computed on the
cumulative total so rounding never compounds. It is booked to the balance in arrears at every
readyAt + k·3600 (k ≥ 1) and when terminating begins; between bookings the cluster shows the
live figure. (Ready 10:00, terminated 12:10 at 6253 ¢/h → 13 548 ¢, as §5.3 says.)

Volumes bill on their own per started hour (size × 7 / 730, half-up) whenever no accruing
cluster pays for them. `paid_until` marks the end of the last hour already paid — by the volume
itself or by a cluster accrual — so a volume is never charged on its own for an hour a cluster
paid. A volume created with a cluster is free while that cluster provisions (nothing is charged
while provisioning, §5.1): the cluster covers it from readyAt, or, if the launch fails or is
terminated first, it starts billing on its own from that moment.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from aireserve_sim.catalog import round_half_up, volume_hourly_cents
from aireserve_sim.state import (
    ChargeRecord,
    ClusterRecord,
    Debt,
    LedgerEntry,
    VolumeRecord,
    World,
)
from aireserve_sim.timeline import PRIORITY_CLUSTER_ACCRUAL, PRIORITY_VOLUME_HOUR
from bot.reserve.schemas import (
    Billing,
    ClusterStatus,
    PaymentStatus,
    VolumeStatus,
    format_timestamp,
)

HOUR = timedelta(hours=1)
_ACCRUING = (ClusterStatus.RUNNING, ClusterStatus.DEGRADED)


class BillingBook:
    """Charges clusters and volumes against the one account balance."""

    def __init__(self, world: World, *, on_grace_expired: Callable[[ClusterRecord], None]) -> None:
        self._w = world
        self._on_grace_expired = on_grace_expired

    @property
    def per_second(self) -> bool:
        return self._w.config.billing_increment == "second"

    # --- clusters ----------------------------------------------------------------------

    def start_cluster(self, cluster: ClusterRecord) -> None:
        """At readyAt: billing starts (§5.1)."""
        cluster.billing.accruing = True
        cluster.billing.next_anchor = 1 if self.per_second else 0
        self._schedule_anchor(cluster, cluster.billing.next_anchor)
        self.refresh(cluster)

    def stop_cluster(self, cluster: ClusterRecord) -> None:
        """Terminating began or the launch failed: nothing accrues from this instant on."""
        bill = cluster.billing
        if bill.accruing:
            bill.accruing = False
            if self.per_second:
                self.refresh(cluster)
                self._book_seconds(cluster, note="final partial hour")
            elif self._charged_just_now(cluster):
                assert bill.last_charge is not None
                self._undo_accrual(cluster, bill.last_charge)
        self._release_volume(cluster)

    def refresh(self, cluster: ClusterRecord) -> None:
        """After any node/status change: start or stop the second-mode meter."""
        if not self.per_second:
            return
        bill = cluster.billing
        billable = bill.accruing and cluster.status in _ACCRUING and cluster.any_node_running
        if bill.meter_since is not None and not billable:
            bill.banked_seconds += (self._w.now - bill.meter_since).total_seconds()
            bill.meter_since = None
            self._release_volume(cluster)
        elif bill.meter_since is None and billable:
            bill.meter_since = self._w.now
            self._cover_volume(cluster, until=None)

    def billed_seconds(self, cluster: ClusterRecord) -> float:
        bill = cluster.billing
        running = (self._w.now - bill.meter_since).total_seconds() if bill.meter_since else 0.0
        return bill.banked_seconds + running

    def live_cents(self, cluster: ClusterRecord) -> int:
        seconds = int(self.billed_seconds(cluster))
        return round_half_up(seconds * cluster.locked_rate.hourly_cents, 3600)

    def _schedule_anchor(self, cluster: ClusterRecord, k: int) -> None:
        assert cluster.ready_at is not None
        self._w.timeline.at(cluster.ready_at + k * HOUR, lambda: self._anchor(cluster, k),
                            priority=PRIORITY_CLUSTER_ACCRUAL)

    def _anchor(self, cluster: ClusterRecord, k: int) -> None:
        bill = cluster.billing
        if not bill.accruing or bill.next_anchor != k or cluster.status not in _ACCRUING:
            return
        bill.next_anchor = k + 1
        self._schedule_anchor(cluster, k + 1)
        if self.per_second:
            self._book_seconds(cluster, note=f"hour {k}", event_hour=k)
            return
        if not cluster.any_node_running:
            # "accrues hourly while any node runs": no node, no charge, and no cover either.
            self._release_volume(cluster)
            return
        cents = cluster.locked_rate.hourly_cents
        bill.accrued_hours += 1
        bill.accrued_cents += cents
        volume = self._attached_volume(cluster)
        prev_paid_until = volume.paid_until if volume else None
        first_event = len(cluster.events)
        self._w.emit(cluster, "billing.hour_accrued", hour=bill.accrued_hours, cents=cents)
        entry, opened = self._charge(
            bill.debt, cents, kind="cluster_hour", resource_id=cluster.id,
            note=f"hour {bill.accrued_hours}", cluster=cluster,
        )
        bill.last_charge = ChargeRecord(
            at=self._w.now, entry=entry, opened_debt=opened, prev_paid_until=prev_paid_until,
            event_ids=frozenset(e.id for e in cluster.events[first_event:]),
        )
        self._cover_volume(cluster, until=self._w.now + HOUR)

    def _charged_just_now(self, cluster: ClusterRecord) -> bool:
        """An hour k ≥ 1 was charged at this very instant (the first hour comes with readyAt)."""
        charge = cluster.billing.last_charge
        return (charge is not None and charge.at == self._w.now
                and cluster.ready_at is not None and charge.at > cluster.ready_at)

    def _undo_accrual(self, cluster: ClusterRecord, charge: ChargeRecord) -> None:
        """An hour that would start the instant terminate is accepted is not billed: with it
        the count is exactly ⌈(terminate − readyAt)/3600⌉ for every terminate after readyAt."""
        bill = cluster.billing
        bill.accrued_hours -= 1
        bill.accrued_cents -= charge.entry.cents
        bill.last_charge = None
        self._refund(bill.debt, charge)
        cluster.events = [e for e in cluster.events if e.id not in charge.event_ids]
        volume = self._attached_volume(cluster)
        if volume is not None:
            volume.paid_until = charge.prev_paid_until

    def _book_seconds(self, cluster: ClusterRecord, *, note: str, event_hour: int = 0) -> None:
        bill = cluster.billing
        live = self.live_cents(cluster)
        delta = live - bill.booked_cents
        bill.booked_cents = live
        bill.accrued_cents = live
        if delta <= 0:
            return
        if event_hour:
            self._w.emit(cluster, "billing.hour_accrued", hour=event_hour, cents=delta)
        self._charge(bill.debt, delta, kind="cluster_seconds", resource_id=cluster.id,
                     note=note, cluster=cluster)

    def cluster_view(self, cluster: ClusterRecord) -> Billing:
        bill = cluster.billing
        if self.per_second:
            hours, cents = int(self.billed_seconds(cluster) // 3600), self.live_cents(cluster)
        else:
            hours, cents = bill.accrued_hours, bill.accrued_cents
        next_at = None
        if bill.accruing and cluster.ready_at is not None:
            next_at = cluster.ready_at + bill.next_anchor * HOUR
        return Billing(
            accrued_hours=hours,
            accrued_cents=cents,
            unpaid_cents=bill.debt.unpaid_cents,
            payment_status=_status(bill.debt),
            next_accrual_at=next_at,
            grace_ends_at=bill.debt.grace_ends_at,
        )

    # --- volumes -----------------------------------------------------------------------

    def start_volume(self, volume: VolumeRecord) -> None:
        """(Re)start the volume's own hourly billing from the end of what is already paid."""
        volume.tick_generation += 1
        generation = volume.tick_generation
        when = max(volume.paid_until or self._w.now, self._w.now)
        self._w.timeline.at(when, lambda: self._volume_hour(volume, generation),
                            priority=PRIORITY_VOLUME_HOUR)

    def stop_volume(self, volume: VolumeRecord) -> None:
        """Deleted: billing stops at once."""
        volume.tick_generation += 1
        volume.covered = False

    def _volume_hour(self, volume: VolumeRecord, generation: int) -> None:
        if generation != volume.tick_generation or volume.covered:
            return  # superseded, or a cluster pays for it now (it restarts us when it stops)
        if volume.status in (VolumeStatus.DELETING, VolumeStatus.DELETED):
            return
        if volume.paid_until is not None and self._w.now < volume.paid_until:
            self._w.timeline.at(volume.paid_until, lambda: self._volume_hour(volume, generation),
                                priority=PRIORITY_VOLUME_HOUR)
            return
        volume.paid_until = self._w.now + HOUR
        self._charge(
            volume.debt, volume_hourly_cents(volume.size_gb), kind="volume_hour",
            resource_id=volume.id, note=f"{volume.size_gb} GB", cluster=None,
        )
        self._w.timeline.at(volume.paid_until, lambda: self._volume_hour(volume, generation),
                            priority=PRIORITY_VOLUME_HOUR)

    def _cover_volume(self, cluster: ClusterRecord, *, until: datetime | None) -> None:
        volume = self._attached_volume(cluster)
        if volume is None:
            return
        volume.covered = True
        volume.tick_generation += 1  # the cluster pays now: stop the volume's own hours
        if until is not None:
            volume.paid_until = max(volume.paid_until or until, until)

    def _release_volume(self, cluster: ClusterRecord) -> None:
        """The cluster no longer pays for its volume: the volume bills on its own again."""
        volume = self._attached_volume(cluster)
        if volume is None:
            return
        volume.covered = False
        if self.per_second:
            volume.paid_until = max(volume.paid_until or self._w.now, self._w.now)
        self.start_volume(volume)

    def _attached_volume(self, cluster: ClusterRecord) -> VolumeRecord | None:
        volume = self._w.volumes.get(cluster.volume_id or "")
        if volume is None or volume.attached_cluster_id != cluster.id:
            return None
        return volume

    # --- balance, unpaid hours, grace -------------------------------------------------

    def _charge(
        self, debt: Debt, cents: int, *, kind: str, resource_id: str, note: str,
        cluster: ClusterRecord | None,
    ) -> tuple[LedgerEntry, bool]:
        """Charge the balance; if it cannot cover `cents`, the charge is recorded as unpaid."""
        w = self._w
        if w.balance_cents >= cents:
            w.balance_cents -= cents
            return w.book(kind=kind, resource_id=resource_id, cents=cents, paid=True,
                          note=note), False
        entry = w.book(kind=kind, resource_id=resource_id, cents=cents, paid=False, note=note)
        debt.unpaid_cents += cents
        opened = debt.first_unpaid_at is None
        if opened:
            debt.first_unpaid_at = w.now
            if cluster is not None:
                debt.grace_ends_at = w.after(w.config.payment_grace_seconds)
                generation = debt.generation
                w.timeline.at(debt.grace_ends_at, lambda: self._grace_end(cluster, generation))
        if cluster is not None:
            w.emit(cluster, "billing.payment_failed", cents=cents, unpaidCents=debt.unpaid_cents,
                   balanceCents=w.balance_cents, graceEndsAt=_fmt(debt.grace_ends_at))
        return entry, opened

    def _refund(self, debt: Debt, charge: ChargeRecord) -> None:
        self._w.unbook(charge.entry)
        if charge.entry.paid:
            self._w.balance_cents += charge.entry.cents
            return
        debt.unpaid_cents -= charge.entry.cents
        if charge.opened_debt:
            _clear(debt)

    def _grace_end(self, cluster: ClusterRecord, generation: int) -> None:
        debt = cluster.billing.debt
        if generation != debt.generation or debt.unpaid_cents == 0:
            return
        if cluster.status in _ACCRUING:
            self._w.emit(cluster, "billing.grace_expired", unpaidCents=debt.unpaid_cents)
            self._on_grace_expired(cluster)

    def set_balance(self, cents: int) -> None:
        """Set the balance, then pay whole debts, oldest first, while it covers them."""
        w = self._w
        delta, w.balance_cents = cents - w.balance_cents, cents
        w.book(kind="balance_set", resource_id="account", cents=delta, paid=True,
               note=f"balance set to {cents}")
        debtors: list[tuple[Debt, str, int]] = [
            (c.billing.debt, c.id, c.seq) for c in w.clusters.values()
        ] + [(v.debt, v.id, v.seq) for v in w.volumes.values()]
        owing = sorted(
            (d for d in debtors if d[0].unpaid_cents > 0),
            key=lambda d: (d[0].first_unpaid_at or w.now, d[2]),
        )
        for debt, resource_id, _ in owing:
            if w.balance_cents < debt.unpaid_cents:
                continue
            w.balance_cents -= debt.unpaid_cents
            w.book(kind="payment", resource_id=resource_id, cents=debt.unpaid_cents, paid=True,
                   note="unpaid charges settled")
            _clear(debt)

    def account_status(self) -> PaymentStatus:
        w = self._w
        owing = any(c.billing.debt.unpaid_cents for c in w.clusters.values()) or any(
            v.debt.unpaid_cents for v in w.volumes.values()
        )
        return PaymentStatus.PAST_DUE if owing else PaymentStatus.CURRENT


def _clear(debt: Debt) -> None:
    debt.unpaid_cents = 0
    debt.first_unpaid_at = None
    debt.grace_ends_at = None
    debt.generation += 1  # a pending grace expiry no longer applies


def _status(debt: Debt) -> PaymentStatus:
    return PaymentStatus.PAST_DUE if debt.unpaid_cents else PaymentStatus.CURRENT


def _fmt(when: datetime | None) -> str | None:
    return format_timestamp(when) if when else None
