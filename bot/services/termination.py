"""Termination: the owner or an approver ends a cluster — always accepted, even mid-provision.

A terminate is a durable intent (bot/domain/termination.py): stored before AI Reserve is asked,
then attempted at once and, while AI Reserve fails, again by `finish()` (a sweep, on whichever
replica claims the attempt) with capped backoff, across restarts, until AI Reserve says
terminating/terminated. The person who asked is told when the cluster is really terminated, and
— once, after a few failed attempts — that it still fails and the cluster still bills.
"""

from __future__ import annotations

import logging
from typing import Unpack

from bot.domain import policies
from bot.domain.errors import Conflict, ProviderUnavailable
from bot.domain.lanes import Lane, lane
from bot.domain.models import Actor, ClusterRecord, ClusterState
from bot.domain.policy import money
from bot.domain.ports import Notifier
from bot.domain.reasons import BY_IDLE_RULE, error_words
from bot.domain.termination import (
    CLAIM_LEASE,
    POLICY,
    WARN_AFTER_ATTEMPTS,
    TerminationIntent,
    TerminationState,
    requests_sent,
    retry_delay,
)
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider, counting_sent
from bot.services import stakes
from bot.services.acting import ActingService, Basics
from bot.services.audit import audited
from bot.services.watching import WatchService

log = logging.getLogger(__name__)


