"""Orphaned volumes: a shared volume outlives its cluster and bills until deleted.

Each sweep reads AI Reserve's volumes. One that no cluster holds is "orphaned" from the first
time it is seen so; its owner (the owner of the cluster it was made with, else the approvers)
gets a reminder a day after, then daily, with what it costs per month. *Keep* snoozes the
reminders for a week; *Delete volume* deletes it — refused, with the reason, while a cluster is
attached.

`/cluster volumes` lists them fresh from AI Reserve; *Grow* (and `/cluster volume grow <id>
<GB>`) resizes one only while detached and never shrinks (the docs); *Relaunch on this volume*
on a terminated cluster's receipt turns it into the quote command for the same shape there.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Unpack

from bot.domain.commands import USAGE, QuoteCommand
from bot.domain.errors import Conflict, InvalidCommand, NotAllowed, UnknownResource
from bot.domain.models import Actor, ClusterState, Frozen, PriceStep, VolumeRecord
from bot.domain.ports import Notifier
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.reserve.schemas import Volume, VolumeStatus
from bot.services.acting import ActingService, Basics
from bot.services.audit import audited
from bot.services.provider_errors import explain
from storage.repositories import Repos

REMIND_EVERY = timedelta(days=1)
KEEP_SNOOZE = timedelta(days=7)
_GONE = ("deleting", "deleted")


class VolumeListing(Frozen):
    """One row of `/cluster volumes`: the stored record (owner, holder, rate) and its age."""

    volume: VolumeRecord
    created_at: datetime


class VolumeService(ActingService):
    def __init__(self, *, provider: ClusterProvider, notifier: Notifier,
                 **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._provider = provider
        self._notifier = notifier

    async def sync(self) -> list[VolumeRecord]:
        """Refresh every volume; returns the orphaned ones whose reminder is due now."""
        await self._refresh()
        async with self._db.transaction() as repos:
            return await repos.volumes.due(self._clock.now())

    async def listing(self) -> list[VolumeListing]:
        """Every volume AI Reserve lists (not deleted), fresh, with the stored owner; newest
        first."""
        wires = await self._refresh()
        async with self._db.transaction() as repos:
            stored = {v.id: v for v in await repos.volumes.list_all()}
        return [VolumeListing(volume=stored[w.id], created_at=w.created_at)
                for w in wires if w.id in stored and w.status.value not in _GONE]

    async def refresh(self) -> None:
        """Store every volume as AI Reserve has it now (before counting what they cost)."""
        await self._refresh()

    async def _refresh(self) -> list[Volume]:
        """Store what AI Reserve lists now; a stored volume it no longer lists (deleted) is
        read by id, so its deletion — when it stopped billing — is stored too."""
        now = self._clock.now()
        try:
            wires = [v async for v in self._provider.iter_volumes()]
            async with self._db.transaction() as repos:
                vanished = [v.id for v in await repos.volumes.list_all()
                            if v.status not in _GONE and v.id not in {w.id for w in wires}]
            gone, purged = [], []
            for volume_id in vanished:
                try:
                    gone.append(await self._provider.get_volume(volume_id))
                except api.NotFound:
                    purged.append(volume_id)  # long deleted: it bills no more
        except api.ApiError as exc:
            raise explain(exc) from exc
        async with self._db.transaction() as repos:
            for volume_id in purged:
                await repos.volumes.update(volume_id, now=now, status="deleted",
                                           next_reminder_at=None, deleted_at=now)
            for wire in [*wires, *gone]:
                stored = await repos.volumes.get(wire.id)
                owner = stored.owner_id if stored else await self._owner_of(repos, wire)
                orphaned = wire.status is VolumeStatus.AVAILABLE
                since = (stored.orphaned_since if stored and stored.orphaned_since else now) \
                    if orphaned else None
                due = (stored.next_reminder_at if stored and stored.next_reminder_at
                       else since + REMIND_EVERY) if since else None
                await repos.volumes.upsert(VolumeRecord(
                    id=wire.id, owner_id=owner,
                    cluster_id=wire.attached_cluster_id or wire.created_with_cluster_id,
                    name=wire.name, size_gb=wire.size_gb, location=wire.location,
                    hourly_cents=wire.billing.hourly_cents, status=wire.status.value,
                    orphaned_since=since, next_reminder_at=due, updated_at=now,
                    **_charging(wire, stored, now=now)))
        return wires

    async def _owner_of(self, repos: Repos, wire: Volume) -> str | None:
        cluster_id = wire.created_with_cluster_id or wire.attached_cluster_id
        record = await repos.clusters.get(cluster_id) if cluster_id else None
        return record.owner_id if record else None

    async def remind_due(self) -> int:
        """The sweep: refresh volumes, remind each due one's owner, schedule the next."""
        due = await self.sync()
        for volume in due:
            recipients = ([volume.owner_id] if volume.owner_id
                          else sorted(await self._people.approvers()))
            await self._notifier.remind_volume(volume, recipients)
            now = self._clock.now()
            async with self._db.transaction() as repos:
                await repos.volumes.update(volume.id, now=now,
                                           next_reminder_at=now + REMIND_EVERY)
        return len(due)

    async def _allowed(self, volume_id: str, actor: Actor) -> VolumeRecord:
        async with self._db.transaction() as repos:
            volume = await repos.volumes.get(volume_id)
        if volume is None:
            raise UnknownResource("volume", volume_id)
        if actor.user_id != volume.owner_id \
                and actor.user_id not in await self._people.approvers():
            raise NotAllowed("Only the volume's owner or an approver can do that.")
        return volume

    @audited("keep_volume", subject="volume_id")
    async def keep(self, *, volume_id: str, actor: Actor) -> VolumeRecord:
        await self._allowed(volume_id, actor)
        async with self._db.transaction() as repos:
            return await repos.volumes.update(volume_id, now=self._clock.now(),
                                              next_reminder_at=self._clock.now() + KEEP_SNOOZE)

    @audited("delete_volume", subject="volume_id")
    async def delete(self, *, volume_id: str, actor: Actor) -> VolumeRecord:
        await self._allowed(volume_id, actor)
        try:
            wire = await self._provider.delete_volume(volume_id)
        except api.VolumeAttached as exc:
            raise Conflict(f"Volume `{volume_id}` is attached to cluster `{exc.cluster_id}`; "
                           "AI Reserve won't delete a volume while a cluster holds it. "
                           "Terminate the cluster first.") from None
        except api.ApiError as exc:
            raise explain(exc, ident=volume_id) from exc
        async with self._db.transaction() as repos:
            # Billing stopped the moment AI Reserve accepted the delete (§3).
            return await repos.volumes.update(volume_id, now=self._clock.now(),
                                              status=wire.status.value, next_reminder_at=None,
                                              deleted_at=self._clock.now())

    async def growable(self, *, volume_id: str, actor: Actor) -> VolumeRecord:
        """The stored volume if `actor` may grow it and no cluster holds it (a local read:
        AI Reserve decides again when the size is given)."""
        volume = await self._allowed(volume_id, actor)
        if volume.status in _GONE:
            raise Conflict(f"Volume `{volume_id}` is {volume.status}; it can no longer grow.")
        if volume.status == "attached":
            raise Conflict(_attached(volume_id, volume.cluster_id))
        return volume

    @audited("grow_volume", subject="volume_id")
    async def grow(self, *, volume_id: str, size_gb: int, actor: Actor) -> VolumeRecord:
        """Grow a detached volume to `size_gb`; a shrink, the same size, an attached or deleted
        volume is refused naming why, and nothing changes."""
        await self._refresh()
        volume = await self._allowed(volume_id, actor)
        await self._people.ensure_may_spend(actor)  # a bigger volume bills more: guests, requesters
        usage = USAGE["volume"]
        if volume.status in _GONE:
            raise Conflict(f"Volume `{volume_id}` is {volume.status}; it can no longer grow.")
        if size_gb < volume.size_gb:
            raise InvalidCommand(f"Volume `{volume_id}` is {volume.size_gb:,} GB; {size_gb:,} GB "
                                 "would shrink it, and AI Reserve volumes only grow. Nothing "
                                 "was changed.", bad_part=str(size_gb), usage=usage)
        if size_gb == volume.size_gb:
            raise InvalidCommand(f"Volume `{volume_id}` is already {size_gb:,} GB: give a larger "
                                 "size. Nothing was changed.", bad_part=str(size_gb), usage=usage)
        if volume.status == "attached":
            raise Conflict(_attached(volume_id, volume.cluster_id))
        try:
            wire = await self._provider.resize_volume(volume_id, size_gb)
        except api.VolumeAttached as exc:
            raise Conflict(_attached(volume_id, exc.cluster_id)) from None
        except api.ApiError as exc:
            raise explain(exc, ident=volume_id, usage=usage) from exc
        async with self._db.transaction() as repos:
            # Its hours from now on are charged at the new size; those before stay as they were.
            stored = await repos.volumes.get(volume_id)
            prices = stored.prices if stored else ()
            return await repos.volumes.update(
                volume_id, now=self._clock.now(), size_gb=wire.size_gb,
                hourly_cents=wire.billing.hourly_cents,
                cents_per_gb_month=wire.billing.cents_per_gb_month,
                prices=(*prices, PriceStep(at=self._clock.now(),
                                           hourly_cents=wire.billing.hourly_cents)))

    async def relaunch(self, *, cluster_id: str) -> tuple[QuoteCommand, str]:
        """The quote for a terminated cluster's shape on the volume it kept (pinned to the
        volume's location), and the channel to quote in."""
        async with self._db.transaction() as repos:
            cluster = await repos.clusters.require(cluster_id)
            volume = await repos.volumes.get(cluster.volume_id) if cluster.volume_id else None
        if cluster.volume_id is None:
            raise Conflict(f"Cluster `{cluster_id}` had no shared volume to relaunch on.")
        if cluster.status not in (ClusterState.TERMINATED, ClusterState.FAILED):
            raise Conflict(f"Cluster `{cluster_id}` is {cluster.status.value}: it still holds "
                           f"volume `{cluster.volume_id}`.")
        if volume is not None and volume.status in _GONE:
            raise Conflict(f"Volume `{volume.id}` is {volume.status}: there is nothing left "
                           "to relaunch on.")
        shape = cluster.shape
        location = volume.location if volume is not None else cluster.location
        return QuoteCommand(accelerator=shape.accelerator, gpus_per_node=shape.gpus_per_node,
                            nodes=shape.nodes, volume_id=cluster.volume_id,
                            location=location, project=cluster.project), cluster.channel_id


