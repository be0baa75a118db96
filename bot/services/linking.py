"""Linking: a provider cluster becomes its request's cluster — whoever sees it first.

The launch that made the cluster, a worker resolving that launch after a crash, and a sweep that
finds the cluster in AI Reserve's listing (by the `quoteId` it carries) all record it the same
way: one row, linked to the request, its owner and channel, and the request moved to
`launched`. Whichever lands first inserts; the others find the linked row and change nothing
(an unlinked row a sweep stored earlier is linked in place, never left ownerless).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.clock import Clock
from bot.domain.idle import IdleState
from bot.domain.models import DEFAULT_LIMIT_MINUTES, ClusterRecord, LaunchRequest, RequestStatus
from bot.domain.readiness import ReadinessState, ReadinessWatch
from bot.reserve.schemas import Cluster
from bot.services.observing import record_from_wire
from storage.db import Database

# A cluster from one of its quotes settles the request, whatever it was waiting for: even a
# request re-priced and pending again must not be approved into a second cluster.
NOT_LAUNCHED = [s for s in RequestStatus if s is not RequestStatus.LAUNCHED]


@dataclass(frozen=True)
class Linked:
    record: ClusterRecord
    request: LaunchRequest | None  # the request, if this call moved it to `launched`


async def link_cluster(*, db: Database, clock: Clock, wire: Cluster, request: LaunchRequest,
                       accelerator_name: str) -> Linked:
    now = clock.now()
    record = record_from_wire(wire, owner_id=request.requester_id,
                              channel_id=request.channel_id, request_id=request.id,
                              accelerator_name=accelerator_name, now=now)
    async with db.transaction() as repos:
        quote = await repos.quotes.get(request.quote_id)
        planned = quote is not None and quote.spec.planned_hours is not None
        # A planned run (`hours=`) ends at its envelope: terminated unless its owner moves it.
        record = record.model_copy(update={"lifetime_hours": request.lifetime_hours,
                                           "auto_terminate": planned,
                                           "project": request.project,
                                           "team_id": request.team_id,
                                           "enterprise_id": request.enterprise_id})
        stored = await repos.clusters.link(record)
        moved = await repos.requests.transition(
            request.id, from_=NOT_LAUNCHED, to=RequestStatus.LAUNCHED, now=now,
            cluster_id=wire.id, last_error=None)
        await repos.launches.settle_request(request.id, cluster_id=wire.id,
                                            quote_id=wire.quote_id, now=now)
        rule, idle = request.workload.readiness, request.workload.idle
        if rule is not None or idle is not None:  # the log follower starts with the cluster
            await repos.readiness.add(ReadinessWatch(  # (kept if there)
                cluster_id=wire.id, pattern=rule.pattern if rule else None,
                all_ranks=rule.all_ranks if rule else False,
                limit_minutes=rule.limit_minutes if rule else DEFAULT_LIMIT_MINUTES,
                state=ReadinessState.WATCHING if rule else ReadinessState.NONE,
                idle=idle, idle_state=IdleState.ACTIVE if idle else IdleState.OFF,
                updated_at=now))
    return Linked(record=stored, request=moved)
