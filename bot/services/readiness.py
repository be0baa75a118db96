"""Readiness: follow a running cluster's logs until the owner's readiness line appears.

`running` is infrastructure only (AI Reserve's docs), so for each cluster whose launch form gave
a readiness rule the watcher's sweep reads the new log lines of rank 0 (or of every rank) since
the stored cursor (`since`, the provider's `nextSince`), and once the line is there it posts
**Serving** in the cluster's thread — a notice keyed `serving` in the outbox, queued in the same
transaction that settles the check, so a restart or a second replica never says it twice. When
the owner's limit passes first, the owner is asked (once per limit) with the last lines, what
the wait billed, and Terminate / Keep waiting. Only checks still watching — and idle rules
still in play (bot/services/idle.py) — are read: the same read, one cursor per node, serves
both. Serving is a state: a lost node ends it and the restart makes the check watch again
(the watcher moves it, bot/services/watching.py); the line after the restart brings Serving
back, with what the outage billed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Unpack

from bot.domain.charges import charges_by
from bot.domain.errors import DomainError
from bot.domain.idle import IdleState
from bot.domain.models import Actor, ClusterRecord, ClusterState
from bot.domain.patterns import search
from bot.domain.ports import Notifier
from bot.domain.readiness import (
    ReadinessState,
    ReadinessWatch,
    deadline,
    outage_charges,
)
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.reserve.schemas import LogLine
from bot.services.acting import ActingService, Basics
from bot.services.idle import IdleService, idle_ranks_last
from bot.services.provider_time import ProviderTime

log = logging.getLogger(__name__)

MAX_CONCURRENT = 4
LOG_TAIL = 5000  # the contract's maximum: the most lines one read can see after the cursor
PROMPT_LINES = 12
_WATCHED = (ClusterState.RUNNING, ClusterState.DEGRADED)
_IDLE_FOLLOWED = (IdleState.ACTIVE, IdleState.IDLE, IdleState.TERMINATING)
IDLE_READ_EVERY = timedelta(seconds=60)


MATCH_SECONDS = 5.0  # one cluster's matching, at most: RE2 is linear, this bounds the wait


async def _first_match(pattern: str, lines: Sequence[LogLine], *,
                       cluster_id: str) -> LogLine | None:
    """The first line `pattern` finds, matched off the event loop with a time limit (RE2,
    bot/domain/patterns.py): one cluster's long log never delays another's watch."""
    def scan() -> LogLine | None:
        return next((line for line in lines if search(pattern, line.line)), None)

    try:
        return await asyncio.wait_for(asyncio.to_thread(scan), timeout=MATCH_SECONDS)
    except TimeoutError:
        log.warning("matching %d lines of %s took over %.0f s; read on next poll",
                    len(lines), cluster_id, MATCH_SECONDS)
        return None


def _grace_running(watch: ReadinessWatch) -> bool:
    """An idle rule that fired with the policy's grace: it ends at `idle_terminate_at`."""
    return watch.idle_state is IdleState.IDLE and watch.idle_terminate_at is not None