class TerminationService(ActingService):
    def __init__(self, *, provider: ClusterProvider, watching: WatchService, notifier: Notifier,
                 **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._provider = provider
        self._watching = watching
        self._notifier = notifier

    @audited("terminate", subject="cluster_id", refusals_only=True,
             stake=stakes.cluster_rate)
    async def check(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        """Who may terminate, and is there anything left to terminate? (before the confirm;
        a refusal is audited as a refused terminate)"""
        return await self._check(cluster_id=cluster_id, actor=actor)

    async def _check(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        async with self._db.transaction() as repos:
            record = await repos.clusters.require(cluster_id)
        policies.ensure_can_act_on_cluster(record, actor,
                                           await self._people.approvers_for(record))
        if not record.status.is_live or record.status.value == "terminating":
            raise Conflict(f"`{cluster_id}` is already {record.status.value}.")
        return record

    @audited("terminate", subject="cluster_id", stake=stakes.cluster_rate)
    async def terminate(self, *, cluster_id: str, actor: Actor) -> ClusterRecord:
        await self._check(cluster_id=cluster_id, actor=actor)
        return await self._terminate(cluster_id, by=actor.user_id)

    async def terminate_for_policy(self, *, cluster_id: str) -> ClusterRecord:
        """The spend policy's enforced envelope ran out (audited by the caller)."""
        with lane(Lane.MONEY):
            return await self._terminate(cluster_id, by=POLICY)

    async def terminate_for_idle(self, *, cluster_id: str) -> ClusterRecord:
        """An idle rule fired and nobody kept the cluster within the policy's grace (audited by
        the caller, bot/services/idle.py). The same durable intent: once, stored first."""
        return await self._terminate(cluster_id, by=BY_IDLE_RULE)

    async def _terminate(self, cluster_id: str, *, by: str) -> ClusterRecord:
        # Intent first: stored before AI Reserve is asked, so a failure or a crash from here on
        # leaves something that retries; and the watcher won't call this "terminated outside".
        now = self._clock.now()
        async with self._db.transaction() as repos:
            await repos.clusters.update(cluster_id, now=now, terminate_requested_by=by)
            intent = await repos.terminations.add(TerminationIntent(
                cluster_id=cluster_id, requested_by=by, requested_at=now, next_attempt_at=now,
                updated_at=now))
        await self._attempt(cluster_id)
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
            intent = await repos.terminations.get(cluster_id) or intent
        assert record is not None
        if intent.state is TerminationState.PENDING:  # failed now, or earlier and not yet due
            raise ProviderUnavailable(
                f"AI Reserve hasn't taken the terminate of `{cluster_id}` yet "
                f"({error_words(intent.last_error) or 'in progress'}). It is still billing at "
                f"{money(record.hourly_cents)}/h; I keep trying and will tell you when it is "
                "really terminated.")
        return record

    async def finish(self) -> int:
        """The sweep: attempt every due terminate, and tell whoever asked about the ones
        AI Reserve has now terminated (in the money lane). Returns how many intents it moved
        on."""
        with lane(Lane.MONEY):
            return await self._finish()

    async def _finish(self) -> int:
        now = self._clock.now()
        async with self._db.transaction() as repos:
            due = await repos.terminations.due(now=now)
            accepted = await repos.terminations.in_state(TerminationState.ACCEPTED)
        moved = 0
        for intent in due:
            if await self._attempt(intent.cluster_id) is None:
                moved += 1
        for intent in accepted:
            moved += await self._announce_if_done(intent)
        return moved

    # --- one attempt ----------------------------------------------------------------------

    async def _attempt(self, cluster_id: str) -> api.ApiError | None:
        """Claim the due attempt and make it; the provider's error if it failed (None: done,
        or not ours to make — another replica holds it, or it isn't due)."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            intent = await repos.terminations.claim(cluster_id, now=now, lease=CLAIM_LEASE)
            record = await repos.clusters.get(cluster_id)
        if intent is None:
            return None
        if record is not None and not self._still_to_terminate(record):
            await self._accepted(cluster_id)  # it already ends (or ended) at AI Reserve
            return None
        with counting_sent() as sent:  # what AI Reserve received: the client retries too
            try:
                wire = await self._provider.terminate_cluster(cluster_id)
            except api.NotFound:
                await self._accepted(cluster_id, sent=sent.requests)
                await self._watching.sync(cluster_id)  # gone at AI Reserve: no longer bills
                await self._audit_retried(intent, record)
                return None
            except api.ApiError as exc:
                await self._failed(intent, exc, sent=sent.requests)
                return exc
        await self._accepted(cluster_id, sent=sent.requests)
        await self._watching.sync(cluster_id, wire=wire)
        log.info("AI Reserve accepted the terminate of %s (attempt %d)", cluster_id,
                 intent.attempts)
        await self._audit_retried(intent, record)
        return None

    async def _audit_retried(self, intent: TerminationIntent,
                             record: ClusterRecord | None) -> None:
        """The trail's \"done\" for a terminate that took more than one attempt: its asking was
        written as failed (AI Reserve didn't take it then), so the success gets its own row."""
        if intent.attempts <= 1:
            return  # the first attempt took: the asking's own row says ok
        person = intent.requested_by not in (POLICY, BY_IDLE_RULE)
        failed = intent.attempts - 1
        await self._audit.write(
            actor=Actor(user_id=intent.requested_by) if person else None, action="terminate",
            subject_id=intent.cluster_id, outcome="ok",
            amount_cents=record.hourly_cents if record is not None else None,
            detail=f"retried: AI Reserve took the terminate on attempt {intent.attempts}, after "
                   f"{failed} failed attempt{'s' if failed != 1 else ''} (last: "
                   f"{error_words(intent.last_error) or 'an error'})")

    @staticmethod
    def _still_to_terminate(record: ClusterRecord) -> bool:
        return record.status.is_live and record.status is not ClusterState.TERMINATING

    async def _accepted(self, cluster_id: str, *, sent: int = 0) -> None:
        async with self._db.transaction() as repos:
            await repos.terminations.sent(cluster_id, sent)
            await repos.terminations.move(cluster_id, from_=TerminationState.PENDING,
                                          to=TerminationState.ACCEPTED, now=self._clock.now())

    async def _failed(self, intent: TerminationIntent, exc: api.ApiError, *, sent: int) -> None:
        now = self._clock.now()
        retry_at = now + retry_delay(intent.attempts)
        async with self._db.transaction() as repos:
            await repos.terminations.sent(intent.cluster_id, sent)
            await repos.terminations.failed(intent.cluster_id, now=now, error=exc.code,
                                            retry_at=retry_at)
            warn = (intent.attempts >= WARN_AFTER_ATTEMPTS
                    and await repos.terminations.warn_once(intent.cluster_id, now=now))
            record = await repos.clusters.get(intent.cluster_id)
            counted = await repos.terminations.get(intent.cluster_id) or intent
        log.warning("terminate of %s failed (attempt %d, %d requests in all, %s); next attempt "
                    "at %s", intent.cluster_id, intent.attempts, requests_sent(counted),
                    exc.code, f"{retry_at:%H:%M:%S}")
        if warn and record is not None:
            await self._tell(intent, record, (
                f"AI Reserve has refused {_requests(counted)} for `{record.id}` "
                f"(last: {error_words(exc.code)}). It is still billing at "
                f"{money(record.hourly_cents)}/h. I keep trying and will tell you when it is "
                "terminated."))

    async def _announce_if_done(self, intent: TerminationIntent) -> int:
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(intent.cluster_id)
            if record is None or record.status.is_live:
                return 0
            if not await repos.terminations.move(intent.cluster_id,
                                                 from_=TerminationState.ACCEPTED,
                                                 to=TerminationState.DONE,
                                                 now=self._clock.now()):
                return 0  # another replica announced it
        sent = requests_sent(intent)
        tries = f" (AI Reserve took it after {_requests(intent)})" if sent > 1 else ""
        await self._tell(intent, record, (
            f"`{record.id}` is terminated{tries}: it no longer bills. In all it cost "
            f"{money(record.accrued_cents)}."))
        return 1

    async def _tell(self, intent: TerminationIntent, record: ClusterRecord, text: str) -> None:
        user = (record.owner_id if intent.requested_by in (POLICY, BY_IDLE_RULE)
                else intent.requested_by)
        if user is None:
            return
        try:
            await self._notifier.tell(user, text)
        except Exception:  # Slack down: the cluster state is right; the note is best effort
            log.warning("could not tell %s about the terminate of %s", user, record.id,
                        exc_info=True)


def _requests(intent: TerminationIntent) -> str:
    """"17 terminate requests": what AI Reserve was sent, each client retry counted."""
    sent = requests_sent(intent)
    return f"{sent} terminate request{'s' if sent != 1 else ''}"