def _charging(wire: Volume, stored: VolumeRecord | None, *, now: datetime) -> dict[str, Any]:
    """The fields its charges are replayed from (bot/domain/charges.py): a new hourly price
    from now (a grow the bot did not make is seen here first), and when it stopped billing
    (billing stops when deleting begins; `deletedAt` comes a moment later, once it is gone)."""
    prices = stored.prices if stored else ()
    if not prices:
        prices = (PriceStep(at=wire.created_at, hourly_cents=wire.billing.hourly_cents),)
    elif prices[-1].hourly_cents != wire.billing.hourly_cents:
        prices = (*prices, PriceStep(at=now, hourly_cents=wire.billing.hourly_cents))
    deleted = stored.deleted_at if stored else None
    if wire.status.value in _GONE:
        seen = [at for at in (deleted, wire.deleted_at) if at is not None]
        deleted = min(seen) if seen else now
    return {"created_at": wire.created_at,
            "created_with_cluster_id": wire.created_with_cluster_id,
            "cents_per_gb_month": wire.billing.cents_per_gb_month,
            "prices": prices, "deleted_at": deleted}


def _attached(volume_id: str, cluster_id: str | None) -> str:
    return (f"Volume `{volume_id}` is attached to cluster `{cluster_id}`; AI Reserve grows a "
            "volume only while no cluster holds it. Terminate the cluster first.")