class ReadinessService(ActingService):
    """The one log follower: readiness checks and idle rules (bot/services/idle.py) share each
    cluster's row, one cursor per node and one provider read per node per poll."""

    def __init__(self, *, provider: ClusterProvider, notifier: Notifier,
                 **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._provider = provider
        self._notifier = notifier
        self.idle = IdleService(notifier=notifier, **basics)
        self.time = ProviderTime(clock=self._clock, provider=provider)
        self._last_pass: datetime | None = None  # host time the previous pass began

    async def follow(self) -> int:
        """One pass over the followed rows (a check still watching, an idle rule in play);
        returns how many were read."""
        async with self._db.transaction() as repos:
            watching = await repos.readiness.followed()
        if any(_grace_running(w) for w in watching):
            # An idle grace ends on AI Reserve's clock: on a reading since the last pass began
            # (the listing's, or a cheap call's when the listing had no answer).
            started = self.time.host_now()
            await self.time.now(since=self._last_pass)
            self._last_pass = started
        gate = asyncio.Semaphore(MAX_CONCURRENT)

        async def one(watch: ReadinessWatch) -> None:
            async with gate:
                try:
                    await self._follow(watch)
                except api.ApiError as exc:  # the cursor stays: the next pass reads on
                    log.warning("reading the logs of %s failed: %s", watch.cluster_id, exc.code)

        await asyncio.gather(*(one(w) for w in watching))
        return len(watching)

    async def _follow(self, watch: ReadinessWatch) -> None:
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(watch.cluster_id)
        if record is None:
            return
        now = self._clock.now()
        if not record.status.is_live or record.status is ClusterState.TERMINATING:
            async with self._db.transaction() as repos:
                await repos.readiness.settle(record.id, to=ReadinessState.ENDED, now=now)
                await repos.readiness.idle_end(record.id, now=now)
            return
        if record.status not in _WATCHED or record.ready_at is None:
            return  # still provisioning: nothing to serve yet
        nodes = record.shape.nodes
        checking = watch.state is ReadinessState.WATCHING and watch.pattern is not None
        matched = set(watch.matched_ranks)
        wanted = {r for r in watch.rule.ranks(nodes) if r not in matched} if checking else set()
        idling = watch.idle is not None and watch.idle_state in _IDLE_FOLLOWED
        grace_over = _grace_running(watch) and watch.idle_terminate_at is not None \
            and now >= watch.idle_terminate_at
        if idling and not checking and not grace_over \
                and now - watch.updated_at < IDLE_READ_EVERY:
            # Idle rules count minutes: a read a minute is plenty (AI Reserve's budget) — but
            # at the end of a grace the read comes at once, at the time the DM stated.
            return
        if idling and watch.idle is not None:
            wanted |= set(watch.idle.ranks(nodes))
        cursors = dict(watch.cursors)
        read: dict[int, list[LogLine]] = {}
        for rank in sorted(wanted):  # one read per node, from its one cursor
            logs = await self._provider.cluster_logs(record.id, node=rank, tail=LOG_TAIL,
                                                     since=cursors.get(str(rank)))
            if logs.next_since is not None:
                cursors[str(rank)] = logs.next_since
            read[rank] = logs.lines
        if wanted:  # the reads' answers are newer readings of AI Reserve's clock, and its lines
            # were written by then: what is decided now (an idle DM's end) starts from there
            now = max([self._clock.now(), *(line.ts for lines in read.values() for line in lines)])
        tails = [line.line for line in read.get(0, [])[-PROMPT_LINES:]]
        last = idle_ranks_last(watch, record, read) if idling else watch.last_line_at
        async with self._db.transaction() as repos:
            await repos.readiness.read_to(watch, cursors=cursors, last_line_at=last, now=now)
        if checking:
            await self._check(record, watch, read, tails=tails, now=now)
        if idling and watch.idle is not None and last is not None:
            done = None
            if watch.idle.done is not None and watch.idle_state is IdleState.ACTIVE:
                lines = [line for rank in watch.idle.ranks(nodes) for line in read.get(rank, [])]
                done = await _first_match(watch.idle.done, lines, cluster_id=record.id)
            await self.idle.after_read(record, watch, done=done, last_line_at=last,
                                       tails=tails, now=now)

    async def _check(self, record: ClusterRecord, watch: ReadinessWatch,
                     read: dict[int, list[LogLine]], *, tails: list[str],
                     now: datetime) -> None:
        """The readiness check's part of one read: Serving, or the owner asked at the limit."""
        assert record.ready_at is not None and watch.pattern is not None
        matched = set(watch.matched_ranks)
        seen_at: datetime | None = None
        for rank, lines in read.items():
            if rank in matched or rank not in watch.rule.ranks(record.shape.nodes):
                continue
            hit = await _first_match(watch.pattern, lines, cluster_id=record.id)
            if hit is not None:
                matched.add(rank)
                seen_at = hit.ts if seen_at is None else max(seen_at, hit.ts)
        needed = set(watch.rule.ranks(record.shape.nodes))
        if needed <= matched:
            await self._serving(record, watch, at=seen_at or now, now=now)
            return
        due = watch.deadline_at
        async with self._db.transaction() as repos:
            if due is None and watch.prompts == 0:  # the clock starts at ready
                due = deadline(ready_at=record.ready_at, limit_minutes=watch.limit_minutes,
                               prompts=0)
                await repos.readiness.advance(record.id, now=now, deadline_at=due)
            await repos.readiness.advance(record.id, now=now, matched_ranks=sorted(matched))
        if due is not None and now >= due:
            await self._ask(record, watch, tails=tails, now=now)

    async def _serving(self, record: ClusterRecord, watch: ReadinessWatch, *, at: datetime,
                       now: datetime) -> None:
        ready = record.ready_at
        assert ready is not None
        at = max(at, ready)
        stopped = watch.stopped_at
        if stopped is None:
            charges = charges_by(record, at)  # marks with every node down: not charged
            key, facts = "serving", NoticeFacts(waited_seconds=int((at - ready).total_seconds()),
                                                waiting_charges=charges,
                                                waiting_cents=charges * record.hourly_cents)
        else:  # serving again after a lost node: once per serving period
            back = watch.rearmed_at or stopped
            at = max(at, back)
            charges = outage_charges(record, began=stopped, until=at)
            key = f"serving:{len(watch.served) + 1}"
            facts = NoticeFacts(waited_seconds=int((at - back).total_seconds()),
                                waiting_charges=charges,
                                waiting_cents=charges * record.hourly_cents,
                                stopped_at=stopped, restarted_at=back)
        notice = Notice(cluster_id=record.id, key=key, kind=NoticeKind.SERVING, created_at=now,
                        facts=facts)
        async with self._db.transaction() as repos:
            if not await repos.readiness.settle(record.id, to=ReadinessState.SERVING, now=now,
                                                serving_at=at):
                return  # another replica (or pass) settled it first
            await repos.notices.add_new([notice])
        await self._notifier.refresh_cluster(record.id)

    async def _ask(self, record: ClusterRecord, watch: ReadinessWatch, *, tails: list[str],
                   now: datetime) -> None:
        ready = record.ready_at
        assert ready is not None
        if not tails:  # nothing new since the cursor: show the last lines anyway
            logs = await self._provider.cluster_logs(record.id, node=0, tail=PROMPT_LINES)
            tails = [line.line for line in logs.lines]
        prompt = watch.prompts + 1
        stopped = watch.stopped_at
        if stopped is None:
            charges = charges_by(record, now)
            facts = NoticeFacts(waited_seconds=int((now - ready).total_seconds()),
                                waiting_charges=charges,
                                waiting_cents=charges * record.hourly_cents,
                                log_lines=tuple(tails), prompt=prompt)
        else:  # not serving again since a node was lost: counted from the restart
            back = watch.rearmed_at or stopped
            charges = outage_charges(record, began=stopped)
            facts = NoticeFacts(waited_seconds=int((now - back).total_seconds()),
                                waiting_charges=charges,
                                waiting_cents=charges * record.hourly_cents,
                                log_lines=tuple(tails), prompt=prompt, stopped_at=stopped,
                                restarted_at=back)
        notice = Notice(
            cluster_id=record.id, key=f"not_serving:{prompt}", kind=NoticeKind.NOT_SERVING,
            created_at=now, facts=facts)
        async with self._db.transaction() as repos:
            if await repos.readiness.ask(record.id, shown=watch.prompts, now=now):
                await repos.notices.add_new([notice])

    async def keep_waiting(self, *, cluster_id: str, prompt: int,
                           actor: Actor) -> ClusterRecord:
        """Keep waiting on the `prompt`-th ask: the limit starts again from now."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            record = await repos.clusters.get(cluster_id)
            watch = await repos.readiness.get(cluster_id)
            if record is None or watch is None:
                raise DomainError(f"I know no readiness check for `{cluster_id[:64]}`.")
            await self._owner_or_approver(
                record, actor, "Only the cluster's owner or an approver can say that.")
            if watch.state is not ReadinessState.WATCHING:
                raise DomainError(f"`{cluster_id}` is {watch.state.value} now; nothing to "
                                  "wait for.")
            until = now + watch.rule.limit
            if not await repos.readiness.keep_waiting(cluster_id, prompt=prompt, until=until,
                                                      now=now):
                raise DomainError("That question was already answered.")
        await self._audit.kept_billing(
            actor=actor, action="keep_waiting", record=record,
            kept=f"readiness limit extended {watch.limit_minutes} min")
        return record
