"""Idle rules: what the log follower (bot/services/readiness.py) hands over after each read.

For each cluster whose launch gave an idle rule (bot/domain/idle.py), the follower reads rank 0
(or every rank) once per poll — the same read, the same cursor as its readiness check — and
passes the new lines here. A done line, or N quiet minutes, moves the rule from active to idle
(a compare-and-set on the row's state and episode) and queues ONE owner DM keyed by the episode
in the same transaction: a restart or a second replica never asks twice. With the policy's
`idle_terminate_after_minutes` the same move sets when it is terminated; a warning goes to the
cluster's thread before, and past it the rule moves to terminating (again once) before the
durable terminate intent is made (bot/services/termination.py), so the receipt says why.
**Keep for N h** moves it back to active and postpones every rule until then.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Unpack

from bot.domain.charges import charges_by
from bot.domain.errors import DomainError
from bot.domain.idle import Fired, IdleState, quiet_fired, warn_at
from bot.domain.models import Actor, ClusterRecord
from bot.domain.policy import money
from bot.domain.ports import Notifier
from bot.domain.readiness import ReadinessWatch
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from bot.reserve.schemas import LogLine
from bot.services.acting import ActingService, Basics

log = logging.getLogger(__name__)

Terminate = Callable[..., Awaitable[Any]]


class IdleService(ActingService):
    def __init__(self, *, notifier: Notifier, **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._notifier = notifier
        # TerminationService.terminate_for_idle (set by bot/app/runtime.py: it is built later).
        self.terminate: Terminate | None = None

    async def after_read(self, record: ClusterRecord, watch: ReadinessWatch, *,
                         done: LogLine | None, last_line_at: datetime,
                         tails: Sequence[str], now: datetime) -> None:
        """Move the rule on after one read: `done` is the first new line that matched the
        done pattern (matched off the event loop by the follower), `last_line_at` the newest
        line on the rule's ranks (ready if none yet)."""
        rule = watch.idle
        if rule is None:
            return
        if watch.idle_state is IdleState.ACTIVE:
            if watch.kept_until is not None and now < watch.kept_until:
                return  # Keep for N h: every rule waits until then
            fired = (Fired(since=done.ts, reason="done", line=done.line[:300])
                     if done is not None else
                     quiet_fired(rule, last_line_at=last_line_at, now=now))
            if fired is not None:
                await self._fire(record, watch, fired, tails=tails, now=now)
        elif watch.idle_state is IdleState.IDLE:
            await self._grace(record, watch, now=now)
        elif watch.idle_state is IdleState.TERMINATING:
            await self._terminate(record)  # an earlier attempt didn't land: again (idempotent)

    async def _fire(self, record: ClusterRecord, watch: ReadinessWatch, fired: Fired, *,
                    tails: Sequence[str], now: datetime) -> None:
        assert record.ready_at is not None
        since = max(fired.since, record.ready_at)
        grace = self._people.policy_for(record).idle_terminate_after_minutes
        terminate_at = now + timedelta(minutes=grace) if grace is not None else None
        episode = watch.idle_episode + 1
        # The one source of charges (bot/domain/charges.py): the hour marks AI Reserve charged
        # in [since, now] — a mark with every node down was not charged.
        charges = charges_by(record, now) - charges_by(record, since - timedelta(microseconds=1))
        notice = Notice(
            cluster_id=record.id, key=f"idle:{episode}", kind=NoticeKind.IDLE, created_at=now,
            facts=NoticeFacts(
                waited_seconds=int((now - since).total_seconds()), waiting_charges=charges,
                waiting_cents=charges * record.hourly_cents, log_lines=tuple(tails),
                prompt=episode, idle_since=since, idle_reason=fired.reason,
                idle_line=fired.line, terminate_at=terminate_at,
                keep_hours=self._people.policy_for(record).idle_keep_hours))
        async with self._db.transaction() as repos:
            if not await repos.readiness.idle_move(
                    record.id, from_=IdleState.ACTIVE, episode=watch.idle_episode,
                    to=IdleState.IDLE, now=now, idle_episode=episode, idle_since=since,
                    idle_fired_at=now, idle_terminate_at=terminate_at):
                return  # another replica (or pass) fired it first
            await repos.notices.add_new([notice])
        log.info("%s is idle since %s (%s)", record.id, f"{since:%H:%M}", fired.reason)
        await self._notifier.refresh_cluster(record.id)

    async def _grace(self, record: ClusterRecord, watch: ReadinessWatch, *,
                     now: datetime) -> None:
        end, fired = watch.idle_terminate_at, watch.idle_fired_at
        policy = self._people.policy_for(record)  # its installation's
        if end is None or fired is None:
            return  # the policy leaves it to the owner
        if now < end:
            if now >= warn_at(end, fired):
                notice = Notice(cluster_id=record.id, key=f"idle_warning:{watch.idle_episode}",
                                kind=NoticeKind.IDLE_WARNING, created_at=now,
                                facts=NoticeFacts(prompt=watch.idle_episode,
                                                  idle_since=watch.idle_since, terminate_at=end,
                                                  keep_hours=policy.idle_keep_hours))
                async with self._db.transaction() as repos:
                    await repos.notices.add_new([notice])  # once per episode: keyed
            return
        async with self._db.transaction() as repos:
            if not await repos.readiness.idle_move(
                    record.id, from_=IdleState.IDLE, episode=watch.idle_episode,
                    to=IdleState.TERMINATING, now=now):
                return  # kept meanwhile, or another replica moved it
        since = watch.idle_since or fired
        await self._audit.write(
            actor=None, action="idle_terminate", subject_id=record.id, outcome="ok",
            amount_cents=record.hourly_cents,
            detail=f"idle since {since:%Y-%m-%d %H:%M} UTC; nobody kept it within the "
                   f"policy's {policy.idle_terminate_after_minutes} min grace "
                   f"(it billed {money(record.hourly_cents)}/h)")
        await self._terminate(record)

    async def _terminate(self, record: ClusterRecord) -> None:
        if self.terminate is None:
            log.error("no terminate for idle clusters was wired in; %s stays", record.id)
            return
        try:
            await self.terminate(cluster_id=record.id)
        except DomainError as exc:  # the intent is stored: its own sweep retries
            log.warning("terminating idle %s: %s", record.id, exc.user_message)

    async def keep(self, *, cluster_id: str, episode: int, hours: int,
                   actor: Actor) -> ClusterRecord:
        """Keep for N h on the `episode`-th idle DM: the rules wait until then, no terminate."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
            watch = await repos.readiness.get(cluster_id)
            if record is None or watch is None or watch.idle is None:
                raise DomainError(f"I know no idle rule for `{cluster_id[:64]}`.")
            await self._owner_or_approver(
                record, actor, "Only the cluster's owner or an approver can keep it.")
            if watch.idle_state is IdleState.TERMINATING or not record.status.is_live:
                raise DomainError(f"`{cluster_id}` is already being terminated "
                                  f"({record.status.value}); keeping it changes nothing.")
            until = now + timedelta(hours=hours)
            if watch.idle_state is not IdleState.IDLE or watch.idle_episode != episode or \
                    not await repos.readiness.idle_move(
                        cluster_id, from_=IdleState.IDLE, episode=episode,
                        to=IdleState.ACTIVE, now=now, kept_until=until,
                        idle_terminate_at=None):
                raise DomainError("That idle notice was already answered.")
        await self._audit.kept_billing(
            actor=actor, action="keep_idle", record=record,
            kept=f"kept {hours} h while idle (until {until:%H:%M} UTC)")
        await self._notifier.refresh_cluster(cluster_id)
        return record


def idle_ranks_last(watch: ReadinessWatch, record: ClusterRecord,
                    lines: Mapping[int, Sequence[LogLine]]) -> datetime:
    """The newest line on the idle rule's ranks (what the quiet rule counts from): the stored
    one, the new lines', never before ready."""
    assert watch.idle is not None and record.ready_at is not None
    stamps = [line.ts for rank in watch.idle.ranks(record.shape.nodes)
              for line in lines.get(rank, ())]
    known = [t for t in (watch.last_line_at, record.ready_at, *stamps) if t is not None]
    return max(known)
