"""Recover all mine: one press on a storm's digest asks for a recovery attempt on each of the
presser's own degraded clusters in it — through the same `RecoveryService.recover` a Recover
button calls (its permissions, its refusal once recovery is exhausted, its idempotency key per
episode and attempt, its audit row per cluster)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.clock import Clock
from bot.domain import recovery
from bot.domain.claims import ClaimKey, recovery_version
from bot.domain.errors import Conflict, DomainError, UnknownResource
from bot.domain.models import Actor, ClusterRecord, ClusterState
from bot.services.claims import ButtonClaims
from bot.services.recovery import RecoveryService
from storage.db import Database


@dataclass(frozen=True)
class RecoverAll:
    started: list[ClusterRecord] = field(default_factory=list)
    skipped: list[tuple[ClusterRecord, str]] = field(default_factory=list)


class StormService:
    def __init__(self, *, db: Database, recovery: RecoveryService, claims: ButtonClaims,
                 clock: Clock) -> None:
        self._db = db
        self._recovery = recovery
        self._claims = claims
        self._clock = clock

    async def recover_all_mine(self, *, digest_id: str, degraded: int,
                               actor: Actor) -> RecoverAll:
        """Once per person and showing of the digest (`degraded`: how many it showed): a
        double click or a retried delivery is told what the first press did."""
        return await self._claims.once(
            ClaimKey(action="recover_all", subject_id=digest_id,
                     version=f"{actor.user_id}:{degraded}"),
            actor=actor, act=lambda: self._recover_all(digest_id, actor),
            told=lambda done: "Already pressed: " + _summary(done))

    async def _recover_all(self, digest_id: str, actor: Actor) -> RecoverAll:
        async with self._db.transaction() as repos:
            digest = await repos.digests.get(digest_id)
            if digest is None:
                raise UnknownResource("digest", digest_id)
            members = [c for c in [await repos.clusters.get(i)
                                   for i in await repos.digests.members(digest_id)] if c]
        mine = [c for c in members
                if c.owner_id == actor.user_id and c.status is ClusterState.DEGRADED]
        if not mine:
            raise Conflict("None of the clusters in this storm is yours and degraded now; "
                           "nothing was changed.")
        done = RecoverAll()
        for c in mine:
            if recovery.exhausted(c):
                done.skipped.append((c, "every recovery attempt of this episode is spent; "
                                        "terminating is the way out: "
                                        f"`/cluster terminate {c.id}`."))
                continue
            try:
                fresh = await self._recovery.recover(cluster_id=c.id, actor=actor,
                                                     shown=recovery_version(c.observed))
            except DomainError as exc:
                done.skipped.append((c, exc.user_message))
            else:
                done.started.append(fresh)
        return done


def _summary(done: RecoverAll) -> str:
    started = ", ".join(f"`{c.id}`" for c in done.started) or "none"
    return f"recovery attempts started then on {started}."
