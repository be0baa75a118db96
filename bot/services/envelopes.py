"""The approved spend envelope: how long a cluster may run, as approved with its request.

A sweep walks each live cluster with an envelope through its stages — each at most once,
recorded on the cluster before anyone is told:
- 80 % of the approved hours: the owner is warned;
- 100 %: the owner and the approvers get **Extend** (an approver, never the owner) / Terminate;
- with `enforce_lifetime` in the policy only: a last warning an hour before, and termination
  two hours after the envelope ended if nobody extended it. Off by default.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.domain.errors import Conflict, NotAllowed, UnknownResource
from bot.domain.models import Actor, ClusterRecord, ClusterState
from bot.domain.ports import Notifier
from bot.reserve.port import ClusterProvider
from bot.services.audit import AuditLog, audited
from bot.services.people import People
from bot.services.termination import TerminationService
from storage.db import Database

log = logging.getLogger(__name__)

WARN_AT = 0.8
ENFORCE_AFTER = timedelta(hours=2)  # an enforced envelope ends this long after it is spent
FINAL_WARNING = timedelta(hours=1)  # … with a last warning this long before


def ends_at(record: ClusterRecord) -> datetime | None:
    if record.lifetime_hours is None or record.ready_at is None:
        return None
    return record.ready_at + timedelta(hours=record.lifetime_hours)


def next_stage(record: ClusterRecord, *, now: datetime, enforce: bool) -> str | None:
    """The stage `record` should move to now (pure), or None."""
    end = ends_at(record)
    if end is None or record.status not in (ClusterState.RUNNING, ClusterState.DEGRADED):
        return None
    stage = record.envelope_stage
    if enforce and now >= end + ENFORCE_AFTER and stage in ("due", "final"):
        return "enforced"
    if enforce and now >= end + ENFORCE_AFTER - FINAL_WARNING and stage == "due":
        return "final"
    if now >= end and stage in ("none", "warned", "extended"):
        return "due"
    assert record.ready_at is not None and record.lifetime_hours is not None
    warn = record.ready_at + timedelta(hours=record.lifetime_hours * WARN_AT)
    if now >= warn and stage in ("none", "extended"):
        return "warned"
    return None


class EnvelopeService:
    def __init__(self, *, db: Database, provider: ClusterProvider, notifier: Notifier,
                 termination: TerminationService, people: People, audit: AuditLog,
                 clock: Clock) -> None:
        self._db = db
        self._provider = provider
        self._notifier = notifier
        self._termination = termination
        self._people = people
        self._audit = audit
        self._clock = clock

    async def sweep(self) -> int:
        """Move every live cluster's envelope on; returns how many moved."""
        enforce = self._people.policy.enforce_lifetime
        moved = 0
        async with self._db.transaction() as repos:
            live = await repos.clusters.list_live()
        for record in live:
            now = self._clock.now()
            stage = next_stage(record, now=now, enforce=enforce)
            if stage is None:
                continue
            async with self._db.transaction() as repos:  # claim the stage before telling
                current = await repos.clusters.get(record.id)
                if current is None or next_stage(current, now=now, enforce=enforce) != stage:
                    continue
                record = await repos.clusters.update(record.id, now=now, envelope_stage=stage)
            moved += 1
            await self._announce(record, stage, now=now, enforce=enforce)
        return moved

    async def _announce(self, record: ClusterRecord, stage: str, *, now: datetime,
                        enforce: bool) -> None:
        end = ends_at(record)
        assert end is not None
        approvers = sorted(await self._people.approvers())
        owner = [record.owner_id] if record.owner_id else []
        if stage == "warned":
            await self._notifier.envelope_notice(record, stage=stage, ends_at=end,
                                                 terminate_at=None, recipients=owner or approvers)
        elif stage in ("due", "final"):
            terminate_at = end + ENFORCE_AFTER if enforce else None
            await self._notifier.envelope_notice(
                record, stage=stage, ends_at=end, terminate_at=terminate_at,
                recipients=sorted({*owner, *approvers}))
        else:  # enforced: nobody extended it
            log.warning("terminating %s: its approved envelope ended at %s", record.id, end)
            await self._audit.write(actor=None, action="enforce_envelope", subject_id=record.id,
                                    outcome="ok", amount_cents=record.accrued_cents,
                                    detail=f"envelope of {record.lifetime_hours} h ended at "
                                           f"{end:%Y-%m-%d %H:%M} UTC and was not extended")
            await self._termination.terminate_for_policy(cluster_id=record.id)

    @audited("extend", subject="cluster_id")
    async def extend(self, *, cluster_id: str, actor: Actor,
                     shown_hours: int | None = None) -> ClusterRecord:
        """An approver (never the owner) grants the envelope once more.

        `shown_hours` is the envelope the button showed: if it has changed since (someone else
        extended it first), nothing is extended and the refusal says who did, to how much."""
        approvers = await self._people.approvers()
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
            if record is None:
                raise UnknownResource("cluster", cluster_id)
            if actor.user_id == record.owner_id:
                raise NotAllowed("Owners can't extend their own cluster's envelope; an approver "
                                 "has to.")
            if actor.user_id not in approvers:
                raise NotAllowed("Only an approver can extend a cluster's envelope.")
            if record.lifetime_hours is None or not record.status.is_live:
                raise Conflict(f"`{cluster_id}` has no envelope to extend.")
            if shown_hours is not None and record.lifetime_hours != shown_hours:
                raise Conflict(extended_already(record, shown_hours=shown_hours))
            hours = self._people.policy.max_lifetime_hours or record.lifetime_hours
            record = await repos.clusters.update(
                cluster_id, now=self._clock.now(), lifetime_hours=record.lifetime_hours + hours,
                envelope_stage="extended", extended_by=actor.user_id)
        await self._notifier.envelope_extended(record, by=actor.user_id, hours=hours)
        return record


def extended_already(record: ClusterRecord, *, shown_hours: int) -> str:
    """Why a stale Extend changes nothing: who extended the envelope, to how many hours."""
    by = f" by <@{record.extended_by}>" if record.extended_by else ""
    return (f"Already extended{by} to {record.lifetime_hours} h (this button showed "
            f"{shown_hours} h); nothing more was extended.")
