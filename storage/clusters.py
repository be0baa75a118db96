"""The clusters the bot keeps track of until they stop billing (see storage/repositories.py for
how repositories work: one transaction each, frozen domain models in and out, Core statements)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.errors import UnknownResource
from bot.domain.models import ClusterRecord, ClusterState
from storage.rows import (
    Remembered,
    field_values,
    in_chunks,
    raw_columns,
    row_values,
    to_domain,
    to_domain_many,
)
from storage.statements import MANAGED, insert, rowcount
from storage.tables.clusters import CLUSTERS

_LIVE = tuple(s.value for s in ClusterState if s.is_live)
# Built once (values bound at execution, a list as an expanding IN): see storage/repositories.py.
# A list read is one statement per combination of its optional filters, built at its first use
# (`@cache`); each reads the raw columns (`_list`).
_GET = sa.select(CLUSTERS).where(CLUSTERS.c.id == sa.bindparam("id"))
_ROWS = sa.select(*raw_columns(CLUSTERS))
_IS_LIVE = CLUSTERS.c.status.in_(_LIVE)
_OLDEST_FIRST = (CLUSTERS.c.created_at, CLUSTERS.c.id)
_NEWEST_FIRST = (CLUSTERS.c.created_at.desc(), CLUSTERS.c.id.desc())
_UNCLAIMED = (_IS_LIVE, CLUSTERS.c.adopted, CLUSTERS.c.owner_id.is_(None))
_UNCLAIMED_TOTALS = sa.select(
    sa.func.count(), sa.func.coalesce(sa.func.sum(CLUSTERS.c.hourly_cents), 0)).where(*_UNCLAIMED)
_LIVE_TOTALS = (sa.select(CLUSTERS.c.status, sa.func.count(),
                          sa.func.coalesce(sa.func.sum(CLUSTERS.c.hourly_cents), 0))
                .where(_IS_LIVE).group_by(CLUSTERS.c.status))
_DEGRADED = (_ROWS.where(CLUSTERS.c.status == ClusterState.DEGRADED.value)
             .order_by(CLUSTERS.c.id))
_RECENT = _ROWS.order_by(*_NEWEST_FIRST).limit(sa.bindparam("limit", type_=sa.Integer))
_ALL = _ROWS.order_by(*_OLDEST_FIRST)
_IDS = sa.select(CLUSTERS.c.id).where(CLUSTERS.c.id.in_(sa.bindparam("ids", expanding=True)))
_MANY = _ROWS.where(CLUSTERS.c.id.in_(sa.bindparam("ids", expanding=True)))
_LINKED = (sa.select(CLUSTERS.c.id, CLUSTERS.c.request_id.is_not(None))
           .where(CLUSTERS.c.id.in_(sa.bindparam("ids", expanding=True))))
_MOUNTING = _ROWS.where(CLUSTERS.c.volume_id.in_(sa.bindparam("volume_ids", expanding=True)))
_BY_REQUEST = (_ROWS.where(CLUSTERS.c.request_id == sa.bindparam("request_id"))
               .order_by(*_NEWEST_FIRST).limit(1))


@cache
def _unclaimed(in_channel: bool, dearest: bool, limited: bool) -> sa.Select[Any]:
    stmt = _ROWS.where(*_UNCLAIMED)
    if in_channel:
        stmt = stmt.where(CLUSTERS.c.channel_id == sa.bindparam("channel_id"))
    order = (CLUSTERS.c.hourly_cents.desc(),) if dearest else ()
    return _paged(stmt.order_by(*order, *_OLDEST_FIRST), offset=False, limited=limited)


@cache
def _live(with_lifetime: bool, owned: bool, of_project: bool, offset: bool,
          limited: bool) -> sa.Select[Any]:
    stmt = _ROWS.where(_IS_LIVE)
    if with_lifetime:
        stmt = stmt.where(CLUSTERS.c.lifetime_hours.is_not(None))
    return _paged(_narrowed(stmt, owned, of_project).order_by(*_OLDEST_FIRST),
                  offset=offset, limited=limited)


@cache
def _of_owner(live: bool) -> sa.Select[Any]:
    stmt = _ROWS.where(CLUSTERS.c.owner_id == sa.bindparam("owner_id"))
    return (stmt.where(_IS_LIVE) if live else stmt).order_by(*_OLDEST_FIRST)


@cache
def _in_period(owned: bool, of_project: bool) -> sa.Select[Any]:
    stmt = _ROWS.where(
        CLUSTERS.c.ready_at.is_not(None),
        CLUSTERS.c.ready_at < sa.bindparam("end"),
        sa.or_(CLUSTERS.c.terminated_at.is_(None),
               CLUSTERS.c.terminated_at > sa.bindparam("start")),
    )
    return _narrowed(stmt, owned, of_project).order_by(CLUSTERS.c.ready_at, CLUSTERS.c.id)


def _narrowed(stmt: sa.Select[Any], owned: bool, of_project: bool) -> sa.Select[Any]:
    """Only the clusters of the owners bound as `owners`, of the project bound as `project`."""
    if of_project:
        stmt = stmt.where(CLUSTERS.c.project == sa.bindparam("project"))
    if owned:
        stmt = stmt.where(CLUSTERS.c.owner_id.in_(sa.bindparam("owners", expanding=True)))
    return stmt


def _paged(stmt: sa.Select[Any], *, offset: bool, limited: bool) -> sa.Select[Any]:
    """From the row bound as `offset` on, at most `limit` rows (each only when asked for)."""
    if offset:
        stmt = stmt.offset(sa.bindparam("offset", type_=sa.Integer))
    return stmt.limit(sa.bindparam("limit", type_=sa.Integer)) if limited else stmt


def _narrowing(owners: Collection[str] | None, project: str | None) -> dict[str, Any]:
    """The values `_narrowed` binds (owners sorted: the same values the same order)."""
    values: dict[str, Any] = {} if project is None else {"project": project}
    return values if owners is None else values | {"owners": sorted(owners)}


def _paging(offset: int, limit: int | None) -> dict[str, Any]:
    values: dict[str, Any] = {"offset": offset} if offset else {}
    return values if limit is None else values | {"limit": limit}


class ClusterRepo:
    """Clusters the bot keeps track of until they stop billing."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add_many(self, records: Collection[ClusterRecord]) -> None:
        """Insert each of `records` whose id isn't stored yet (one statement per chunk)."""
        if not records:
            return
        # One statement executed with many parameter sets: compiled once and cached (a VALUES
        # list of literal rows is compiled afresh at each call — ~0.1 s for 40 rows).
        stmt = insert(self._session, CLUSTERS).on_conflict_do_nothing(index_elements=["id"])
        await self._session.execute(stmt, [row_values(c) for c in records])

    async def unclaimed(self, channel_id: str | None = None, *, limit: int | None = None,
                        dearest: bool = False) -> list[ClusterRecord]:
        """Live clusters found at AI Reserve that nobody has claimed (in `channel_id`'s care,
        or anywhere), oldest first (`dearest`: the highest rate first)."""
        values = _paging(0, limit) | ({} if channel_id is None else {"channel_id": channel_id})
        return await self._list(
            _unclaimed(channel_id is not None, dearest, limit is not None), values)

    async def unclaimed_totals(self) -> tuple[int, int]:
        """How many live clusters nobody has claimed, and their rates together (cents/h)."""
        row = (await self._session.execute(_UNCLAIMED_TOTALS)).one()
        return int(row[0]), int(row[1])

    async def add(self, c: ClusterRecord) -> ClusterRecord:
        """Insert `c`; if its id is already stored, return the stored record unchanged."""
        stmt = insert(self._session, CLUSTERS).values(row_values(c))
        await self._session.execute(stmt.on_conflict_do_nothing(index_elements=["id"]))
        stored = await self.get(c.id)
        assert stored is not None  # inserted now or earlier, and visible to this transaction
        return stored

    async def link(self, c: ClusterRecord) -> ClusterRecord:
        """Store `c`, a cluster launched for a request, whoever lands first: inserted if
        absent; if a sweep stored it unlinked (adopted), it becomes this request's and owner's.
        A row already linked is returned unchanged: the launch and the sweep converge."""
        assert c.request_id is not None
        link = {"request_id": c.request_id, "owner_id": c.owner_id, "channel_id": c.channel_id,
                "adopted": False, "lifetime_hours": c.lifetime_hours,
                "auto_terminate": c.auto_terminate, "project": c.project}
        stmt = insert(self._session, CLUSTERS).values(row_values(c))
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["id"], set_=link, where=CLUSTERS.c.request_id.is_(None)))
        stored = await self.get(c.id)
        assert stored is not None
        return stored

    async def get(self, id: str) -> ClusterRecord | None:
        row = (await self._session.execute(_GET, {"id": id})).mappings().one_or_none()
        return None if row is None else to_domain(ClusterRecord, row)

    async def require(self, id: str) -> ClusterRecord:
        """The cluster, or UnknownResource: what every action on a named cluster starts with."""
        record = await self.get(id)
        if record is None:
            raise UnknownResource("cluster", id)
        return record

    async def update(self, id: str, *, now: datetime, **fields: Any) -> ClusterRecord:
        """Set `fields` (and `updated_at=now`); UnknownResource if no such cluster."""
        values = field_values(ClusterRecord, fields, forbidden=MANAGED)
        stmt = sa.update(CLUSTERS).where(CLUSTERS.c.id == id).values({**values, "updated_at": now})
        if await rowcount(self._session, stmt) == 0:
            raise UnknownResource("cluster", id)
        updated = await self.get(id)
        assert updated is not None  # we just updated it inside this transaction
        return updated

    async def update_many(self, changes: Mapping[str, dict[str, Any]], *,
                          now: datetime) -> dict[str, ClusterRecord]:
        """Set each cluster's `fields` (and `updated_at=now`): one UPDATE per set of field
        names, executed with a row each; returns them as stored now, by id. UnknownResource
        if one of them isn't stored."""
        same: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for id, fields in changes.items():
            values = field_values(ClusterRecord, fields, forbidden=MANAGED) | {"updated_at": now}
            same.setdefault(tuple(sorted(values)), []).append(
                {"_id": id} | {f"_{k}": v for k, v in values.items()})
        for names, rows in same.items():
            stmt = sa.update(CLUSTERS).where(CLUSTERS.c.id == sa.bindparam("_id")).values(
                {k: sa.bindparam(f"_{k}", type_=CLUSTERS.c[k].type) for k in names})
            await self._session.execute(stmt, rows)
        stored = await self.get_many(changes)
        if missing := changes.keys() - stored.keys():
            raise UnknownResource("cluster", min(missing))
        return stored

    async def extend_envelope(self, id: str, *, from_hours: int, to_hours: int, by: str,
                              now: datetime) -> ClusterRecord | None:
        """Compare-and-set the envelope `from_hours` → `to_hours`; None if it had moved."""
        stmt = (sa.update(CLUSTERS)
                .where(CLUSTERS.c.id == id, CLUSTERS.c.lifetime_hours == from_hours)
                .values(lifetime_hours=to_hours, envelope_stage="extended", extended_by=by,
                        updated_at=now))
        if await rowcount(self._session, stmt) == 0:
            return None
        return await self.get(id)

    async def list_live(self, *, offset: int = 0, limit: int | None = None,
                        with_lifetime: bool = False,
                        owners: Collection[str] | None = None,
                        project: str | None = None,
                        remembered: Remembered[ClusterRecord] | None = None,
                        ) -> list[ClusterRecord]:
        """Clusters that may still bill (provisioning…terminating), oldest first; `limit` of
        them from the `offset`-th on (a page of `/cluster list`); `with_lifetime`: only those
        approved for a number of hours (an envelope); `owners`: only theirs; `project`: only
        that project's; `remembered`: the rows as this caller read them last (storage/rows.py),
        so an unchanged row is not converted again."""
        stmt = _live(with_lifetime, owners is not None, project is not None, bool(offset),
                     limit is not None)
        return await self._list(stmt, _narrowing(owners, project) | _paging(offset, limit),
                                remembered=remembered)

    async def list_degraded(self) -> list[ClusterRecord]:
        """Clusters degraded now (the escalation sweep's, bot/services/duty.py; a storm's size)."""
        return await self._list(_DEGRADED)

    async def live_totals(self) -> dict[ClusterState, tuple[int, int]]:
        """For each state a cluster may still bill in: how many clusters, and their hourly cents
        together (one grouped query, however many clusters there are)."""
        rows = (await self._session.execute(_LIVE_TOTALS)).all()
        return {ClusterState(status): (int(n), int(cents)) for status, n, cents in rows}

    async def list_recent(self, limit: int = 50) -> list[ClusterRecord]:
        """The `limit` most recently created clusters, newest first."""
        return await self._list(_RECENT, {"limit": limit})

    async def list_all(self) -> list[ClusterRecord]:
        """Every cluster, oldest first."""
        return await self._list(_ALL)

    async def ids(self, ids: Collection[str]) -> set[str]:
        """Which of `ids` are stored."""
        known: set[str] = set()
        for chunk in in_chunks(ids):
            known.update((await self._session.execute(_IDS, {"ids": chunk})).scalars())
        return known

    async def get_many(self, ids: Collection[str]) -> dict[str, ClusterRecord]:
        """Those of `ids` stored, by id (one query per 500)."""
        found: dict[str, ClusterRecord] = {}
        for chunk in in_chunks(ids):
            found |= {c.id: c for c in await self._list(_MANY, {"ids": chunk})}
        return found

    async def untracked(self, ids: Collection[str]) -> dict[str, bool]:
        """Those of `ids` no request is linked to: id → whether a row is stored at all (an
        adopted cluster) or not (never seen)."""
        wanted = list(dict.fromkeys(ids))
        linked: dict[str, bool] = {}
        for chunk in in_chunks(wanted):
            found = await self._session.execute(_LINKED, {"ids": chunk})
            linked.update({id: bool(has) for id, has in found})
        return {id: id in linked for id in wanted if not linked.get(id, False)}

    async def list_for_owner(self, owner_id: str, *, live: bool = False) -> list[ClusterRecord]:
        """Every cluster `owner_id` owns (`live`: only those that may still bill), oldest
        first."""
        return await self._list(_of_owner(live), {"owner_id": owner_id})

    async def list_in_period(self, start: datetime, end: datetime, *,
                             owners: Collection[str] | None = None,
                             project: str | None = None) -> list[ClusterRecord]:
        """Clusters that were up at some time in [start, end), first ready first (only those
        of `owners`, if given).

        A cluster is up over [ready_at, terminated_at), or from ready_at on while it has no
        terminated_at; one that never became ready never billed and is left out. Both intervals
        are half-open: a cluster ready exactly at `end`, or terminated exactly at `start`, shares
        no time with the period.
        """
        if end <= start:
            raise ValueError(f"empty period: end {end.isoformat()} is not after start")
        return await self._list(_in_period(owners is not None, project is not None),
                                {"start": start, "end": end} | _narrowing(owners, project))

    async def with_volumes(self, volume_ids: Collection[str]) -> list[ClusterRecord]:
        """Every cluster that mounted one of `volume_ids`, oldest first (a volume's mounts)."""
        found: list[ClusterRecord] = []
        for chunk in in_chunks(volume_ids):
            found += await self._list(_MOUNTING, {"volume_ids": chunk})
        return sorted(found, key=lambda c: (c.created_at, c.id))

    async def by_request(self, request_id: str) -> ClusterRecord | None:
        """The cluster launched for `request_id` (the newest, should there ever be several)."""
        found = await self._list(_BY_REQUEST, {"request_id": request_id})
        return found[0] if found else None

    async def _list(self, stmt: sa.Select[Any], values: Mapping[str, Any] | None = None, *,
                    remembered: Remembered[ClusterRecord] | None = None) -> list[ClusterRecord]:
        """The clusters `stmt` (one of the prebuilt reads of `_ROWS`) reads with `values`."""
        rows = (await self._session.execute(stmt, values)).all()
        return await to_domain_many(ClusterRecord, CLUSTERS, rows,
                                    self._session.dialect, remembered=remembered)

