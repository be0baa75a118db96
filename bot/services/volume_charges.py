"""A shared volume's own charges, from what the bot stored (no provider call): the volume's
record and every cluster that mounted it, replayed by bot/domain/charges.py. `/cluster spend`,
App Home and the budget check all count volumes through here."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from bot.domain.charges import VolumeSpan, mount_of, volume_span
from bot.domain.models import ClusterRecord, PriceStep, VolumeRecord
from storage.repositories import Repos

GONE = ("deleting", "deleted")


async def project_volume_spans(repos: Repos, *, now: datetime,
                               project: str | None) -> list[VolumeSpan]:
    """The volumes whose own hours `project` pays (none without a project to count)."""
    if project is None:
        return []
    return [v for v in await volume_spans(repos, now=now) if v.project == project]


async def volume_spans(repos: Repos, *, now: datetime,
                       owners: Collection[str] | None = None) -> list[VolumeSpan]:
    """Every stored volume (only those `owners` own, if given) with what it was charged on its
    own up to `now` and whether it keeps billing."""
    volumes = (await repos.volumes.list_all() if owners is None
               else await repos.volumes.list_owned(owners))
    mounts = await repos.clusters.with_volumes([v.id for v in volumes])
    return [span_of(v, [c for c in mounts if c.volume_id == v.id], now=now) for v in volumes]


def span_of(v: VolumeRecord, clusters: list[ClusterRecord], *, now: datetime) -> VolumeSpan:
    """`v`'s charges, given the clusters that mounted it."""
    with_cluster = v.created_with_cluster_id is not None or any(
        c.volume_created_with_cluster for c in clusters)
    created = v.created_at or min([c.created_at for c in clusters], default=v.updated_at)
    until = v.deleted_at or (v.updated_at if v.status in GONE else None)
    # A volume a `project=` cluster created bills its own hours to that project too.
    creator = next((c for c in clusters if c.id == v.created_with_cluster_id), None) or next(
        (c for c in clusters if c.volume_created_with_cluster), None)
    return volume_span(project=creator.project if creator is not None else None,
        id=v.id, owner_id=v.owner_id, created_at=created, with_cluster=with_cluster,
        prices=v.prices or (PriceStep(at=created, hourly_cents=v.hourly_cents),),
        hourly_cents=v.hourly_cents, mounts=[mount_of(c) for c in clusters], until=until,
        now=now)
