"""Shared volumes (contract §2.5, §4.4): create, attach, grow, delete.

A volume lives in one location for ever, is mounted by at most one cluster, cannot be deleted
or grown while attached (409 volume_attached) and can never shrink (400). Its billing is in
billing.py. Volumes are `available` as soon as they are created (the contract's `creating`
state is instantaneous here).
"""

from __future__ import annotations

from aireserve_sim.billing import BillingBook
from aireserve_sim.catalog import (
    LOCATIONS,
    VOLUME_MAX_GB,
    VOLUME_MIN_GB,
    find_location,
    volume_hourly_cents,
)
from aireserve_sim.state import VolumeRecord, World
from aireserve_sim.validation import check_name, check_range
from bot.reserve.errors import (
    InvalidRequest,
    InvalidState,
    NotFound,
    PaymentRequired,
    VolumeAttached,
)
from bot.reserve.schemas import VolumeCreateRequest, VolumeStatus, VolumeUpdateRequest

_GONE = (VolumeStatus.DELETING, VolumeStatus.DELETED)


def check_location(location: str, *, field: str = "location") -> str:
    if find_location(location) is None:
        raise InvalidRequest(
            f"Unknown location {location[:40]!r}; choose one of "
            f"{', '.join(loc.id for loc in LOCATIONS)}.",
            details={"field": field, "reason": "unknown_location"},
        )
    return location


def check_volume_size(size_gb: int, *, field: str) -> int:
    return check_range(size_gb, field=field, low=VOLUME_MIN_GB, high=VOLUME_MAX_GB, what="GB")


class Volumes:
    """The volume store and its rules."""

    def __init__(self, world: World, billing: BillingBook) -> None:
        self._w = world
        self._billing = billing

    def get(self, volume_id: str) -> VolumeRecord:
        volume = self._w.volumes.get(volume_id)
        if volume is None:
            raise NotFound(f"No volume {volume_id[:40]!r}.", details={"resource": "volume"})
        return volume

    def listed(self) -> list[VolumeRecord]:
        """Newest first; deleted volumes are no longer listed (still readable by id)."""
        live = [v for v in self._w.volumes.values() if v.status is not VolumeStatus.DELETED]
        return sorted(live, key=lambda v: (v.created_at, v.seq), reverse=True)

    def for_mount(self, volume_id: str) -> VolumeRecord:
        """A volume a quote or launch wants to mount: it must exist and be free."""
        volume = self._w.volumes.get(volume_id)
        if volume is None or volume.status in _GONE:
            raise NotFound(
                f"No volume {volume_id[:40]!r} to mount"
                + (" (it is being deleted)." if volume else "."),
                details={"resource": "volume", "field": "volumeId"},
            )
        if volume.attached_cluster_id is not None:
            raise VolumeAttached(
                f"Volume {volume.id} is attached to cluster {volume.attached_cluster_id}; a "
                "volume is mounted by one cluster at a time. Terminate that cluster first.",
                details={"volumeId": volume.id, "clusterId": volume.attached_cluster_id},
            )
        return volume

    def create(self, req: VolumeCreateRequest, *, past_due: bool) -> VolumeRecord:
        if req.name is not None:
            check_name(req.name)
        check_volume_size(req.size_gb, field="sizeGb")
        check_location(req.location)
        hourly = volume_hourly_cents(req.size_gb)
        if past_due or self._w.balance_cents < hourly:
            raise PaymentRequired(
                f"The balance ({self._w.balance_cents} ¢) cannot cover the volume's first hour "
                f"({hourly} ¢)" + (" and the account is past due." if past_due else "."),
                details={"requiredCents": hourly, "balanceCents": self._w.balance_cents},
            )
        volume = self._new(name=req.name, size_gb=req.size_gb, location=req.location)
        self._billing.start_volume(volume)  # bills on its own until an accruing cluster covers it
        return volume

    def create_for_cluster(self, *, cluster_id: str, name: str | None, size_gb: int,
                           location: str) -> VolumeRecord:
        """Part of the launch: free while the cluster provisions (billing.py explains)."""
        volume = self._new(name=name, size_gb=size_gb, location=location)
        volume.created_with_cluster_id = cluster_id
        self.attach(volume, cluster_id)
        return volume

    def attach(self, volume: VolumeRecord, cluster_id: str) -> None:
        volume.attached_cluster_id = cluster_id
        volume.status = VolumeStatus.ATTACHED

    def _new(self, *, name: str | None, size_gb: int, location: str) -> VolumeRecord:
        volume = VolumeRecord(
            id=self._w.new_id("vol_"), seq=self._w.next_seq(), name=name, size_gb=size_gb,
            location=location, created_at=self._w.now,
        )
        self._w.volumes[volume.id] = volume
        return volume

    def update(self, volume_id: str, req: VolumeUpdateRequest) -> VolumeRecord:
        volume = self.get(volume_id)
        if volume.status in _GONE:
            raise InvalidState(
                f"Volume {volume.id} is {volume.status.value}; it can no longer be changed.",
                details={"status": volume.status.value},
            )
        if req.name is not None:
            check_name(req.name)
        size = req.size_gb
        if size is not None and size != volume.size_gb:
            if size < volume.size_gb:
                raise InvalidRequest(
                    f"Volumes can only grow: {volume.id} is {volume.size_gb} GB, "
                    f"{size} GB would shrink it.",
                    details={"field": "sizeGb", "reason": "shrink_not_allowed",
                             "min": volume.size_gb},
                )
            check_volume_size(size, field="sizeGb")
            if volume.attached_cluster_id is not None:
                raise VolumeAttached(
                    f"Volume {volume.id} cannot grow while attached to cluster "
                    f"{volume.attached_cluster_id}; terminate the cluster first.",
                    details={"volumeId": volume.id, "clusterId": volume.attached_cluster_id},
                )
            volume.size_gb = size  # later hours bill at the new size
        if req.name is not None:
            volume.name = req.name
        return volume

    def delete(self, volume_id: str) -> VolumeRecord:
        volume = self.get(volume_id)
        if volume.status in _GONE:
            return volume
        if volume.attached_cluster_id is not None:
            raise VolumeAttached(
                f"Volume {volume.id} cannot be deleted while attached to cluster "
                f"{volume.attached_cluster_id}; terminate the cluster first.",
                details={"volumeId": volume.id, "clusterId": volume.attached_cluster_id},
            )
        volume.status = VolumeStatus.DELETING
        self._billing.stop_volume(volume)  # billing stops at once (§3)
        self._w.timeline.at(
            self._w.after(self._w.config.volume_delete_seconds), lambda: self._gone(volume)
        )
        return volume

    def _gone(self, volume: VolumeRecord) -> None:
        volume.status = VolumeStatus.DELETED
        volume.deleted_at = self._w.now
