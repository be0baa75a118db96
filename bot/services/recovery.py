"""Recovery: one attempt now, or automatic recovery on/off — for the owner or an approver.

Buttons on old notices act on the cluster's *current* state: the provider decides (a cluster
that is running again answers `not_degraded`), and the person is told in plain words. Once
every attempt of the episode is spent (bot/domain/recovery.py) nothing here calls AI Reserve:
the answer is why, and that terminating is the way out.
"""

from __future__ import annotations

import uuid
from typing import Unpack

from bot.domain import policies, recovery
from bot.domain.claims import recovery_version
from bot.domain.errors import Conflict, DomainError
from bot.domain.models import Actor, ClusterRecord, ClusterState
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.services.acting import ActingService, Basics
from bot.services.audit import audited
from bot.services.provider_errors import explain
from bot.services.watching import WatchService


class RecoveryService(ActingService):
    def __init__(self, *, provider: ClusterProvider, watching: WatchService,
                 **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._provider = provider
        self._watching = watching

    async def _allowed(self, cluster_id: str, actor: Actor) -> ClusterRecord:
        async with self._db.transaction() as repos:
            record = await repos.clusters.require(cluster_id)
        policies.ensure_can_act_on_cluster(record, actor,
                                           await self._people.approvers_for(record))
        if not record.status.is_live:
            raise Conflict(f"`{cluster_id}` is {record.status.value}; there is nothing to "
                           "recover.")
        return record

    async def check(self, *, cluster_id: str, actor: Actor, auto: bool = False) -> None:
        """Before a Recover / Turn on auto-recovery press is claimed: refuse (and record the
        refusal) once recovery is exhausted, so an old button — even one pressed before, whose
        claim remembers its first answer — tells what is true now."""
        try:
            _refuse_if_exhausted(await self._allowed(cluster_id, actor), auto=auto)
        except DomainError as exc:
            await self._audit.write(actor=actor, action="autorecover" if auto else "recover",
                                    subject_id=cluster_id, outcome="refused",
                                    detail=exc.user_message)
            raise

    @audited("recover", subject="cluster_id")
    async def recover(self, *, cluster_id: str, actor: Actor,
                      shown: tuple[int, int] | None = None) -> ClusterRecord:
        """Ask AI Reserve for one recovery attempt now (it uses the episode's budget).

        `shown` is the (episode, attempts used) the button was shown: once an attempt was made
        since, the button is stale and changes nothing. The attempt's Idempotency-Key is derived
        from it, so even two presses racing past every other guard make one attempt."""
        record = await self._allowed(cluster_id, actor)
        _refuse_if_exhausted(record, auto=False)
        key = str(uuid.uuid4())
        if shown is not None:
            now = recovery_version(record.observed)
            if now != shown:
                raise Conflict(_stale_recovery(record, shown=shown))
            key = f"recover-{cluster_id}-{shown[0]}-{shown[1]}"
        try:
            wire = await self._provider.recover_cluster(cluster_id, idempotency_key=key)
        except api.NotDegraded:
            raise Conflict(f"`{cluster_id}` is healthy ({record.status.value}); nothing to "
                           "recover.") from None
        except api.RecoveryInProgress:
            raise Conflict(f"A recovery attempt on `{cluster_id}` is already running; its "
                           "result will be posted in the cluster's thread.") from None
        except api.RecoveryExhausted:
            # Spent since the bot last looked: store what AI Reserve says now, then say why.
            seen = await self._watching.sync(cluster_id) or record
            raise _exhausted(seen, auto=False) from None
        except api.ApiError as exc:
            raise explain(exc, ident=cluster_id) from exc
        # Remember that this attempt was ours, so its notice says "manual".
        attempt = f"{wire.recovery.episode}:{wire.recovery.attempts_used + 1}"
        async with self._db.transaction() as repos:
            fresh = await repos.clusters.get(cluster_id)
            assert fresh is not None
            await repos.clusters.update(cluster_id, now=self._clock.now(),
                                        manual_recoveries=(*fresh.manual_recoveries, attempt))
        synced = await self._watching.sync(cluster_id, wire=wire)
        assert synced is not None
        return synced

    @audited("autorecover", subject="cluster_id")
    async def set_auto(self, *, cluster_id: str, actor: Actor, on: bool) -> ClusterRecord:
        """Automatic recovery on or off. Refused once the episode's attempts are spent: AI
        Reserve would store the setting and never act on it, so saying "on" would mislead."""
        record = await self._allowed(cluster_id, actor)
        _refuse_if_exhausted(record, auto=True, on=on)
        if record.status is ClusterState.DEGRADED:
            # Read first (a GET changes nothing): spent since the last poll is refused too.
            _refuse_if_exhausted(await self._watching.sync(cluster_id) or record, auto=True,
                                 on=on)
        try:
            wire = await self._provider.set_auto_recovery(cluster_id, on)
        except api.ApiError as exc:
            raise explain(exc, ident=cluster_id) from exc
        synced = await self._watching.sync(cluster_id, wire=wire)
        assert synced is not None
        return synced


def _refuse_if_exhausted(record: ClusterRecord, *, auto: bool, on: bool = True) -> None:
    if recovery.exhausted(record):
        raise _exhausted(record, auto=auto, on=on)


def _exhausted(record: ClusterRecord, *, auto: bool, on: bool = True) -> Conflict:
    """The refusal once the episode's attempts are all spent: why, and the way out."""
    asked = (f"Turning automatic recovery {'on' if on else 'off'}" if auto
             else "Another recovery attempt")
    return Conflict(recovery.exhausted_refusal(record, asked=asked))


def _stale_recovery(record: ClusterRecord, *, shown: tuple[int, int]) -> str:
    episode, used = recovery_version(record.observed)
    cap = record.observed.attempts_max if record.observed else 0
    if episode != shown[0]:
        return (f"This button is from an earlier degraded episode of `{record.id}`; it is "
                f"{record.status.value} now. Nothing was done.")
    return (f"Since this button was shown, {used} of {cap} recovery attempts of this episode "
            f"were made on `{record.id}` (their progress is in the cluster's thread); nothing "
            f"more was done. To try once more: `/cluster recover {record.id}`.")
